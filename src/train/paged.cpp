// Buffers of pages written on demand (src/train/paged.h).
#include "train/paged.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "genperf/error.h"

namespace genperf::train {

Tensor paged_zeros(size_t n) {
  const size_t bytes = round_up(std::max<size_t>(n, 1) * sizeof(float), kWindowPageBytes);
  const size_t mapped = bytes + kWindowPageBytes;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  GP_CHECK(p != MAP_FAILED, "[train] cannot reserve ", mapped, " bytes of address space: ", std::strerror(errno));
  char* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(p), kWindowPageBytes));
  madvise(aligned, bytes, MADV_HUGEPAGE);  // a hint: without THP the buffer has small pages
  std::shared_ptr<void> owner(p, [mapped](void* q) { munmap(q, mapped); });
  return Tensor::wrap(aligned, {int64_t(n)}, DType::F32, owner);
}

void release_pages(float* base, size_t lo, size_t hi) {
  const size_t a = round_up(lo, page_floats()), b = hi / page_floats() * page_floats();
  if (b > a) madvise(base + a, (b - a) * sizeof(float), MADV_DONTNEED);
}

size_t resident_bytes(const float* base, size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t pages = round_up(n * sizeof(float), page) / page;
  std::vector<unsigned char> in(pages);
  if (mincore(const_cast<float*>(base), pages * page, in.data()) != 0) return 0;
  size_t r = 0;
  for (unsigned char c : in) r += c & 1;
  return r * page;
}

}  // namespace genperf::train

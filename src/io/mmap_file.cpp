#include "io/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "genperf/error.h"

namespace genperf {
namespace {

// Empty files map to this byte: data() is never null and reading zero bytes from it is valid.
uint8_t g_empty[1] = {0};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::shared_ptr<MmapFile> MmapFile::open(const std::string& path) {
  // O_NONBLOCK so that a FIFO given by mistake does not block open(); no effect on regular files.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("[io] ", path, ": cannot open: ", errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    fail("[io] ", path, ": cannot stat: ", why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("[io] ", path, ": not a regular file", S_ISDIR(st.st_mode) ? " (a directory)" : "");
  }
  std::shared_ptr<MmapFile> f(new MmapFile());
  f->name_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    f->data_ = g_empty;
    return f;
  }
  void* p = ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  const std::string why = p == MAP_FAILED ? errno_text() : "";
  ::close(fd);  // the mapping stays valid without the descriptor
  if (p == MAP_FAILED) fail("[io] ", path, ": cannot mmap ", f->size_, " bytes: ", why);
  f->data_ = static_cast<uint8_t*>(p);
  f->mapped_ = true;
  return f;
}

std::shared_ptr<MmapFile> MmapFile::from_bytes(std::string name, const void* data, size_t size) {
  std::shared_ptr<MmapFile> f(new MmapFile());
  f->name_ = std::move(name);
  f->size_ = size;
  if (size == 0) {
    f->data_ = g_empty;
    return f;
  }
  f->data_ = new uint8_t[size];
  std::memcpy(f->data_, data, size);
  return f;
}

MmapFile::~MmapFile() {
  if (mapped_)
    ::munmap(data_, size_);
  else if (data_ != g_empty)
    delete[] data_;
}

Tensor tensor_from_file(const std::shared_ptr<MmapFile>& file, size_t offset,
                        const std::vector<int64_t>& shape, DType dtype) {
  uint8_t* p = file->data_ + offset;
  const size_t align = traits(dtype).block_size == 1 ? traits(dtype).block_bytes : 1;
  if (reinterpret_cast<uintptr_t>(p) % align == 0) {
    Tensor t = Tensor::wrap(p, shape, dtype, file);
    t.storage()->file_backed = file->mapped_;
    return t;
  }
  Tensor t = Tensor::zeros(shape, dtype);
  if (t.nbytes() > 0) std::memcpy(t.raw(), p, t.nbytes());
  return t;
}

OutputFile::OutputFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail("[io] ", tmp_, ": cannot create: ", errno_text());
}

OutputFile::~OutputFile() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void OutputFile::write(const void* data, size_t n) {
  GP_CHECK(f_ != nullptr, "[io] ", path_, ": write after commit");
  if (n == 0) return;
  if (std::fwrite(data, 1, n, f_) != n) fail("[io] ", tmp_, ": write failed: ", errno_text());
  pos_ += n;
}

void OutputFile::pad_to(size_t alignment, char fill) {
  static const char kZeros[64] = {};
  const size_t pad = size_t((alignment - pos_ % alignment) % alignment);
  if (fill == '\0') {
    for (size_t left = pad; left > 0;) {
      const size_t n = left < sizeof kZeros ? left : sizeof kZeros;
      write(kZeros, n);
      left -= n;
    }
  } else {
    write(std::string(pad, fill));
  }
}

void OutputFile::commit() {
  GP_CHECK(f_ != nullptr, "[io] ", path_, ": committed twice");
  bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  std::string why = ok ? "" : errno_text();
  if (std::fclose(f_) != 0 && ok) {
    ok = false;
    why = errno_text();
  }
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    fail("[io] ", tmp_, ": cannot flush to disk: ", why);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string err = errno_text();
    std::remove(tmp_.c_str());
    fail("[io] ", path_, ": cannot rename ", tmp_, " into place: ", err);
  }
}

Tensor contiguous_cpu(const Tensor& t, const std::string& context) {
  GP_CHECK(t.defined(), context, ": tensor is undefined");
  GP_CHECK(t.device() == Device::CPU, context, ": tensor is on ", device_name(t.device()),
           " (copy it to the CPU before saving)");
  return t.is_contiguous() ? t : t.clone();
}

}  // namespace genperf

#include "bench/peaks.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/onednn.h"
#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/tensor.h"
#include "genperf/ops.h"

namespace genperf::bench {

// Each thread sums its share with the widest loads of the ISA level in use (the kernels' own
// sum_row, four accumulators), from several streams at once: the share is cut into kStreams
// parts read in turn, 4 KiB from each, so that the figure is what the memory system delivers
// rather than what one stream per core draws. The buffer is 64-byte aligned and asks for 2 MiB
// pages (the weights get 4 KiB ones) where transparent huge pages are on, so that the probe's reads are at least as favourable as
// the kernels'. Both matter on the Zen 5 VM this was written on (2 threads, one run, GB/s): a
// 16-byte aligned single stream read 55, a 64-byte aligned one 71-78, four aligned streams 81-88;
// the integer GEMV kernels (one contiguous range of rows per thread) reached up to 72 while the
// first probe said 61. The sum is consumed (a volatile sink), so the reads cannot be dropped.
namespace {
constexpr size_t kStreams = 4, kPieceFloats = 1024;
}

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

BandwidthProbe::BandwidthProbe(size_t bytes)
    : data_(static_cast<float*>(std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage))),
      floats_(bytes / 4),
      reads_(int(std::max<size_t>(1, (size_t(256) << 20) / std::max<size_t>(bytes, 1)))) {
  GP_CHECK(data_ && floats_ > 0, "[bench] cannot allocate ", bytes, " bytes for the bandwidth probe");
  // A hint, refused where THP is off. On this VM 2 MiB pages also halve the time to fault the
  // buffer in (1 GiB: 2.1-2.7 s against 4.9-5.1 s with 4 KiB pages, under load).
  madvise(data_, (bytes + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);
  // Filled from the threads that will read, so pages land near them (first touch).
#pragma omp parallel for num_threads(num_threads()) schedule(static)
  for (int64_t i = 0; i < int64_t(floats_); ++i) data_[size_t(i)] = float(i & 1023) * 0.001f;
  pass();  // warm-up: page tables, and the threads' first start
}

BandwidthProbe::~BandwidthProbe() { std::free(data_); }

double BandwidthProbe::pass() const {
  const auto sum = cpu::kernels().sum_row;
  const int nt = num_threads();
  static volatile float sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
  {
    const size_t t = size_t(omp_get_thread_num()), n = size_t(omp_get_num_threads());
    const size_t lo = floats_ * t / n, hi = floats_ * (t + 1) / n;
    const size_t part = (hi - lo) / kStreams / kPieceFloats * kPieceFloats;
    for (int r = 0; r < reads_; ++r) {
      for (size_t off = 0; off < part; off += kPieceFloats)
        for (size_t s = 0; s < kStreams; ++s)
          total += sum(data_ + lo + s * part + off, int64_t(kPieceFloats));
      total += sum(data_ + lo + kStreams * part, int64_t(hi - lo - kStreams * part));  // the rest
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink = sink + total;
  return double(floats_ * 4) * reads_ / s * 1e-9;
}

double BandwidthProbe::measure(int passes) const {
  std::vector<double> gbs;
  for (int i = 0; i < passes; ++i) gbs.push_back(pass());
  return Stats::of(std::move(gbs)).median;
}

double measure_bandwidth_gbs() { return BandwidthProbe(memory_probe_bytes()).measure(5); }

double measure_gemm_peak_gflops(DType weight_type) {
  constexpr int64_t n = 2048;
  Rng rng(2048);
  Tensor x = Tensor::zeros({n, n});
  Tensor wf = Tensor::zeros({n, n});
  for (int64_t i = 0; i < n * n; ++i) {
    x.data<float>()[i] = float(rng.normal());
    wf.data<float>()[i] = float(rng.normal() * 0.02);
  }
  const Tensor w = wf.to(weight_type);
  Tensor y = Tensor::zeros({n, n});
  const Stats s = measure([&] { cpu::linear_gemm(x, w, nullptr, y, n, n, n); }, 1, 5);
  return 2.0 * double(n) * double(n) * double(n) / s.median * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Compute types and their peaks.

const char* gemm_compute_name(GemmCompute c) {
  switch (c) {
    case GemmCompute::F32: return "f32";
    case GemmCompute::BF16: return "bf16";
    case GemmCompute::Int8: return "int8";
  }
  return "?";
}

GemmCompute gemm_compute_type(DType weight, bool has_int8_gemm, bool bf16_matmul) {
  if (has_int8_gemm) return GemmCompute::Int8;
  const bool block = traits(weight).block_size > 1;  // decoded panel by panel, bf16 where it runs
  if ((weight == DType::BF16 || block) && bf16_matmul) return GemmCompute::BF16;
  return GemmCompute::F32;  // f32 weights, and every type converted to f32 blocks
}

GemmCompute gemm_compute_type(DType weight) {
  bool int8 = false;
  if (traits(weight).block_size > 1) {
    // The backend's own answer: linear_qgemm does nothing and says false where it has no integer
    // GEMM for this type at this level. The weight is prepared as a model's weights are.
    constexpr int64_t K = 256, N = 32;
    Rng rng(7);
    Tensor wf = Tensor::zeros({N, K}), x = Tensor::zeros({1, K}), y = Tensor::zeros({1, N});
    for (int64_t i = 0; i < N * K; ++i) wf.data<float>()[i] = float(rng.normal());
    const Tensor w = ops::prepare_weight(wf.to(weight));
    int8 = cpu::linear_qgemm(x, w, nullptr, y, 1, K, N);
  }
  return gemm_compute_type(weight, int8, isa() == Isa::Avx512 && cpu_features().avx512_bf16);
}

GemmCompute fastest(const std::vector<GemmCompute>& types) {
  GP_CHECK(!types.empty(), "[bench] no compute types to choose from");
  return *std::max_element(types.begin(), types.end());  // the enum is ordered by peak
}

namespace {
constexpr int64_t kPeakN = 2048;
}

// One matmul with its operands: src [n, n] row-major, weights in oneDNN's preferred layout
// (reordered once, the most favourable case), dst f32. On the backend's engine, whose first use
// caps oneDNN's ISA by GENPERF_ISA: the peak is that of the level's own GEMM path (linear_gemm
// runs prefill on the same oneDNN, capped the same way), not the best level's.
struct GemmPeakProbe::Impl {
  dnnl::engine eng = cpu::onednn_engine();
  dnnl::stream stream{eng};
  dnnl::matmul prim;
  dnnl::memory src, wei, dst;
};

GemmPeakProbe::GemmPeakProbe(GemmCompute type) : impl_(std::make_unique<Impl>()) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t n = kPeakN;
  const dt st = type == GemmCompute::Int8 ? dt::u8 : type == GemmCompute::BF16 ? dt::bf16 : dt::f32;
  const dt wt = type == GemmCompute::Int8 ? dt::s8 : st;
  Impl& m = *impl_;
  const dnnl::memory::desc src_md({n, n}, st, tag::ab), dst_md({n, n}, dt::f32, tag::ab);
  const dnnl::memory::desc wei_any({n, n}, wt, tag::any), wei_plain({n, n}, wt, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), m.eng);
  how_ = cat("oneDNN ", gemm_compute_name(type), " matmul ", n, "^3 (", pd.impl_info_str(), ", oneDNN ISA ",
             cpu::onednn_isa_name(), ", genperf level ", isa_path(), ")");
  GP_CHECK(std::string(pd.impl_info_str()).rfind("ref", 0) != 0, "[bench] oneDNN has only its reference ",
           gemm_compute_name(type), " matmul on this machine: no peak to measure");
  m.prim = dnnl::matmul(pd);
  m.src = dnnl::memory(src_md, m.eng);
  m.dst = dnnl::memory(dst_md, m.eng);
  m.wei = dnnl::memory(pd.weights_desc(), m.eng);
  // Random operands (BENCHMARKING.md, rule 7), as raw bytes of each type.
  Rng rng(2048);
  dnnl::memory wp(wei_plain, m.eng);
  auto fill = [&](dnnl::memory& mem, dt t) {
    const size_t count = size_t(n * n);
    if (t == dt::f32) {
      float* p = static_cast<float*>(mem.get_data_handle());
      for (size_t i = 0; i < count; ++i) p[i] = float(rng.normal());
    } else if (t == dt::bf16) {
      uint16_t* p = static_cast<uint16_t*>(mem.get_data_handle());
      for (size_t i = 0; i < count; ++i) p[i] = f32_to_bf16(float(rng.normal()));
    } else {
      uint8_t* p = static_cast<uint8_t*>(mem.get_data_handle());
      for (size_t i = 0; i < count; ++i) p[i] = uint8_t(rng.next());  // u8, or s8's bits
    }
  };
  fill(m.src, st);
  fill(wp, wt);
  dnnl::reorder(wp, m.wei).execute(m.stream, wp, m.wei);
  m.stream.wait();
  sample();  // warm-up
}

GemmPeakProbe::~GemmPeakProbe() = default;

double GemmPeakProbe::sample() const {
  Impl& m = *impl_;
  if (omp_get_max_threads() != num_threads()) omp_set_num_threads(num_threads());
  const auto t0 = std::chrono::steady_clock::now();
  m.prim.execute(m.stream, {{DNNL_ARG_SRC, m.src}, {DNNL_ARG_WEIGHTS, m.wei}, {DNNL_ARG_DST, m.dst}});
  m.stream.wait();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * double(kPeakN) * double(kPeakN) * double(kPeakN) / s * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Caches and the rules.

size_t parse_cache_size(const std::string& text) {
  size_t i = 0, v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') v = v * 10 + size_t(text[i++] - '0');
  if (i == 0) return 0;
  const char unit = i < text.size() ? text[i] : '\0';
  if (unit == 'K' || unit == 'k') return v << 10;
  if (unit == 'M' || unit == 'm') return v << 20;
  if (unit == 'G' || unit == 'g') return v << 30;
  return unit == '\0' || unit == '\n' ? v : 0;
}

size_t last_level_cache_bytes() {
  int best_level = 0;
  size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = cat("/sys/devices/system/cpu/cpu0/cache/index", i, "/");
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(lf >> level) || !(tf >> type) || !(sf >> size)) continue;
    if (type == "Instruction") continue;
    const size_t b = parse_cache_size(size);
    if (level > best_level && b > 0) best_level = level, best = b;
  }
  if (best > 0) return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
    if (const long v = sysconf(name); v > 0) return size_t(v);
#endif
  return 0;
}

size_t memory_probe_bytes(size_t llc_bytes, size_t phys_bytes) {
  size_t b = std::max(size_t(1) << 30, 2 * llc_bytes);  // a cyclic read of 2x an LRU cache misses
  if (phys_bytes > 0) b = std::min(b, phys_bytes / 4);
  return b / 64 * 64;
}

size_t memory_probe_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return memory_probe_bytes(last_level_cache_bytes(), pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0);
}

bool fits_in_cache(double bytes, size_t llc_bytes) { return llc_bytes > 0 && bytes <= double(llc_bytes); }

FloorFraction against_floor(double measured, double floor) {
  GP_CHECK(floor > 0, "[bench] a floor must be positive, got ", floor);
  const double f = measured / floor;
  return {f, f > 1.0};
}

}  // namespace genperf::bench

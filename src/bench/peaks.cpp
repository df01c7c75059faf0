#include "bench/peaks.h"

#include <omp.h>

#include <cstdint>
#include <cstdlib>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"
#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/tensor.h"

namespace genperf::bench {

// Each thread sums its share with the widest loads of the ISA level in use (the kernels' own
// sum_row), from several streams at once: the share is cut into kStreams parts read in turn,
// 4 KiB from each, so that the figure is what the memory system delivers rather than what one
// stream per core draws. The buffer is 64-byte aligned. Both matter on the Zen 5 VM this was
// written on (2 threads, one run, GB/s): a 16-byte aligned single stream read 55, a 64-byte
// aligned one 71-78, four aligned streams 81-88; the integer GEMV kernels (one contiguous range
// of rows per thread) reached up to 72 while the first probe said 61.
namespace {
constexpr size_t kStreams = 4, kPieceFloats = 1024;
}

BandwidthProbe::BandwidthProbe(size_t bytes)
    : data_(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))),
      floats_(bytes / 4) {
  GP_CHECK(data_, "[bench] cannot allocate ", bytes, " bytes for the bandwidth probe");
  // Filled from the threads that will read, so pages land near them (first touch).
#pragma omp parallel for num_threads(num_threads()) schedule(static)
  for (int64_t i = 0; i < int64_t(floats_); ++i) data_[size_t(i)] = float(i & 1023) * 0.001f;
}

BandwidthProbe::~BandwidthProbe() { std::free(data_); }

double BandwidthProbe::measure(int passes) const {
  const auto sum = cpu::kernels().sum_row;
  const int nt = num_threads();
  volatile float sink = 0;
  auto pass = [&] {
    float total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      const size_t t = size_t(omp_get_thread_num()), n = size_t(omp_get_num_threads());
      const size_t lo = floats_ * t / n, hi = floats_ * (t + 1) / n;
      const size_t part = (hi - lo) / kStreams / kPieceFloats * kPieceFloats;
      for (size_t off = 0; off < part; off += kPieceFloats)
        for (size_t s = 0; s < kStreams; ++s)
          total += sum(data_ + lo + s * part + off, int64_t(kPieceFloats));
      total += sum(data_ + lo + kStreams * part, int64_t(hi - lo - kStreams * part));  // the rest
    }
    sink = sink + total;
  };
  const Stats s = genperf::measure(pass, 1, passes);
  return double(floats_ * 4) / s.median * 1e-9;
}

double measure_bandwidth_gbs() { return BandwidthProbe(size_t(1) << 30).measure(5); }

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

}  // namespace genperf::bench

#include "bench/peaks.h"

#include <omp.h>

#include <cstdint>
#include <memory>

#include "backend/cpu/cpu_ops.h"
#include "genperf/bench.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/tensor.h"

namespace genperf::bench {
namespace {

// Sums the 64-bit words of [p, p + n) with four independent accumulators (integer adds
// vectorize at baseline x86-64 and do not depend on float reassociation).
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

double measure_bandwidth_gbs() {
  constexpr size_t kBytes = size_t(1) << 30;
  constexpr size_t kWords = kBytes / 8;
  std::unique_ptr<uint64_t[]> data(new uint64_t[kWords]);  // uninitialized: touched below
  const int nt = num_threads();
  // Fill from the threads that will read, so pages land near them (first touch).
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < int64_t(kWords); ++i)
    data[size_t(i)] = uint64_t(i) * 0x9e3779b97f4a7c15ull;
  volatile uint64_t sink = 0;
  auto pass = [&] {
    uint64_t total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      const size_t t = size_t(omp_get_thread_num()), n = size_t(omp_get_num_threads());
      const size_t lo = kWords * t / n, hi = kWords * (t + 1) / n;
      total += sum_words(data.get() + lo, hi - lo);
    }
    sink = sink + total;
  };
  const Stats s = measure(pass, 1, 5);
  return double(kBytes) / s.median * 1e-9;
}

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

// Quantizer speed: GPTQ of one matrix (the Hessian's factorization and the column walk) and the
// imatrix quantizer it starts from, on random weights and a Gram matrix of random correlated
// inputs. Seconds per matrix are what a user waits for per layer.
//   build/bench/bench_quant --benchmark_filter=Gptq
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "genperf/dtype.h"
#include "quant/quantize_internal.h"

using namespace genperf;

namespace {

struct Problem {
  std::vector<float> w;
  std::vector<double> gram;
  std::vector<float> importance;
};

// W [N, K] ~ N(0, 0.02^2) with 1% outliers; H the Gram matrix of inputs x = z + 0.5 z' + noise,
// z' the same inputs shifted by one column (so neighbours correlate): 1.25 on the diagonal, 0.5
// beside it, and a small random symmetric part that keeps it from being banded.
Problem make(int64_t N, int64_t K) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 99);
  Problem p;
  p.w.resize(size_t(N * K));
  for (auto& v : p.w) v = (pick(rng) == 0 ? 8.f : 1.f) * 0.02f * normal(rng);
  p.gram.assign(size_t(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    p.gram[size_t(i * K + i)] = 1.25;
    p.gram[size_t(i * K + (i + 1) % K)] = p.gram[size_t(((i + 1) % K) * K + i)] = 0.5;
  }
  const double e = 0.2 / double(K);  // keeps H diagonally dominant: positive definite
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < i; ++j) {
      const double v = e * normal(rng);
      p.gram[size_t(i * K + j)] += v;
      p.gram[size_t(j * K + i)] += v;
    }
  p.importance.resize(size_t(K));
  for (int64_t i = 0; i < K; ++i) p.importance[size_t(i)] = float(p.gram[size_t(i * K + i)]);
  return p;
}

void BM_Gptq(benchmark::State& state) {
  const auto format = static_cast<DType>(state.range(0));
  const int64_t N = state.range(1), K = state.range(2);
  const Problem p = make(N, K);
  std::vector<uint8_t> out(bytes_for(format, K) * size_t(N));
  for (auto _ : state) quant::gptq_quantize(p.w.data(), N, K, format, p.gram, 128, 0.01, out.data());
  state.SetLabel(dtype_name(format));
  state.counters["weights/s"] = benchmark::Counter(double(N * K), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Imatrix(benchmark::State& state) {
  const auto format = static_cast<DType>(state.range(0));
  const int64_t N = state.range(1), K = state.range(2);
  const Problem p = make(N, K);
  std::vector<uint8_t> out(bytes_for(format, K) * size_t(N));
  for (auto _ : state) quantize_rows(format, p.w.data(), out.data(), N, K, p.importance.data());
  state.SetLabel(dtype_name(format));
  state.counters["weights/s"] = benchmark::Counter(double(N * K), benchmark::Counter::kIsIterationInvariantRate);
}

// The factorization alone (U with U^T U = H^-1), K up to a 7B model's FFN width.
void BM_GptqFactor(benchmark::State& state) {
  const int64_t K = state.range(0);
  const Problem p = make(1, K);
  for (auto _ : state) benchmark::DoNotOptimize(quant::inverse_cholesky_upper(p.gram, K, 0.01));
  // K^3 / 3 multiply-adds for the Cholesky and K^3 / 6 for the inverse: K^3 flops in all.
  state.counters["GFLOP/s"] = benchmark::Counter(double(K) * double(K) * double(K) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The 110M shape's matrices (K = 768: q/k/v/o/gate/up; K = 3072: down) and a 7B-like 4096 x 4096.
void shapes(benchmark::internal::Benchmark* b) {
  for (DType f : {DType::Q4_K, DType::Q2_K})
    for (auto [n, k] : {std::pair{3072, 768}, std::pair{768, 3072}, std::pair{4096, 4096}})
      b->Args({int64_t(f), n, k});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_Gptq)->Apply(shapes)->Iterations(1);
BENCHMARK(BM_GptqFactor)->Arg(3072)->Arg(4096)->Arg(11008)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Imatrix)->Apply(shapes)->MinTime(0.1);

BENCHMARK_MAIN();

// Microbenchmarks of the CPU kernels against this machine's floors (BENCHMARKING.md):
//   GEMV (decode):   GB/s of weight bytes read (packed bytes for the block formats), and the
//                    fraction of the read bandwidth, the best probe pass just before and just
//                    after each repetition (bw_frac; bw_frac0: of the start-up figure).
//                    Weights rotate over copies of >= 512 MiB in all, so they come from memory.
//   GEMV from cache: the same kernels on weights that stay in L2, their compute ceiling.
//   GEMM (prefill):  GFLOP/s at T = 512 for the 110M model's shapes, and the fraction of the
//                    measured 2048^3 GEMM peak of the weights' compute type (bench::
//                    gemm_compute_type: int8 where the block formats run the integer GEMM).
// A fraction above 1 says the floor measured the wrong limit: counter floor_exceeded is then 1
// (BENCHMARKING.md, rule 8).
//   linear by rows:  GEMV kernels, oneDNN (decoded panels for the block formats) and the
//                    integer GEMM side by side for T = 1..512 (the switch-overs).
//   attention:       prefill T = 512 and decode at S = 128 / 512 (12 heads of 64), GFLOP/s.
// Real time, 5 repetitions, median, min and max reported; peaks measured once at start-up.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "bench/peaks.h"
#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/ops.h"

using namespace genperf;

namespace {

Tensor random(const std::vector<int64_t>& shape, DType dt, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  Tensor f = Tensor::zeros(shape);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = float(rng.normal() * scale);
  return dt == DType::F32 ? f : f.to(dt);
}

struct Peaks {
  double bandwidth_gbs = 0;
  double gemm_gflops[3] = {0, 0, 0};  // by bench::GemmCompute: f32, bf16, int8 (0: not run here)
};

const Peaks& peaks() {
  static const Peaks p = [] {
    Peaks r;
    r.bandwidth_gbs = bench::measure_bandwidth_gbs();
    for (auto c : {bench::GemmCompute::F32, bench::GemmCompute::BF16, bench::GemmCompute::Int8}) {
      try {
        const bench::GemmPeakProbe probe(c);
        for (int i = 0; i < 5; ++i) r.gemm_gflops[int(c)] = std::max(r.gemm_gflops[int(c)], probe.sample());
      } catch (const Error&) {  // oneDNN has only its reference kernel for this type here
      }
    }
    return r;
  }();
  return p;
}

// A measured figure against its floor, as counters: the fraction and whether it passes 1.
void floor_counters(benchmark::State& state, const char* name, double measured, double floor) {
  if (floor <= 0) return;  // not measured on this machine
  const bench::FloorFraction f = bench::against_floor(measured, floor);
  state.counters[name] = f.fraction;
  state.counters["floor_exceeded"] = f.exceeded ? 1 : 0;
}

DType dtype_arg(int64_t v) { return DType(v); }

// Argument 4 (where given) 1: the weights as the model holds them, ops::prepare_weight's
// layout (rows interleaved by 16 for the packable block formats); 0: as stored.
bool packed_arg(const benchmark::State& state, int i) { return state.range(i) != 0; }
Tensor maybe_prepared(const Tensor& w, bool packed) { return packed ? ops::prepare_weight(w) : w; }
std::string layout_label(DType wt, const Tensor& w) {
  return std::string(dtype_name(wt)) + (w.layout() == Layout::kRows16 ? " packed" : "");
}

// y[1, N] = x[1, K] · w[N, K]^T, weights rotating over copies that cannot stay in cache.
void BM_Gemv(benchmark::State& state) {
  const DType wt = dtype_arg(state.range(0));
  const int64_t N = state.range(1), K = state.range(2), T = state.range(3);
  const bool packed = packed_arg(state, 4);
  const double bytes = double(bytes_for(wt, N * K));
  const int copies = int(std::max(2.0, std::ceil(512.0 * (1 << 20) / bytes)));
  const Tensor base = random({N, K}, wt, 100, 0.05);
  std::vector<Tensor> ws;
  for (int c = 0; c < copies; ++c)  // same values, other memory
    ws.push_back(maybe_prepared(c == 0 ? base : base.clone(), packed));
  const Tensor x = random({T, K}, DType::F32, 7);
  Tensor y = Tensor::zeros({T, N});
  // The floor of this repetition: the best probe pass just before and just after it (bw_frac),
  // besides the figure measured at start-up (bw_frac0); the machine's bandwidth drifts.
  static const bench::BandwidthProbe probe(bench::memory_probe_bytes());
  auto best_pass = [] { return std::max({probe.pass(), probe.pass(), probe.pass()}); };
  double bw_now = best_pass();
  int c = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    ops::linear(x, ws[size_t(c)], nullptr, y);
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.raw());
  }
  const double gbs = bytes * double(state.iterations()) /
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e-9;
  bw_now = std::max(bw_now, best_pass());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  floor_counters(state, "bw_frac", gbs, bw_now);
  state.counters["bw_frac0"] = benchmark::Counter(bytes * 1e-9 / peaks().bandwidth_gbs,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bw_GB/s"] = bw_now;
  state.SetLabel(layout_label(wt, ws[0]));
}

// The same with a single copy of weights small enough to stay in cache: the kernel's compute
// ceiling in GB/s of packed weights, to set against the bandwidth floor (a kernel that cannot
// run well above bw/threads per thread from cache will not reach the floor from memory).
void BM_QGemvHot(benchmark::State& state) {
  const DType wt = dtype_arg(state.range(0));
  const int64_t N = state.range(1), K = state.range(2), T = state.range(3);
  const double bytes = double(bytes_for(wt, N * K));
  const Tensor w = maybe_prepared(random({N, K}, wt, 100, 0.05), packed_arg(state, 4)),
               x = random({T, K}, DType::F32, 7);
  Tensor y = Tensor::zeros({T, N});
  for (auto _ : state) {
    ops::linear(x, w, nullptr, y);
    benchmark::DoNotOptimize(y.raw());
  }
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(layout_label(wt, w));
}

// y[T, N] = x[T, K] · w[N, K]^T through ops::linear (oneDNN at this T).
void BM_Gemm(benchmark::State& state) {
  const DType wt = dtype_arg(state.range(0));
  const int64_t N = state.range(1), K = state.range(2), T = state.range(3);
  const Tensor w = maybe_prepared(random({N, K}, wt, 5, 0.05), packed_arg(state, 4)),
               x = random({T, K}, DType::F32, 6);
  Tensor y = Tensor::zeros({T, N});
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    ops::linear(x, w, nullptr, y);
    benchmark::DoNotOptimize(y.raw());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = ops::linear_flops(T, K, N);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = peaks().gemm_gflops[int(bench::gemm_compute_type(wt))];
  floor_counters(state, "peak_frac", flops * double(state.iterations()) / seconds * 1e-9, peak);
  state.SetLabel(layout_label(wt, w));
}

// One path of linear pinned (0: GEMV kernels, 1: oneDNN, 2: the integer GEMM of the block
// formats; 3 and 4: 0 and 2 on prepared, i.e. packed, weights), K = 768 -> N = 2048, weights in
// rotation as for BM_Gemv: where GEMV stops beating oneDNN sets cpu::gemv_max_rows (for the
// block formats: the integer GEMV against the integer GEMM, and that against decoded panels).
void BM_LinearRows(benchmark::State& state) {
  const DType wt = dtype_arg(state.range(0));
  const int64_t T = state.range(1), path = state.range(2), N = 2048, K = 768;
  // At least 64 copies and 192 MiB (64 x 3 MiB of bf16): beyond the last-level cache.
  const int copies =
      int(std::max(64.0, std::ceil(192.0 * (1 << 20) / double(bytes_for(wt, N * K)))));
  // Paths 3 and 4: paths 0 and 2 on weights as ops::prepare_weight leaves them (packed where the
  // level packs the type), the model's case.
  const bool prepared = path >= 3;
  const Tensor base = random({N, K}, wt, 200, 0.05);
  std::vector<Tensor> ws;
  for (int c = 0; c < copies; ++c)
    ws.push_back(maybe_prepared(c == 0 ? base : base.clone(), prepared));
  const Tensor x = random({T, K}, DType::F32, 8);
  Tensor y = Tensor::zeros({T, N});
  int c = 0;
  for (auto _ : state) {
    if (path == 0 || path == 3) {
      cpu::linear_gemv(x, ws[size_t(c)], nullptr, y, T, K, N);
    } else if (path == 1) {
      cpu::linear_gemm(x, ws[size_t(c)], nullptr, y, T, K, N);
    } else if (!cpu::linear_qgemm(x, ws[size_t(c)], nullptr, y, T, K, N)) {
      state.SkipWithError("no integer GEMM for this type and CPU");
      break;
    }
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.raw());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(ops::linear_flops(T, K, N) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(layout_label(wt, ws[0]) +
                 (path % 3 == 0 ? " gemv" : path == 1 ? " onednn" : " int-gemm"));
}

// Causal attention, 12 heads of 64 (the 110M model): T queries after q_pos0 cached keys.
void BM_Attention(benchmark::State& state) {
  const int64_t T = state.range(0), q_pos0 = state.range(1), H = 12, D = 64, S = q_pos0 + T;
  const Tensor q = random({T, H * D}, DType::F32, 1), k = random({S, H * D}, DType::F32, 2),
               v = random({S, H * D}, DType::F32, 3);
  Tensor out = Tensor::zeros({T, H * D});
  const float scale = 1.0f / std::sqrt(float(D));
  for (auto _ : state) {
    ops::attention(q, k, v, H, H, q_pos0, scale, out);
    benchmark::DoNotOptimize(out.raw());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(ops::attention_flops(T, H, D, q_pos0) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// One decode step's attention over 12 layers' caches (the 110M shape: 12 heads of 64, a query
// after q_pos0 cached tokens), the caches together larger than the last-level cache, of type kv
// (args: kv type, q_pos0, layout). Layout 0 keeps rows of all heads ([S, H*D] per layer), layout
// 1 is head-major ([H, S, D], as LlamaModel keeps it: each head's keys one stream). Reports GB/s
// of the cache read.
void BM_AttentionDecode(benchmark::State& state) {
  const DType kv = DType(state.range(0));
  const int64_t q_pos0 = state.range(1), H = 12, D = 64, L = 12, S = q_pos0 + 1;
  const bool head_major = state.range(2) == 1;
  const Tensor q = random({1, H * D}, DType::F32, 1);
  Tensor out = Tensor::zeros({1, H * D});
  auto cache = [&](uint64_t seed) {
    const Tensor rows = random({S, H * D}, DType::F32, seed);
    if (!head_major) return rows.to(kv);
    Tensor t = Tensor::zeros({H, S, D}, kv);
    for (int64_t h = 0; h < H; ++h) {
      Tensor dst = t.slice(0, h, 1).view({S, D});
      dst.copy_from(rows.slice(1, h * D, D));
    }
    return t;
  };
  std::vector<Tensor> k, v;
  for (int64_t l = 0; l < L; ++l) {
    k.push_back(cache(uint64_t(10 + 2 * l)));
    v.push_back(cache(uint64_t(11 + 2 * l)));
  }
  const float scale = 1.0f / std::sqrt(float(D));
  for (auto _ : state) {
    for (int64_t l = 0; l < L; ++l) ops::attention(q, k[size_t(l)], v[size_t(l)], H, H, q_pos0, scale, out);
    benchmark::DoNotOptimize(out.raw());
  }
  double bytes = 0;
  for (int64_t l = 0; l < L; ++l) bytes += double(k[size_t(l)].nbytes() + v[size_t(l)].nbytes());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

constexpr int64_t kF32 = int64_t(DType::F32), kF16 = int64_t(DType::F16),
                  kBF16 = int64_t(DType::BF16), kQ8_0 = int64_t(DType::Q8_0),
                  kQ4_0 = int64_t(DType::Q4_0), kQ4_1 = int64_t(DType::Q4_1),
                  kQ5_0 = int64_t(DType::Q5_0), kQ5_1 = int64_t(DType::Q5_1),
                  kQ4_K = int64_t(DType::Q4_K), kQ5_K = int64_t(DType::Q5_K),
                  kQ6_K = int64_t(DType::Q6_K), kQ2_K = int64_t(DType::Q2_K),
                  kQ3_K = int64_t(DType::Q3_K), kF8E4M3 = int64_t(DType::F8_E4M3_B32),
                  kF8E5M2 = int64_t(DType::F8_E5M2_B32);

// Float GEMV kernels: the 110M model's head and MLP; FP8 with block scales also at a 7B MLP.
void gemv_args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {kBF16, kF16, kF32, kF8E4M3, kF8E5M2})
    for (auto nk : std::vector<std::pair<int64_t, int64_t>>{{32000, 768}, {2048, 768}, {768, 2048}})
      b->Args({t, nk.first, nk.second, 1, 0});
  for (int64_t t : {kBF16, kF8E4M3, kF8E5M2})
    for (auto nk : std::vector<std::pair<int64_t, int64_t>>{{11008, 4096}, {4096, 11008}})
      b->Args({t, nk.first, nk.second, 1, 0});
}
bool has_packed_layout(int64_t t) {
  return t == kQ4_0 || t == kQ4_K || t == kQ5_K || t == kQ6_K || t == kQ8_0;
}
// Block formats, decode: the 110M model's head and MLP, and a 7B model's MLP (11008 x 4096, both
// ways: 25 to 47 MB packed); the packable formats stored and packed, one after the other.
void qgemv_args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {kQ4_0, kQ4_K, kQ6_K, kQ8_0, kQ4_1, kQ5_0, kQ5_1, kQ5_K, kQ2_K, kQ3_K})
    for (auto nk : std::vector<std::pair<int64_t, int64_t>>{
             {32000, 768}, {2048, 768}, {11008, 4096}, {4096, 11008}})
      for (int64_t packed : {0, 1})
        if (!packed || has_packed_layout(t)) b->Args({t, nk.first, nk.second, 1, packed});
}
void qgemv_hot_args(benchmark::internal::Benchmark* b) {
  for (int64_t t :
       {kF32, kBF16, kQ4_0, kQ4_K, kQ6_K, kQ8_0, kQ4_1, kQ5_0, kQ5_1, kQ5_K, kQ2_K, kQ3_K, kF8E4M3, kF8E5M2})
    for (auto nk : std::vector<std::pair<int64_t, int64_t>>{{512, 768}, {128, 4096}})
      for (int64_t packed : {0, 1})
        if (!packed || has_packed_layout(t)) b->Args({t, nk.first, nk.second, 1, packed});
}
void gemm_args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {kF32, kBF16, kQ4_0, kQ8_0, kQ4_K, kQ6_K, kF8E4M3})
    for (auto nk : std::vector<std::pair<int64_t, int64_t>>{
             {768, 768}, {2048, 768}, {768, 2048}, {32000, 768}})
      for (int64_t packed : {0, 1})
        if (!packed || has_packed_layout(t)) b->Args({t, nk.first, nk.second, 512, packed});
}
void rows_args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {kBF16, kF16, kF32, kF8E4M3})
    for (int64_t T : {1, 2, 4, 8, 12, 16, 32})
      for (int64_t path : {0, 1}) b->Args({t, T, path});
  for (int64_t t : {kQ4_0, kQ8_0, kQ4_K, kQ6_K})
    for (int64_t T : {1, 2, 4, 8, 12, 16, 32, 64, 128, 512})
      for (int64_t path : {0, 1, 2, 3, 4})
        if (path < 3 || has_packed_layout(t)) b->Args({t, T, path});
}

// Median (Google Benchmark's default aggregates) plus min and max of the repetitions: on a
// shared machine the spread says how noisy the run was (BENCHMARKING.md, rule 2).
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
void protocol(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Repetitions(5)->DisplayAggregatesOnly(true);
  b->ComputeStatistics("min", min_of)->ComputeStatistics("max", max_of);
}

BENCHMARK(BM_Gemv)->Apply(gemv_args)->Apply(protocol);
BENCHMARK(BM_Gemv)->Name("BM_QGemv")->Apply(qgemv_args)->Apply(protocol);
BENCHMARK(BM_QGemvHot)->Apply(qgemv_hot_args)->Apply(protocol);
BENCHMARK(BM_Gemm)->Apply(gemm_args)->Apply(protocol);
BENCHMARK(BM_LinearRows)->Apply(rows_args)->Apply(protocol);
BENCHMARK(BM_Attention)->Args({512, 0})->Args({1, 127})->Args({1, 511})->Apply(protocol);
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{kF32, kF16, kQ8_0}, {1023, 4095}, {0, 1}})
    ->Apply(protocol);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto& f = cpu_features();
  std::printf("cpu: %s\nisa flags: %s\nkernel isa: %s, threads: %d\n", f.model.c_str(),
              f.flags().c_str(), isa_path(), num_threads());
  const Peaks& p = peaks();
  std::printf(
      "read bandwidth: %.1f GB/s; GEMM 2048^3 peak (oneDNN, best of 5): f32 %.0f, bf16 %.0f, int8 %.0f "
      "GFLOP/s (0: not run here)\n",
      p.bandwidth_gbs, p.gemm_gflops[int(bench::GemmCompute::F32)], p.gemm_gflops[int(bench::GemmCompute::BF16)],
      p.gemm_gflops[int(bench::GemmCompute::Int8)]);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Mixed-precision (bf16) training: the bf16 matmuls against float64 products of the same
// bf16-rounded operands (tight: only the f32 accumulation differs) and of the unrounded ones
// (bf16 tolerance), at boundary sizes and with the output channels split into blocks; a tiny
// model trained in bf16 tracking f32; the fallback to f32 where the CPU cannot run bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "genperf/bench_train.h"
#include "genperf/dtype.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "genperf/ops_train.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::ops;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260310;

bool bf16_runs() { return effective_precision(Precision::Bf16) == Precision::Bf16; }

float round_bf16(float x) {
  uint16_t b;
  traits(DType::BF16).from_f32(&x, &b, 1);  // the scalar reference: round to nearest even
  float y;
  traits(DType::BF16).to_f32(&b, &y, 1);
  return y;
}

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_bf16(v[i]);
  return r;
}

// ||a - b|| / ||b||: the normalized error of a product.
double norm_error(const float* a, const std::vector<double>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += b[i] * b[i];
  }
  return std::sqrt(d / std::max(s, 1e-300));
}

// C[M,N] = sum_k A(i,k) B(k,j) in double, with A(i,k) = a[i*sai + k*sak], B likewise.
std::vector<double> ref_gemm(int64_t M, int64_t N, int64_t K, const std::vector<float>& a, int64_t sai,
                             int64_t sak, const std::vector<float>& b, int64_t sbk, int64_t sbj) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(a[size_t(i * sai + k * sak)]) * double(b[size_t(k * sbk + j * sbj)]);
      c[size_t(i * N + j)] = s;
    }
  return c;
}

struct Scratch {
  std::vector<uint16_t> inp, dout, w;
  Bf16Scratch view() { return {inp, dout, w}; }
};

TEST(TrainBf16, MatmulMatchesFloat64AtBoundarySizes) {
  if (!bf16_runs()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or the ISA level is below AVX-512)";
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  struct Shape {
    int64_t N, IC, OC, block;  // block: output channels the scratch holds (OC: whole)
  };
  const Shape shapes[] = {{1, 16, 8, 8},    {7, 33, 17, 17},   {33, 64, 130, 130},
                          {257, 48, 96, 96}, {33, 40, 130, 32}, {257, 31, 65, 7}};
  double worst_exact = 0, worst_bf16 = 0;
  for (const Shape& sh : shapes) {
    const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
    Rng r(kSeed + uint64_t(N * 1000 + OC));
    const auto x = cast<float>(randn(r, size_t(N * IC))), w = cast<float>(randn(r, size_t(OC * IC)));
    const auto dy = cast<float>(randn(r, size_t(N * OC))), bias = cast<float>(randn(r, size_t(OC)));
    const auto dw0 = cast<float>(randn(r, size_t(OC * IC)));  // dw accumulates onto this
    Scratch s{std::vector<uint16_t>(size_t(N * IC)), std::vector<uint16_t>(size_t(N * sh.block)),
              std::vector<uint16_t>(size_t(sh.block * IC))};
    const Bf16Scratch bs = s.view();
    std::vector<float> y(size_t(N * OC)), dx(size_t(N * IC), NAN), dw = dw0, db(size_t(OC), 0.5f);
    matmul_forward(y.data(), x.data(), w.data(), bias.data(), N, IC, OC, &bs);
    matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, IC, OC, &bs);

    // Products of the rounded operands in double: only f32 accumulation differs.
    const auto xr = rounded(x), wr = rounded(w), dyr = rounded(dy);
    auto y_ex = ref_gemm(N, OC, IC, xr, IC, 1, wr, 1, IC);
    auto dx_ex = ref_gemm(N, IC, OC, dyr, OC, 1, wr, IC, 1);
    auto dw_ex = ref_gemm(OC, IC, N, dyr, 1, OC, xr, IC, 1);
    // And of the unrounded ones: the error bf16 rounding costs.
    auto y_64 = ref_gemm(N, OC, IC, x, IC, 1, w, 1, IC);
    auto dx_64 = ref_gemm(N, IC, OC, dy, OC, 1, w, IC, 1);
    auto dw_64 = ref_gemm(OC, IC, N, dy, 1, OC, x, IC, 1);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o) {
        y_ex[size_t(n * OC + o)] += bias[size_t(o)];
        y_64[size_t(n * OC + o)] += bias[size_t(o)];
      }
    std::vector<float> dw_delta(dw.size());
    for (size_t i = 0; i < dw.size(); ++i) dw_delta[i] = dw[i] - dw0[i];
    const double e[] = {norm_error(y.data(), y_ex), norm_error(dx.data(), dx_ex), norm_error(dw_delta.data(), dw_ex)};
    const double f[] = {norm_error(y.data(), y_64), norm_error(dx.data(), dx_64), norm_error(dw_delta.data(), dw_64)};
    for (int i = 0; i < 3; ++i) {
      const char* what[] = {"y", "dx", "dw"};
      EXPECT_LT(e[i], 1e-5) << what[i] << " N " << N << " IC " << IC << " OC " << OC << " block " << sh.block;
      EXPECT_LT(f[i], 1e-2) << what[i] << " N " << N << " IC " << IC << " OC " << OC << " block " << sh.block;
      worst_exact = std::max(worst_exact, e[i]);
      worst_bf16 = std::max(worst_bf16, f[i]);
    }
    // The bias gradient sums the f32 dout exactly as the f32 path does.
    for (int64_t o = 0; o < OC; ++o) {
      double sum = 0.5;
      for (int64_t n = 0; n < N; ++n) sum += dy[size_t(n * OC + o)];
      EXPECT_NEAR(db[size_t(o)], sum, 1e-4 * (1 + std::fabs(sum)));
    }
    // A frozen weight: dw null leaves it alone and dx unchanged.
    std::vector<float> dx2(dx.size(), NAN);
    matmul_backward(dx2.data(), static_cast<float*>(nullptr), static_cast<float*>(nullptr), dy.data(),
                    x.data(), w.data(), N, IC, OC, &bs);
    EXPECT_EQ(0, std::memcmp(dx.data(), dx2.data(), dx.size() * 4));
  }
  std::printf("  worst normalized error vs rounded operands %.2e, vs f64 %.2e\n", worst_exact, worst_bf16);
  // A scratch too small for one block is an error naming the op.
  std::vector<uint16_t> tiny_w(3), inp(64), dout(64);
  const Bf16Scratch bad{inp, dout, tiny_w};
  std::vector<float> x(16, 1.0f), w(32, 1.0f), y(8);
  EXPECT_THROW(matmul_forward(y.data(), x.data(), w.data(), static_cast<const float*>(nullptr), 2, 8, 4, &bad), Error);
}

LlamaConfig small_config() {
  LlamaConfig c = tiny(4, 2, false, false);
  c.hidden_size = 64, c.head_dim = 16, c.intermediate_size = 96, c.vocab_size = 97;
  return c;
}

TEST(TrainBf16, TinyModelTracksF32) {
  if (!bf16_runs()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or the ISA level is below AVX-512)";
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = small_config();
  const Batch b = make_batch(kSeed + 1, 4, 33, c.vocab_size);
  const MicroBatch mb{b.tokens, b.targets, b.B, b.T};
  TrainModel f32(c, kSeed, {AttentionMode::Flash, false, Precision::F32});
  TrainModel bf16(c, kSeed, {AttentionMode::Flash, false, Precision::Bf16});
  AdamW of(f32.num_params()), ob(bf16.num_params());
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    const StepResult rf = train_step(f32, of, {&mb, 1}, 3e-3f, 1.0);
    const StepResult rb = train_step(bf16, ob, {&mb, 1}, 3e-3f, 1.0);
    if (step % 4 == 0 || step == 19) std::printf("  step %2d: f32 %.5f bf16 %.5f\n", step, rf.loss, rb.loss);
    EXPECT_NEAR(rb.loss / rf.loss, 1.0, 0.03) << "step " << step;
    if (step == 0) first = rb.loss;
    last = rb.loss;
  }
  EXPECT_LT(last, 0.8 * first);  // it learns
  // bf16 differs from f32 (the path ran) but only slightly, and the master weights are f32.
  EXPECT_NE(0, std::memcmp(f32.params().data(), bf16.params().data(), f32.num_params() * 4));
  EXPECT_LT(rel_error(bf16.params().data(), f32.params().data(), f32.num_params()), 0.05);
}

TEST(TrainBf16, CheckpointingAndAccountingInBf16) {
  if (!bf16_runs()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or the ISA level is below AVX-512)";
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = small_config();
  const Batch b = make_batch(kSeed + 2, 2, 40, c.vocab_size);
  TrainModel plain(c, kSeed, {AttentionMode::Flash, false, Precision::Bf16});
  TrainModel ckpt(c, kSeed, {AttentionMode::Flash, true, Precision::Bf16});
  EXPECT_EQ(plain.forward(b.tokens, b.targets, b.B, b.T), ckpt.forward(b.tokens, b.targets, b.B, b.T));
  plain.backward();
  ckpt.backward();
  EXPECT_EQ(0, std::memcmp(plain.grads().data(), ckpt.grads().data(), plain.num_params() * 4));
  const ActivationMemory m = plain.activation_memory();
  EXPECT_GT(m.bf16_operands, 0u);
  EXPECT_EQ(m.total(), TrainModel::activation_memory(c, plain.options(), b.B, b.T).total());
  const ActivationMemory f = TrainModel::activation_memory(c, {AttentionMode::Flash, false, Precision::F32}, b.B, b.T);
  EXPECT_EQ(f.bf16_operands, 0u);
  EXPECT_EQ(f.total() + m.bf16_operands, m.total());
}

// Without AVX512-BF16 (here: the ISA level lowered as GENPERF_ISA=avx2 would), Bf16 runs f32.
TEST(TrainBf16, FallsBackToF32WithoutAvx512Bf16) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  EXPECT_EQ(effective_precision(Precision::F32), Precision::F32);
  if (!cpu_features().avx512_bf16) {
    EXPECT_EQ(effective_precision(Precision::Bf16), Precision::F32);
  }
  const Isa saved = isa();
  set_isa(Isa::Avx2);
  EXPECT_EQ(effective_precision(Precision::Bf16), Precision::F32);
  const LlamaConfig c = tiny(4, 2, false, false);
  const Batch b = make_batch(kSeed + 3, 2, 9, c.vocab_size);
  TrainModel f32(c, kSeed, {AttentionMode::Flash, false, Precision::F32});
  TrainModel asked(c, kSeed, {AttentionMode::Flash, false, Precision::Bf16});
  EXPECT_EQ(f32.forward(b.tokens, b.targets, b.B, b.T), asked.forward(b.tokens, b.targets, b.B, b.T));
  f32.backward();
  asked.backward();
  EXPECT_EQ(0, std::memcmp(f32.grads().data(), asked.grads().data(), f32.num_params() * 4));
  EXPECT_EQ(asked.activation_memory().bf16_operands, 0u);
  TrainBenchOptions o;
  o.batch = 1, o.seq = 8, o.warmup = 0, o.reps = 1, o.train.precision = Precision::Bf16;
  EXPECT_EQ(bench_train_step(preset_config("tiny"), o).to_json().at("precision").as_string(), "f32");
  set_isa(saved);
  EXPECT_EQ(parse_precision("bf16"), Precision::Bf16);
  EXPECT_THROW(parse_precision("fp16"), Error);
}

TEST(TrainBf16, BenchReportsEffectivePrecision) {
  TrainBenchOptions o;
  o.batch = 2, o.seq = 16, o.warmup = 0, o.reps = 1, o.train.precision = Precision::Bf16;
  const Json j = bench_train_step(preset_config("tiny"), o).to_json();
  EXPECT_EQ(j.at("precision").as_string(), bf16_runs() ? "bf16" : "f32");
  EXPECT_EQ(j.at("memory").at("activations").at("bf16_operands").as_int() > 0, bf16_runs());
}

}  // namespace

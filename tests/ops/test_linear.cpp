// linear: the reference against float64, then every path (GEMV kernels at every ISA level the
// CPU runs, the oneDNN GEMM) against the reference, on boundary sizes, strided views and guards.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/qkernels.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "ops/ops.h"
#include "ops_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

// Weights [N, K] of type dt; strided ones are a column slice of a wider buffer.
Tensor make_weight(int64_t N, int64_t K, DType dt, bool strided, Rng& rng) {
  if (!strided) return random_tensor({N, K}, dt, rng, 0.1);
  Tensor wide = random_tensor({N, K + 24}, dt, rng, 0.1);
  return wide.slice(1, 8, K);
}

// NMSE allowed against the reference: f32 accumulation, or x rounded to bf16 for oneDNN's bf16
// GEMM (relative error 2^-9 per element, NMSE about 1e-6).
double linear_tolerance(DType wt, bool bf16_gemm) { return bf16_gemm ? 1e-5 : 1e-10; }

// Per output, the sum of the magnitudes of its terms: the scale a float sum's rounding error
// grows with (the result itself may cancel to near zero).
std::vector<double> term_magnitudes(const Tensor& x, const Tensor& w, const Tensor* b) {
  const Tensor wf = w.to(DType::F32);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  std::vector<double> s(size_t(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double a = b ? std::fabs(double(b->data<float>()[n])) : 0.0;
      for (int64_t k = 0; k < K; ++k)
        a += std::fabs(double(x.row<float>(t)[k]) * double(wf.row<float>(n)[k]));
      s[size_t(t * N + n)] = a;
    }
  return s;
}

// SIMD and scalar sums agree within 1e-6 of the terms' magnitude.
void expect_sums_agree(const std::vector<double>& got, const std::vector<double>& want,
                       const std::vector<double>& mag) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-6 * mag[i] + 1e-30)) {
      if (bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << got[i] << " vs generic " << want[i];
    }
  EXPECT_EQ(bad, 0) << "vs generic";
}

bool uses_bf16_gemm(DType wt, int64_t T, bool pinned_gemm) {
  const bool gemm = pinned_gemm || T > cpu::gemv_max_rows(wt);
  return gemm && wt == DType::BF16 && isa() == Isa::Avx512 && cpu_features().avx512_bf16;
}

void run_case(int64_t T, int64_t K, int64_t N, DType wt, bool bias, bool strided_w, Rng& rng) {
  const std::string name = "linear T=" + std::to_string(T) + " K=" + std::to_string(K) +
                           " N=" + std::to_string(N) + " w=" + dtype_name(wt) +
                           (bias ? " +bias" : "") + (strided_w ? " strided-w" : "");
  SCOPED_TRACE(name);
  Guarded x(T, K, 5);
  fill_normal(x.view(), rng);
  const Tensor w = make_weight(N, K, wt, strided_w, rng);
  const Tensor b = random_tensor({N}, DType::F32, rng);
  const Tensor* bp = bias ? &b : nullptr;
  Tensor yr = Tensor::zeros({T, N});
  ops::ref::linear(x.view(), w, bp, yr);
  const auto ref = values(yr);
  const auto mag = term_magnitudes(x.view(), w, bp);

  IsaLevels isas;
  std::vector<double> generic_out[3];  // per path
  for (Isa level : isas.levels()) {
    set_isa(level);
    SCOPED_TRACE(isa_name(level));
    // ops::linear, then each path pinned (skipping the slow double run of the widest K).
    for (int path = 0; path < (K > 1000 ? 1 : 3); ++path) {
      Guarded y(T, N, 2);
      if (path == 0) ops::linear(x.view(), w, bp, y.view());
      if (path == 1) cpu::linear_gemv(x.view(), w, bp, y.view(), T, K, N);
      if (path == 2) cpu::linear_gemm(x.view(), w, bp, y.view(), T, K, N);
      y.check_guards("y");
      const auto got = values(y.view());
      const bool bf16_gemm = uses_bf16_gemm(wt, T, path == 2) && path != 1;
      EXPECT_LE(nmse(got, ref), linear_tolerance(wt, bf16_gemm)) << "path " << path;
      if (path == 1 || (path == 0 && T <= cpu::gemv_max_rows(wt))) {
        // The GEMV kernels: SIMD levels agree with the scalar one within 1e-6 relative.
        if (level == Isa::Generic)
          generic_out[path] = got;
        else
          expect_sums_agree(got, generic_out[path], mag);
      }
    }
  }
}

}  // namespace

TEST(Linear, ReferenceMatchesFloat64) {
  Rng rng(announce_seed(11, "Linear.ReferenceMatchesFloat64"));
  for (DType wt : {DType::F32, DType::BF16, DType::F16}) {
    const int64_t T = 3, K = 33, N = 5;
    const Tensor x = random_tensor({T, K}, DType::F32, rng);
    const Tensor w = random_tensor({N, K}, wt, rng);
    const Tensor b = random_tensor({N}, DType::BF16, rng);
    const Tensor wf = w.to(DType::F32), bf = b.to(DType::F32);
    Tensor y = Tensor::zeros({T, N});
    ops::ref::linear(x, w, &b, y);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double acc = bf.data<float>()[n];
        for (int64_t k = 0; k < K; ++k)
          acc += double(x.row<float>(t)[k]) * double(wf.row<float>(n)[k]);
        EXPECT_NEAR(y.row<float>(t)[n], acc, 1e-6 * std::fabs(acc) + 1e-7) << dtype_name(wt);
      }
  }
}

TEST(Linear, AllPathsMatchReference) {
  Rng rng(announce_seed(12, "Linear.AllPathsMatchReference"));
  for (DType wt : {DType::F32, DType::BF16, DType::F16})
    for (int64_t K : {1, 31, 32, 33, 4099})
      for (int64_t T : {1, 2, 3, 17, 64}) {
        const int64_t N = K == 4099 ? 33 : 67;
        run_case(T, K, N, wt, (T + K) % 2 == 0, K == 33, rng);
      }
}

TEST(Linear, AroundTheGemvThreshold) {
  Rng rng(announce_seed(13, "Linear.AroundTheGemvThreshold"));
  for (DType wt : {DType::F32, DType::BF16, DType::F16}) {
    const int64_t th = cpu::gemv_max_rows(wt);
    for (int64_t T : {th - 1, th, th + 1}) run_case(T, 96, 35, wt, true, true, rng);
  }
}

TEST(Linear, OneDimensionalRow) {
  Rng rng(announce_seed(14, "Linear.OneDimensionalRow"));
  const Tensor x = random_tensor({48}, DType::F32, rng);
  const Tensor w = random_tensor({20, 48}, DType::BF16, rng);
  Tensor y = Tensor::zeros({20}), yr = Tensor::zeros({20});
  ops::linear(x, w, nullptr, y);
  ops::ref::linear(x, w, nullptr, yr);
  EXPECT_LE(nmse(values(y), values(yr)), 1e-10);
}

TEST(Linear, LargeRowCountsUseEveryThread) {
  // Rows split across threads at multiples of 16: sizes around those cuts, 1 to 3 threads.
  Rng rng(announce_seed(15, "Linear.LargeRowCountsUseEveryThread"));
  const int saved = num_threads();
  for (int nt : {1, 2, 3})
    for (int64_t N : {15, 16, 17, 47, 1000}) {
      set_num_threads(nt);
      const Tensor x = random_tensor({1, 40}, DType::F32, rng);
      const Tensor w = random_tensor({N, 40}, DType::F16, rng);
      Guarded y(1, N, 1);
      Tensor yr = Tensor::zeros({1, N});
      ops::linear(x, w, nullptr, y.view());
      ops::ref::linear(x, w, nullptr, yr);
      y.check_guards("y");
      EXPECT_LE(nmse(values(y.view()), values(yr)), 1e-10) << "threads " << nt << " N " << N;
    }
  set_num_threads(saved);
}

TEST(Linear, ErrorsNameTheOperands) {
  const Tensor x = Tensor::zeros({7, 64}), w = Tensor::zeros({32, 48}, DType::BF16);
  Tensor y = Tensor::zeros({7, 32});
  EXPECT_EQ(error_of([&] { ops::linear(x, w, nullptr, y); }),
            "[linear] x f32[7, 64] and w bf16[32, 48]: inner dimensions differ");
  EXPECT_EQ(error_of([&] { ops::ref::linear(x, w, nullptr, y); }),
            "[linear] x f32[7, 64] and w bf16[32, 48]: inner dimensions differ");
  const Tensor w2 = Tensor::zeros({32, 64}, DType::BF16);
  Tensor y2 = Tensor::zeros({7, 31});
  EXPECT_EQ(error_of([&] { ops::linear(x, w2, nullptr, y2); }),
            "[linear] y f32[7, 31]: expected [7, 32] for x f32[7, 64] and w bf16[32, 64]");
  const Tensor b = Tensor::zeros({31});
  EXPECT_EQ(error_of([&] { ops::linear(x, w2, &b, y); }),
            "[linear] bias f32[31]: expected 32 elements");
  const Tensor xb = Tensor::zeros({7, 64}, DType::BF16);
  EXPECT_EQ(error_of([&] { ops::linear(xb, w2, nullptr, y); }),
            "[linear] x bf16[7, 64]: expected f32");
}

TEST(Linear, BlockFormatsRunFromPackedBlocks) {
  // Block formats run from their packed blocks (test_qlinear.cpp has the details): one row takes
  // the integer GEMV over 8-bit activations (NMSE of their rounding, ~1e-4), rows past the GEMV
  // threshold the integer GEMM where the level has one (AVX-512), over the same 8-bit
  // activations, else the GEMM on decoded panels (bf16 where the CPU has AVX512-BF16).
  Rng rng(announce_seed(16, "Linear.BlockFormatsRunFromPackedBlocks"));
  for (DType wt : {DType::Q8_0, DType::Q4_K})
    for (int64_t T : {int64_t(1), cpu::gemv_max_rows(wt) + 1}) {
      const int64_t K = 512, N = 40;
      const Tensor x = random_tensor({T, K}, DType::F32, rng);
      const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
      Guarded y(T, N);
      Tensor yr = Tensor::zeros({T, N});
      ops::linear(x, w, nullptr, y.view());
      ops::ref::linear(x, w, nullptr, yr);
      y.check_guards("y");
      const bool integer =
          T == 1 || (isa() == Isa::Avx512 && cpu::qgemm_avx512(wt, cpu_features().avx512_vnni));
      EXPECT_LE(nmse(values(y.view()), values(yr)), integer ? 1e-3 : 1e-5)
          << dtype_name(wt) << " T=" << T;
    }
}

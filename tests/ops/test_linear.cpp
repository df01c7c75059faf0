// linear: the reference against float64, then every path (GEMV kernels at every ISA level the
// CPU runs, the oneDNN GEMM) against the reference, on boundary sizes, strided views and guards.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/qkernels.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "genperf/ops.h"
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
  // bf16 weights, or decoded panels of a block format without an integer GEMM (FP8).
  return gemm && (wt == DType::BF16 || traits(wt).block_size > 1) && isa() == Isa::Avx512 &&
         cpu_features().avx512_bf16;
}

void run_case(int64_t T, int64_t K, int64_t N, DType wt, bool bias, bool strided_w, Rng& rng) {
  const std::string name = "linear T=" + std::to_string(T) + " K=" + std::to_string(K) +
                           " N=" + std::to_string(N) + " w=" + dtype_name(wt) +
                           (bias ? " +bias" : "") + (strided_w ? " strided-w" : "");
  SCOPED_TRACE(name);
  Guarded x(T, K, 5);
  fill_normal(x.view(), rng);
  const Tensor w = traits(wt).block_size > 1 ? random_tensor({N, K}, DType::F32, rng, 0.1).to(wt)
                                              : make_weight(N, K, wt, strided_w, rng);
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
    // 129: the single-row GEMV's unrolled steps and a tail; 4096 and 4099: either side of
    // the longest row it takes row by row (kRowByRowMaxK).
    for (int64_t K : {1, 31, 32, 33, 129, 4096, 4099})
      for (int64_t T : {1, 2, 3, 17, 64}) {
        const int64_t N = K >= 4096 ? 33 : 67;
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
  // threshold the integer GEMM where the level has one (AVX2, AVX-512), over the same 8-bit
  // activations, else the GEMM on decoded panels (the scalar level; Q8_0 on AVX-512 without
  // VNNI, there in bf16 where the CPU has AVX512-BF16).
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
          T == 1 || isa() == Isa::Avx2 ||
          (isa() == Isa::Avx512 && cpu::qgemm_avx512(wt, cpu_features().avx512_vnni));
      EXPECT_LE(nmse(values(y.view()), values(yr)), integer ? 1e-3 : 1e-5)
          << dtype_name(wt) << " T=" << T;
    }
}

// FP8 with block scales runs on float GEMV kernels (codes decoded in registers, kernels_impl.inc)
// and, past the GEMV threshold, on decoded panels; every path against the reference, and the
// SIMD GEMVs against the scalar one, at block-multiple K (one block, a few, 4096) and T around
// the kernels' row groups.
TEST(Linear, Fp8BlocksAllPathsMatchReference) {
  Rng rng(announce_seed(17, "Linear.Fp8BlocksAllPathsMatchReference"));
  for (DType wt : {DType::F8_E4M3_B32, DType::F8_E5M2_B32}) {
    for (int64_t K : {32, 96, 4096})
      for (int64_t T : {1, 2, 3, 5, 17, 64}) run_case(T, K, K == 4096 ? 21 : 67, wt, T % 2 == 1, false, rng);
    const int64_t th = cpu::gemv_max_rows(wt);
    for (int64_t T : {th, th + 1}) run_case(T, 64, 35, wt, true, false, rng);
  }
}

// Every FP8 code, decoded by each level's row conversion, bf16 panel conversion and GEMV:
// bit-identical values to the format's scalar decoder (traits().to_f32), NaN codes included,
// through the SIMD levels' fast and exact paths.
TEST(Linear, Fp8EveryCodeDecodesExactly) {
  for (DType wt : {DType::F8_E4M3_B32, DType::F8_E5M2_B32}) {
    SCOPED_TRACE(dtype_name(wt));
    // Each row: the 256 codes in order, 8 blocks. Scales of both signs, and outside the SIMD
    // levels' fast path (|d| >= 2^8 for E4M3, >= 2^16 for E5M2) and near underflow.
    const int64_t K = 256, N = 6;
    const float scales[N] = {1.0f, -0.0371f, 3.5e-3f, 1000.0f, -1.0e5f, 1.0e-30f};
    Tensor w = Tensor::zeros({N, K}, wt);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < K / 32; ++b) {
        uint8_t* blk = w.data<uint8_t>() + n * w.stride(0) + b * 36;
        std::memcpy(blk, &scales[n], 4);
        for (int j = 0; j < 32; ++j) blk[4 + j] = uint8_t(b * 32 + j);
      }
    std::vector<float> want(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n) traits(wt).to_f32(w.row(n), want.data() + n * K, K);
    const bool e4m3 = wt == DType::F8_E4M3_B32;
    auto special = [&](int64_t k) {  // NaN (and for E5M2 infinity) codes
      const int c = int(k) & 0x7f;
      return e4m3 ? c == 0x7f : c >= 0x7c;
    };
    Tensor finite = w.clone();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        if (special(k)) finite.data<uint8_t>()[n * w.stride(0) + k / 32 * 36 + 4 + k % 32] = 0;
    IsaLevels isas;
    for (Isa level : isas.levels()) {
      set_isa(level);
      SCOPED_TRACE(isa_name(level));
      std::vector<float> got(static_cast<size_t>(K));
      for (int64_t n = 0; n < N; ++n) {
        cpu::kernels().to_f32[size_t(wt)](w.row(n), got.data(), K);
        for (int64_t k = 0; k < K; ++k) {
          const float a = got[size_t(k)], b = want[size_t(n * K + k)];
          EXPECT_TRUE(std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)))
              << "row " << n << " code " << k << ": " << a << " vs " << b;
        }
      }
      // Straight to bf16 (the prefill panels, where the level has it): want rounded to bf16.
      if (const auto to_bf16 = cpu::kernels().to_bf16[size_t(wt)]) {
        std::vector<uint16_t> h(static_cast<size_t>(K));
        for (int64_t n = 0; n < N; ++n) {
          to_bf16(w.row(n), h.data(), K);
          for (int64_t k = 0; k < K; ++k) {
            const float a = bf16_to_f32(h[size_t(k)]), b = bf16_to_f32(f32_to_bf16(want[size_t(n * K + k)]));
            EXPECT_TRUE(std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)))
                << "bf16 row " << n << " code " << k << ": " << a << " vs " << b;
          }
        }
      }
      // GEMV with x one-hot at k over the rows with the special codes set to 0: y[n] = w[n, k]
      // exactly; over the rows as they are, every output is NaN or infinite (0 times NaN or inf).
      for (int64_t k = 0; k < K; ++k) {
        Tensor x = Tensor::zeros({1, K});
        x.data<float>()[k] = 1.0f;
        Tensor y = Tensor::zeros({1, N});
        cpu::linear_gemv(x, finite, nullptr, y, 1, K, N);
        for (int64_t n = 0; n < N; ++n)
          EXPECT_EQ(y.data<float>()[n], special(k) ? 0.0f : want[size_t(n * K + k)])
              << "row " << n << " code " << k;
        cpu::linear_gemv(x, w, nullptr, y, 1, K, N);
        for (int64_t n = 0; n < N; ++n) EXPECT_FALSE(std::isfinite(y.data<float>()[n])) << "row " << n;
      }
    }
  }
}

// Attention for training (genperf/ops_train.h; CPU kernels in backend/cpu/train_attention.cpp):
// naive and flash backward against float64
// finite differences at sequence lengths around the tile sizes, flash against naive in float
// (forward and backward, 1e-5 relative) up to T = 257, with and without GQA, and the backend's
// tile product (backend/cpu/train_kernels.h) at every ISA level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "backend/cpu/train_kernels.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "ops/ops_test_util.h"
#include "genperf/ops_train.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::ops;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260302;

AttnShape shape(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, int64_t qt = 64, int64_t kt = 64) {
  AttnShape s;
  s.B = B, s.T = T, s.NH = NH, s.NKV = NKV, s.HS = HS, s.q_tile = qt, s.k_tile = kt;
  return s;
}

// out, saved statistics and dqkv of one mode for qkv and upstream gradient G.
template <typename F>
struct AttnRun {
  std::vector<F> out, stat, dqkv;
};

template <typename F>
AttnRun<F> run(bool flash, const AttnShape& s, const std::vector<F>& qkv, const std::vector<F>& G) {
  const int64_t N = s.rows();
  AttnRun<F> r;
  r.out.assign(size_t(N * s.NH * s.HS), F(0));
  r.stat.assign(size_t(flash ? s.B * s.NH * s.T : s.B * s.NH * s.T * s.T), F(0));
  r.dqkv.assign(qkv.size(), std::numeric_limits<F>::quiet_NaN());  // "=" must overwrite all
  if (flash) {
    attention_forward_flash(r.out.data(), r.stat.data(), qkv.data(), s);
    attention_backward_flash(r.dqkv.data(), G.data(), qkv.data(), r.out.data(), r.stat.data(), s);
  } else {
    attention_forward_naive(r.out.data(), r.stat.data(), qkv.data(), s);
    attention_backward_naive(r.dqkv.data(), G.data(), qkv.data(), r.stat.data(), s);
  }
  return r;
}

void fd_check(bool flash, const AttnShape& s) {
  Rng r(kSeed + uint64_t(s.T * 100 + s.NKV * 10 + flash));
  auto qkv = randn(r, size_t(s.rows() * s.qkv_cols()));
  auto G = randn(r, size_t(s.rows() * s.NH * s.HS));
  const AttnRun<double> a = run(flash, s, qkv, G);
  auto loss = [&] {
    std::vector<double> out(G.size()), stat(a.stat.size());
    if (flash)
      attention_forward_flash(out.data(), stat.data(), qkv.data(), s);
    else
      attention_forward_naive(out.data(), stat.data(), qkv.data(), s);
    return dot(out, G);
  };
  const std::string what = std::string(flash ? "flash" : "naive") + (s.causal ? "" : " non-causal") + " T=" + std::to_string(s.T) +
                           " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV) +
                           " tiles " + std::to_string(s.q_tile) + "x" + std::to_string(s.k_tile) + " dqkv";
  check_fd(what, qkv, a.dqkv, loss, r, 40);
}

TEST(TrainAttention, GradientsMatchFiniteDifferences) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (int64_t T : {1, 31, 32, 33})
    for (auto [NH, NKV] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {3, 1}})
      for (bool flash : {false, true}) {
        fd_check(flash, shape(2, T, NH, NKV, 8, 32, 32));
        if (flash) fd_check(true, shape(2, T, NH, NKV, 8, 8, 16));  // many ragged tiles
      }
}

TEST(TrainAttention, FlashMatchesNaiveInFloat) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (int64_t T : {1, 31, 32, 33, 257})
    for (auto [NH, NKV] : {std::pair<int64_t, int64_t>{4, 4}, {4, 2}, {6, 1}}) {
      const AttnShape s = shape(2, T, NH, NKV, 16);
      Rng r(kSeed + uint64_t(T));
      auto qkv = cast<float>(randn(r, size_t(s.rows() * s.qkv_cols())));
      auto G = cast<float>(randn(r, size_t(s.rows() * NH * s.HS)));
      const AttnRun<float> naive = run(false, s, qkv, G), flash = run(true, s, qkv, G);
      const double e_out = rel_error(flash.out, naive.out), e_d = rel_error(flash.dqkv, naive.dqkv);
      std::printf("  T=%3lld NH=%lld NKV=%lld: out %.2e, dqkv %.2e\n", (long long)T, (long long)NH,
                  (long long)NKV, e_out, e_d);
      EXPECT_LT(e_out, 1e-5) << "T " << T << " NH " << NH << " NKV " << NKV;
      EXPECT_LT(e_d, 1e-5) << "T " << T << " NH " << NH << " NKV " << NKV;
      // At the longest length, both float paths against float64.
      if (T == 257) {
        const AttnRun<double> ref = run(false, s, cast<double>(qkv), cast<double>(G));
        EXPECT_LT(rel_error(naive.out, ref.out), 1e-5);
        EXPECT_LT(rel_error(flash.dqkv, ref.dqkv), 1e-5);
      }
    }
}

// Non-causal attention (every query sees every key of its sequence: the UNet's image attention):
// forward against a direct float64 softmax over all keys, backward against finite differences,
// flash against naive in float, at lengths around the tile sizes, with and without GQA.
TEST(TrainAttention, NonCausal) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (int64_t T : {1, 31, 33})
    for (auto [NH, NKV] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}}) {
      AttnShape s = shape(2, T, NH, NKV, 8, 16, 8);
      s.causal = false;
      Rng r(kSeed + uint64_t(T * 7 + NKV));
      auto qkv = randn(r, size_t(s.rows() * s.qkv_cols()));
      std::vector<double> want(size_t(s.rows() * NH * s.HS), 0.0), sc(static_cast<size_t>(T));
      const int64_t ld = s.qkv_cols();
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < NH; ++h) {
          const int64_t kh = h / (NH / NKV);
          for (int64_t i = 0; i < T; ++i) {
            const double* q = &qkv[size_t((b * T + i) * ld + h * s.HS)];
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < T; ++j) {
              const double* k = &qkv[size_t((b * T + j) * ld + (NH + kh) * s.HS)];
              double d = 0;
              for (int64_t c = 0; c < s.HS; ++c) d += q[c] * k[c];
              sc[size_t(j)] = d / std::sqrt(double(s.HS));
              mx = std::max(mx, sc[size_t(j)]);
            }
            for (int64_t j = 0; j < T; ++j) sum += (sc[size_t(j)] = std::exp(sc[size_t(j)] - mx));
            for (int64_t j = 0; j < T; ++j) {
              const double* v = &qkv[size_t((b * T + j) * ld + (NH + NKV + kh) * s.HS)];
              for (int64_t c = 0; c < s.HS; ++c)
                want[size_t((b * T + i) * NH * s.HS + h * s.HS + c)] += sc[size_t(j)] / sum * v[c];
            }
          }
        }
      auto G = randn(r, want.size());
      for (bool flash : {false, true}) {
        const AttnRun<double> got = run(flash, s, qkv, G);
        EXPECT_LT(rel_error(got.out, want), 1e-12) << (flash ? "flash" : "naive") << " T " << T;
        fd_check(flash, s);
      }
      const AttnRun<float> nf = run(false, s, cast<float>(qkv), cast<float>(G));
      const AttnRun<float> ff = run(true, s, cast<float>(qkv), cast<float>(G));
      EXPECT_LT(rel_error(ff.out, nf.out), 1e-5) << "T " << T;
      EXPECT_LT(rel_error(ff.dqkv, nf.dqkv), 1e-5) << "T " << T;
      if (T > 1) {  // the causal mask changes the answer
        AttnShape c = s;
        c.causal = true;
        EXPECT_GT(rel_error(run(false, c, qkv, G).out, want), 1e-3) << "T " << T;
      }
    }
}

TEST(TrainAttention, RejectsBadShapes) {
  std::vector<float> buf(64, 0.0f);
  EXPECT_THROW(attention_forward_flash(buf.data(), buf.data(), buf.data(), shape(1, 2, 3, 2, 4)), Error);
  EXPECT_THROW(attention_forward_naive(buf.data(), buf.data(), buf.data(), shape(1, 0, 1, 1, 4)), Error);
}

// The tile products (plain and with A transposed) against float64 sums on ragged shapes, in both
// accumulate modes, at every ISA level the CPU runs (generic, AVX2, AVX-512).
TEST(TrainAttention, TileProductPaths) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const Isa saved = isa();
  const IsaLevels isas;
  Rng r(kSeed);
  for (bool trans : {false, true})
    for (int64_t M : {1, 3, 4, 9})
      for (int64_t N : {1, 15, 16, 17, 64, 70})
        for (int64_t K : {1, 7, 33})
          for (bool acc : {false, true}) {
            // A is [M, K] (plain) or [K, M] (transposed), with padded rows.
            const int64_t lda = (trans ? M : K) + 3, ldb = N + 5, ldc = N + 2;
            auto A = cast<float>(randn(r, size_t((trans ? K : M) * lda)));
            auto B = cast<float>(randn(r, size_t(K * ldb))), C0 = cast<float>(randn(r, size_t(M * ldc)));
            std::vector<double> want(C0.begin(), C0.end());
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k)
                  s += double(trans ? A[k * lda + i] : A[i * lda + k]) * double(B[k * ldb + j]);
                want[i * ldc + j] = (acc ? double(C0[i * ldc + j]) : 0.0) + 0.5 * s;
              }
            for (Isa level : isas.levels()) {
              set_isa(level);
              auto C = C0;
              if (trans)
                cpu::gemm_tile_tn(M, N, K, 0.5f, A.data(), lda, B.data(), ldb, acc, C.data(), ldc);
              else
                cpu::gemm_tile(M, N, K, 0.5f, A.data(), lda, B.data(), ldb, acc, C.data(), ldc);
              EXPECT_LT(rel_error(C, want), 1e-6)
                  << isa_name(isa()) << (trans ? " tn" : "") << " M " << M << " N " << N << " K " << K;
            }
          }
  set_isa(saved);
}

}  // namespace

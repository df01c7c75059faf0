// linear with block-quantized weights (src/backend/cpu/qkernels.h): the activation quantizer gives
// the same bits at every ISA level; on blocks built so that every f32 operation is exact, every
// level returns the exact product; on realistic weights the SIMD levels agree with the scalar
// level within 1e-6 of the terms' magnitude, the quantized-activation error stays within its
// bound, and the decoded-panel GEMM (prefill) matches the reference. Boundary sizes, strided
// views with guards, thread counts, the vectorized dequantizers and non-finite inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/qkernels.h"
#include "backend/cpu/qpack.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "genperf/ops.h"
#include "ops_test_util.h"
#include "core/codec.h"

using namespace genperf;
using namespace genperf::testing;
using namespace genperf::codec;

namespace {

const DType kFormats[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                          DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool is_k_quant(DType t) { return traits(t).block_size == 256; }

std::string label(DType wt, int64_t T, int64_t K, int64_t N) {
  return std::string(dtype_name(wt)) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
         " N=" + std::to_string(N);
}

// A quantized activation buffer of T rows of K.
struct Act {
  std::vector<char> buf;
  cpu::QAct a;
  Act(int64_t T, int64_t K) : buf(cpu::qact_bytes(T, K)), a(cpu::qact_view(buf.data(), T, K)) {}
  // Dequantized row t: q * d.
  std::vector<double> xq(int64_t t) const {
    std::vector<double> v(size_t(a.K));
    for (int64_t k = 0; k < a.K; ++k)
      v[size_t(k)] = double(a.qs[t * a.Kp + k]) * double(a.d[t * a.nb + k / 32]);
    return v;
  }
};

// The quantizers of the levels this CPU runs (per IsaLevels), generic first.
std::vector<std::pair<std::string, cpu::QuantizeActFn>> quantizers() {
  std::vector<std::pair<std::string, cpu::QuantizeActFn>> q = {
      {"generic", cpu::quantize_act_generic}};
  IsaLevels isas;
  for (Isa l : isas.levels()) {
    if (l == Isa::Avx2) q.push_back({"avx2", cpu::quantize_act_avx2});
    if (l == Isa::Avx512) q.push_back({"avx512", cpu::quantize_act_avx512});
  }
  return q;
}

// Every integer GEMV this CPU runs: per ISA level, and AVX-512 without VNNI where it has VNNI;
// then the integer GEMMs (prefill) under the same contract, with and without VNNI where it has
// VNNI (AVX-VNNI at the AVX2 level).
std::vector<std::pair<std::string, cpu::QGemvFn>> gemvs(DType wt) {
  std::vector<std::pair<std::string, cpu::QGemvFn>> g = {{"generic", cpu::qgemv_generic(wt)}};
  IsaLevels isas;
  for (Isa l : isas.levels()) {
    if (l == Isa::Avx2) {
      g.push_back({"avx2", cpu::qgemv_avx2(wt)});
      g.push_back({"avx2-gemm", cpu::qgemm_avx2(wt, false)});
      if (cpu_features().avx_vnni) g.push_back({"avx2-vnni-gemm", cpu::qgemm_avx2(wt, true)});
    }
    if (l == Isa::Avx512) {
      const bool vnni = cpu_features().avx512_vnni;
      g.push_back({"avx512", cpu::qgemv_avx512(wt, vnni)});
      if (vnni) g.push_back({"avx512-novnni", cpu::qgemv_avx512(wt, false)});
      if (auto f = cpu::qgemm_avx512(wt, vnni)) g.push_back({"avx512-gemm", f});
      if (vnni)
        if (auto f = cpu::qgemm_avx512(wt, false)) g.push_back({"avx512-gemm-novnni", f});
    }
  }
  return g;
}

// Runs one integer GEMV over all N rows of w into y[T, N].
std::vector<float> run_gemv(cpu::QGemvFn f, const cpu::QAct& a, int64_t T, const Tensor& w,
                            const float* bias) {
  const int64_t N = w.size(0);
  std::vector<float> y(size_t(T * N), -1.0f);
  f(a, T, w.raw(), w.stride(0), 0, N, bias, y.data(), size_t(N));
  return y;
}

// ---- weights whose every f32 product and sum in the kernels is exact ----
// Scales are 2^-4 (mins, m: small multiples of 2^-4), sub-scales at most 15 (Q3_K: any, -32..31,
// its quants at most 4 from the offset), activations are q * 2^-3 with one |q| = 127 per block
// and the others in [-2, 2]: every term is a multiple of 2^-7 and the sum of their magnitudes
// stays below 2^24 * 2^-7 for the sizes used, so any order of summation gives the exact result.

uint16_t f16(float f) { return f32_to_f16(f); }
uint8_t rbyte(Rng& r) { return uint8_t(r.next() >> 56); }
int rint_in(Rng& r, int lo, int hi) { return lo + int(r.next() % uint64_t(hi - lo + 1)); }

void pack_k4_scales(uint8_t* s, const int* sc, const int* mn) {
  std::memset(s, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = uint8_t(sc[j]);
      s[j + 4] = uint8_t(mn[j]);
    } else {
      s[j + 4] = uint8_t((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      s[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      s[j] |= uint8_t((mn[j] >> 4) << 6);
    }
  }
}

void fill_exact_row(DType wt, uint8_t* p, int64_t K, Rng& r) {
  const uint16_t d = f16(0.0625f);
  auto m = [&] { return f16(0.0625f * float(rint_in(r, -8, 8))); };
  auto bytes = [&](uint8_t* q, int n) {
    for (int i = 0; i < n; ++i) q[i] = rbyte(r);
  };
  const int64_t nb = K / traits(wt).block_size;
  for (int64_t i = 0; i < nb; ++i) {
    switch (wt) {
      case DType::Q8_0: {
        auto* b = reinterpret_cast<BlockQ8_0*>(p) + i;
        b->d = d;
        for (auto& q : b->qs) q = int8_t(rint_in(r, -128, 127));
        break;
      }
      case DType::Q4_0: {
        auto* b = reinterpret_cast<BlockQ4_0*>(p) + i;
        b->d = d;
        bytes(b->qs, 16);
        break;
      }
      case DType::Q4_1: {
        auto* b = reinterpret_cast<BlockQ4_1*>(p) + i;
        b->d = d;
        b->m = m();
        bytes(b->qs, 16);
        break;
      }
      case DType::Q5_0: {
        auto* b = reinterpret_cast<BlockQ5_0*>(p) + i;
        b->d = d;
        bytes(b->qh, 4);
        bytes(b->qs, 16);
        break;
      }
      case DType::Q5_1: {
        auto* b = reinterpret_cast<BlockQ5_1*>(p) + i;
        b->d = d;
        b->m = m();
        bytes(b->qh, 4);
        bytes(b->qs, 16);
        break;
      }
      case DType::Q2_K: {  // scales and mins 0..15
        auto* b = reinterpret_cast<BlockQ2_K*>(p) + i;
        b->d = d;
        b->dmin = d;
        bytes(b->scales, 16);
        bytes(b->qs, 64);
        break;
      }
      case DType::Q3_K: {  // every 6-bit scale
        auto* b = reinterpret_cast<BlockQ3_K*>(p) + i;
        b->d = d;
        bytes(b->hmask, 32);
        bytes(b->qs, 64);
        bytes(b->scales, kKScaleBytes);
        break;
      }
      case DType::Q4_K:
      case DType::Q5_K: {
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) {
          sc[j] = rint_in(r, 0, 15);
          mn[j] = rint_in(r, 0, 15);
        }
        if (wt == DType::Q4_K) {
          auto* b = reinterpret_cast<BlockQ4_K*>(p) + i;
          b->d = d;
          b->dmin = d;
          pack_k4_scales(b->scales, sc, mn);
          bytes(b->qs, 128);
        } else {
          auto* b = reinterpret_cast<BlockQ5_K*>(p) + i;
          b->d = d;
          b->dmin = d;
          pack_k4_scales(b->scales, sc, mn);
          bytes(b->qh, 32);
          bytes(b->qs, 128);
        }
        break;
      }
      case DType::Q6_K: {
        auto* b = reinterpret_cast<BlockQ6_K*>(p) + i;
        b->d = d;
        bytes(b->ql, 128);
        bytes(b->qh, 64);
        for (auto& s : b->scales) s = int8_t(rint_in(r, -15, 15));
        break;
      }
      default: FAIL() << "no exact blocks for " << dtype_name(wt);
    }
  }
}

Tensor exact_weights(DType wt, int64_t N, int64_t K, Rng& r) {
  Tensor w = Tensor::zeros({N, K}, wt);
  for (int64_t n = 0; n < N; ++n) fill_exact_row(wt, w.row<uint8_t>(n), K, r);
  return w;
}

Tensor exact_activations(int64_t T, int64_t K, Rng& r) {
  Tensor x = Tensor::zeros({T, K});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < K / 32; ++b) {
      float* p = x.row<float>(t) + 32 * b;
      for (int i = 0; i < 32; ++i) p[i] = 0.125f * float(rint_in(r, -2, 2));
      p[rint_in(r, 0, 31)] = (r.next() & 1 ? 127.0f : -127.0f) * 0.125f;
    }
  return x;
}

// The exact product (double sums of exact products) from the traits table's decoding.
std::vector<double> exact_product(const Tensor& x, const Tensor& w, const float* bias) {
  const Tensor wf = w.to(DType::F32);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  std::vector<double> y(size_t(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(x.row<float>(t)[k]) * double(wf.row<float>(n)[k]);
      y[size_t(t * N + n)] = acc;
    }
  return y;
}

// Realistic weights and the scale their products' rounding grows with: per output, the sum over
// k of 3 max|w of k's block| |xq_k| (the kernels' terms include dw*u and the offset separately,
// each at most twice the block's largest weight).
std::vector<double> magnitudes(const Tensor& wq, const Act& act, int64_t T) {
  const Tensor wf = wq.to(DType::F32);
  const int64_t N = wq.size(0), K = wq.size(1);
  std::vector<double> mag(size_t(T * N), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const auto xq = act.xq(t);
    for (int64_t n = 0; n < N; ++n) {
      const float* wr = wf.row<float>(n);
      double s = 0;
      for (int64_t b = 0; b < K / 32; ++b) {
        double mx = 0;
        for (int i = 0; i < 32; ++i) mx = std::max(mx, std::fabs(double(wr[32 * b + i])));
        for (int i = 0; i < 32; ++i) s += 3 * mx * std::fabs(xq[size_t(32 * b + i)]);
      }
      mag[size_t(t * N + n)] = s;
    }
  }
  return mag;
}

// A random GEMV problem: weights of type wt, T activation rows quantized by the scalar level, a
// bias, the product's rounding scale per output (magnitudes) and the scalar GEMV's answer.
struct Problem {
  Tensor w, x, b;
  Act act;
  std::vector<double> mag;
  std::vector<float> ref;
  Problem(DType wt, int64_t T, int64_t K, int64_t N, Rng& rng)
      : w(random_tensor({N, K}, DType::F32, rng, 0.1).to(wt)),
        x(random_tensor({T, K}, DType::F32, rng)),
        b(random_tensor({N}, DType::F32, rng)),
        act(T, K) {
    for (int64_t t = 0; t < T; ++t) cpu::quantize_act_generic(x.row<float>(t), act.a, t);
    mag = magnitudes(w, act, T);
    ref = run_gemv(cpu::qgemv_generic(wt), act.a, T, w, b.data<float>());
  }
};

std::vector<int64_t> k_sizes(DType wt, bool exact) {
  if (is_k_quant(wt))
    return exact ? std::vector<int64_t>{256, 512, 4096} : std::vector<int64_t>{256, 768, 4352};
  return {32, 256, 288, 736, 8224};  // 1 block, 1 chunk, chunk + 1, 2 chunks + 7, 257 blocks
}

}  // namespace

TEST(QLinear, ActivationQuantizationIsTheSameAtEveryLevel) {
  Rng rng(announce_seed(41, "QLinear.ActivationQuantizationIsTheSameAtEveryLevel"));
  const auto qs = quantizers();
  for (int64_t K : {32, 64, 256, 288, 4096, 8224}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    std::vector<float> x(static_cast<size_t>(K));
    for (auto& v : x) v = float(rng.normal() * 3.0);
    // Special blocks: all zero, tiny, ties (amax 127: x * 1 = n + 0.5 rounds to even), one huge
    // value, one Inf.
    if (K >= 256) {
      for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;
      for (int i = 32; i < 64; ++i) x[size_t(i)] = 1e-30f * float(i - 40);
      for (int i = 64; i < 96; ++i) x[size_t(i)] = float(i - 80) + 0.5f;
      x[64] = 127.0f;
      x[100] = 3e38f;
      x[200] = INFINITY;
    }
    Act ref(1, K);
    cpu::quantize_act_generic(x.data(), ref.a, 0);
    const cpu::QAct& a = ref.a;
    // Properties of the reference: |x - q d| <= d / 2, sums, zero padding, Inf -> NaN scale.
    for (int64_t b = 0; b < a.nb; ++b) {
      int32_t s[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const int q = a.qs[32 * b + i];
        ASSERT_LE(std::abs(q), 127);
        s[i / 16] += q;
        if (b < K / 32 && std::isfinite(a.d[b])) {
          EXPECT_LE(std::fabs(double(x[size_t(32 * b + i)]) - q * double(a.d[b])),
                    0.5000001 * double(a.d[b]) + 1e-45)
              << "block " << b << " element " << i;
        }
        if (b >= K / 32) {
          EXPECT_EQ(q, 0);
        }
      }
      EXPECT_EQ(a.s[b], s[0] + s[1]);
      EXPECT_EQ(a.h[2 * b], s[0]);
      EXPECT_EQ(a.h[2 * b + 1], s[1]);
      if (b >= K / 32) {
        EXPECT_EQ(a.d[b], 0.0f);
      }
    }
    if (K >= 256) {
      EXPECT_EQ(a.d[0], 0.0f);
      EXPECT_TRUE(std::isnan(a.d[6])) << "the block holding Inf";
    }
    for (const auto& [name, fn] : qs) {
      Act got(1, K);
      std::memset(got.buf.data(), 0x5A, got.buf.size());
      fn(x.data(), got.a, 0);
      EXPECT_EQ(std::memcmp(got.a.qs, a.qs, size_t(a.Kp)), 0) << name << " quants";
      EXPECT_EQ(std::memcmp(got.a.d, a.d, size_t(a.nb) * 4), 0) << name << " scales";
      EXPECT_EQ(std::memcmp(got.a.s, a.s, size_t(a.nb) * 4), 0) << name << " sums";
      EXPECT_EQ(std::memcmp(got.a.h, a.h, size_t(a.nb) * 4), 0) << name << " half sums";
      EXPECT_EQ(std::memcmp(got.a.ds, a.ds, size_t(a.nb) * 4), 0) << name << " d * s";
    }
  }
}

TEST(QLinear, ExactBlocksGiveTheExactProductAtEveryLevel) {
  Rng rng(announce_seed(42, "QLinear.ExactBlocksGiveTheExactProductAtEveryLevel"));
  for (DType wt : kFormats) {
    const auto fns = gemvs(wt);
    for (int64_t K : k_sizes(wt, true))
      for (int64_t N : {1, 3, 17, 255}) {
        if (K >= 4096 && N > 17) continue;
        const int64_t T = N == 3 ? 5 : N == 17 ? 8 : N == 1 ? 2 : 1;
        SCOPED_TRACE(label(wt, T, K, N));
        const Tensor w = exact_weights(wt, N, K, rng);
        const Tensor x = exact_activations(T, K, rng);
        std::vector<float> bias(static_cast<size_t>(N));
        for (auto& b : bias) b = 0.0078125f * float(rint_in(rng, -1000, 1000));
        const auto want = exact_product(x, w, bias.data());
        Act act(T, K);
        for (int64_t t = 0; t < T; ++t) cpu::quantize_act_generic(x.row<float>(t), act.a, t);
        for (const auto& [name, fn] : fns) {
          const auto y = run_gemv(fn, act.a, T, w, bias.data());
          int64_t bad = 0;
          for (size_t i = 0; i < y.size(); ++i)
            if (double(y[i]) != want[i] && bad++ < 3)
              ADD_FAILURE() << name << ": element " << i << " got " << y[i] << " exact " << want[i];
          EXPECT_EQ(bad, 0) << name;
        }
      }
  }
}

TEST(QLinear, SimdLevelsMatchTheScalarLevel) {
  Rng rng(announce_seed(43, "QLinear.SimdLevelsMatchTheScalarLevel"));
  for (DType wt : kFormats) {
    const auto fns = gemvs(wt);
    for (int64_t K : k_sizes(wt, false))
      for (int64_t N : {1, 3, 17, 255}) {
        if (K >= 4096 && N > 17) continue;
        for (int64_t T : {int64_t(1), N == 17 ? int64_t(8) : int64_t(3)}) {
          SCOPED_TRACE(label(wt, T, K, N));
          const Problem pr(wt, T, K, N, rng);
          const auto& [w, x, b, act, mag, ref] = pr;  // fns[0] is the scalar GEMV
          for (size_t f = 1; f < fns.size(); ++f) {
            const auto y = run_gemv(fns[f].second, act.a, T, w, b.data<float>());
            int64_t bad = 0;
            for (size_t i = 0; i < y.size(); ++i)
              if (!(std::fabs(double(y[i]) - double(ref[i])) <= 1e-6 * mag[i] + 1e-30) && bad++ < 3)
                ADD_FAILURE() << fns[f].first << ": element " << i << " got " << y[i] << " generic "
                              << ref[i] << " magnitude " << mag[i];
            EXPECT_EQ(bad, 0) << fns[f].first;
          }
        }
      }
  }
}

TEST(QLinear, AvxVariantsGiveTheSameBits) {
  // AVX-512 with and without VNNI run the same f32 operations on the same integer sums.
  if (!cpu_features().avx512_vnni || isa() != Isa::Avx512) GTEST_SKIP() << "needs AVX-512 VNNI";
  Rng rng(announce_seed(44, "QLinear.AvxVariantsGiveTheSameBits"));
  for (DType wt : kFormats) {
    const int64_t K = 768, N = 67, T = 3;
    const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
    const Tensor x = random_tensor({T, K}, DType::F32, rng);
    Act act(T, K);
    for (int64_t t = 0; t < T; ++t) cpu::quantize_act_avx512(x.row<float>(t), act.a, t);
    const auto a = run_gemv(cpu::qgemv_avx512(wt, true), act.a, T, w, nullptr);
    const auto b = run_gemv(cpu::qgemv_avx512(wt, false), act.a, T, w, nullptr);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << dtype_name(wt);
    // The integer GEMM likewise (Q8_0 has none without VNNI).
    if (!cpu::qgemm_avx512(wt, false)) continue;
    const auto c = run_gemv(cpu::qgemm_avx512(wt, true), act.a, T, w, nullptr);
    const auto d = run_gemv(cpu::qgemm_avx512(wt, false), act.a, T, w, nullptr);
    EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * 4), 0) << dtype_name(wt) << " gemm";
  }
}

TEST(QLinear, QuantizedActivationErrorWithinBound) {
  // ops::linear (the integer GEMV at these T) against the f32 product of the decoded weights:
  // the difference is sum_k w_k (xq_k - x_k), bounded by sum_k |w_k| |xq_k - x_k|, plus f32
  // rounding. Strided x and y with guards; a column slice of wider weights.
  // T = 17 and 40 (prefill): the integer GEMM where the level has one, else decoded panels.
  Rng rng(announce_seed(45, "QLinear.QuantizedActivationErrorWithinBound"));
  IsaLevels isas;
  for (DType wt : kFormats)
    for (int64_t T : {1, 3, 8, 17, 40}) {
      const int64_t K = is_k_quant(wt) ? 512 : 288, N = 37;
      SCOPED_TRACE(label(wt, T, K, N));
      const int64_t extra = traits(wt).block_size;
      const Tensor wide = random_tensor({N, K + 2 * extra}, DType::F32, rng, 0.1).to(wt);
      const Tensor w = wide.slice(1, extra, K);
      Guarded x(T, K, 5);
      fill_normal(x.view(), rng);
      const Tensor b = random_tensor({N}, DType::BF16, rng);
      Tensor yr = Tensor::zeros({T, N});
      ops::ref::linear(x.view(), w, &b, yr);
      const auto ref = values(yr);
      const Tensor wf = w.to(DType::F32);
      Act act(T, K);
      for (int64_t t = 0; t < T; ++t) cpu::quantize_act_generic(x.view().row<float>(t), act.a, t);
      std::vector<double> bound(size_t(T * N));
      for (int64_t t = 0; t < T; ++t) {
        const auto xq = act.xq(t);
        for (int64_t n = 0; n < N; ++n) {
          double e = 0, m = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double wk = std::fabs(double(wf.row<float>(n)[k])),
                         xk = x.view().row<float>(t)[k];
            e += wk * std::fabs(xq[size_t(k)] - xk);
            m += wk * std::fabs(xk);
          }
          bound[size_t(t * N + n)] = e + 1e-5 * m + 1e-6;
        }
      }
      for (Isa level : isas.levels()) {
        set_isa(level);
        Guarded y(T, N, 2);
        ops::linear(x.view(), w, &b, y.view());
        y.check_guards(isa_name(level));
        const auto got = values(y.view());
        int64_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i)
          if (!(std::fabs(got[i] - ref[i]) <= bound[i]) && bad++ < 3)
            ADD_FAILURE() << isa_name(level) << ": element " << i << " got " << got[i]
                          << " f32 product " << ref[i] << " bound " << bound[i];
        EXPECT_EQ(bad, 0) << isa_name(level);
        // The error is real but small: NMSE of 8-bit activations.
        EXPECT_LE(nmse(got, ref), 1e-3) << isa_name(level);
      }
    }
}

TEST(QLinear, OneDimensionalRowAndThreadCounts) {
  // The same bits for 1, 2 and 3 threads (each output row is computed whole by one thread), and
  // for the 1-D form of a single row.
  Rng rng(announce_seed(46, "QLinear.OneDimensionalRowAndThreadCounts"));
  const int saved = num_threads();
  for (DType wt : {DType::Q4_0, DType::Q6_K}) {
    const int64_t K = 1024, N = 1000;
    const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
    const Tensor x = random_tensor({K}, DType::F32, rng);
    std::vector<float> first;
    for (int nt : {1, 2, 3}) {
      set_num_threads(nt);
      Tensor y = Tensor::zeros({N});
      ops::linear(x, w, nullptr, y);
      std::vector<float> got(y.data<float>(), y.data<float>() + N);
      if (first.empty()) {
        first = got;
      } else {
        EXPECT_EQ(std::memcmp(first.data(), got.data(), size_t(N) * 4), 0)
            << dtype_name(wt) << " threads " << nt;
      }
    }
    Tensor yr = Tensor::zeros({N});
    ops::ref::linear(x, w, nullptr, yr);
    EXPECT_LE(nmse(std::vector<double>(first.begin(), first.end()), values(yr)), 1e-3);
  }
  set_num_threads(saved);
}

TEST(QLinear, NonFiniteActivationsGiveNaN) {
  Rng rng(announce_seed(47, "QLinear.NonFiniteActivationsGiveNaN"));
  IsaLevels isas;
  // T = 2 (GEMV) and 20 (prefill: the integer GEMM where the level has one).
  for (DType wt : {DType::Q8_0, DType::Q4_K, DType::Q4_0, DType::Q2_K, DType::Q3_K})
    for (int64_t T : {2, 20}) {
      const int64_t K = 256, N = 20;
      const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
      Tensor x = random_tensor({T, K}, DType::F32, rng);
      x.row<float>(1)[77] = NAN;
      for (Isa level : isas.levels()) {
        set_isa(level);
        Tensor y = Tensor::zeros({T, N});
        ops::linear(x, w, nullptr, y);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n) {
            if (t == 1) {
              EXPECT_TRUE(std::isnan(y.row<float>(t)[n])) << isa_name(level) << " T=" << T;
            } else {
              EXPECT_TRUE(std::isfinite(y.row<float>(t)[n])) << isa_name(level) << " T=" << T;
            }
          }
      }
    }
}

TEST(QLinear, PrefillPanelsMatchReference) {
  // The decoded-panel GEMM (cpu::linear_gemm; linear takes it where the level has no integer
  // GEMM): weights decoded per panel to bf16 (AVX-512 with BF16) or f32, then oneDNN. Several
  // panels per thread at N = 255 and K = 2048 (with 3 threads: a partial last one), strided x
  // and y.
  Rng rng(announce_seed(48, "QLinear.PrefillPanelsMatchReference"));
  IsaLevels isas;
  for (DType wt : kFormats)
    for (int64_t N : {1, 17, 255}) {
      const int64_t K = N == 255 ? 2048 : 512, T = N == 1 ? 64 : cpu::gemv_max_rows(wt) + 1;
      SCOPED_TRACE(label(wt, T, K, N));
      const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
      Guarded x(T, K, 3);
      fill_normal(x.view(), rng);
      const Tensor b = random_tensor({N}, DType::F32, rng);
      Tensor yr = Tensor::zeros({T, N});
      ops::ref::linear(x.view(), w, &b, yr);
      const int saved = num_threads();
      for (int nt : {1, 3})
        for (Isa level : isas.levels()) {
          set_isa(level);
          set_num_threads(nt);
          Guarded y(T, N, 2);
          Tensor yv = y.view();
          cpu::linear_gemm(x.view(), w, &b, yv, T, K, N);
          y.check_guards(isa_name(level));
          const bool bf16 = level == Isa::Avx512 && cpu_features().avx512_bf16;
          EXPECT_LE(nmse(values(y.view()), values(yr)), bf16 ? 1e-5 : 1e-10)
              << isa_name(level) << " threads " << nt;
        }
      set_num_threads(saved);
    }
}

TEST(QLinear, VectorizedDequantizationMatchesTheTraitsTable) {
  // Symmetric formats (x = d * q) bit for bit; formats with a min or offset (x = d * q + m) within
  // one rounding of the larger term (the product and sum may be fused).
  Rng rng(announce_seed(49, "QLinear.VectorizedDequantizationMatchesTheTraitsTable"));
  IsaLevels isas;
  for (DType wt : kFormats)
    for (int64_t K : k_sizes(wt, false)) {
      const Tensor w = random_tensor({1, K}, DType::F32, rng, 0.3).to(wt);
      std::vector<float> ref(static_cast<size_t>(K));
      traits(wt).to_f32(w.raw(), ref.data(), K);
      const bool exact = wt == DType::Q8_0 || wt == DType::Q4_0 || wt == DType::Q5_0 ||
                         wt == DType::Q3_K || wt == DType::Q6_K;
      for (Isa level : isas.levels()) {
        cpu::DequantFn f = level == Isa::Avx2     ? cpu::dequant_avx2(wt)
                           : level == Isa::Avx512 ? cpu::dequant_avx512(wt)
                                                  : nullptr;
        if (!f) continue;
        std::vector<float> got(size_t(K) + 8, -99.0f);
        f(w.raw(), got.data(), K);
        for (int i = 0; i < 8; ++i) EXPECT_EQ(got[size_t(K + i)], -99.0f) << "wrote past the row";
        double amax = 0;
        for (float v : ref) amax = std::max(amax, std::fabs(double(v)));
        for (int64_t k = 0; k < K; ++k) {
          const double tol = exact ? 0.0 : 2.4e-7 * amax;
          ASSERT_LE(std::fabs(double(got[size_t(k)]) - double(ref[size_t(k)])), tol)
              << dtype_name(wt) << " " << isa_name(level) << " K=" << K << " element " << k;
        }
        // Straight to bf16 (AVX-512 with BF16): the f32 values rounded to nearest even.
        if (level != Isa::Avx512 || !cpu_features().avx512_bf16) continue;
        std::vector<uint16_t> h(size_t(K) + 8, 0xBEEF);
        cpu::dequant_bf16_avx512(wt)(w.raw(), h.data(), K);
        for (int i = 0; i < 8; ++i) EXPECT_EQ(h[size_t(K + i)], 0xBEEF) << "wrote past the row";
        for (int64_t k = 0; k < K; ++k) {
          const double want = bf16_to_f32(f32_to_bf16(ref[size_t(k)]));
          const double tol = exact ? 0.0 : 2.4e-7 * amax + std::fabs(want) / 128;
          ASSERT_LE(std::fabs(double(bf16_to_f32(h[size_t(k)])) - want), tol)
              << dtype_name(wt) << " bf16 K=" << K << " element " << k;
        }
      }
    }
}

TEST(QLinear, IntegerGemmTilesAndRowRanges) {
  // The integer GEMMs (prefill) against the scalar GEMV: every tail of the tiles (6 rows on
  // AVX-512, 3 on AVX2), row ranges that start and end inside a panel (32 rows on AVX-512, 16 on
  // AVX2; the columns outside are left alone), a ragged last chunk (K = 736: 2 chunks + 7
  // blocks) and a K of 11008 (43 chunks).
  IsaLevels isas;
  if (isas.levels().back() == Isa::Generic) GTEST_SKIP() << "needs AVX2";
  Rng rng(announce_seed(50, "QLinear.IntegerGemmTilesAndRowRanges"));
  const bool avx512 = isas.levels().back() == Isa::Avx512, vnni = cpu_features().avx512_vnni;
  for (DType wt : kFormats) {
    std::vector<std::pair<std::string, cpu::QGemvFn>> fns = {{"avx2", cpu::qgemm_avx2(wt, false)}};
    if (cpu_features().avx_vnni) fns.push_back({"avx2 vnni", cpu::qgemm_avx2(wt, true)});
    if (avx512) {
      fns.push_back({vnni ? "avx512 vnni" : "avx512", cpu::qgemm_avx512(wt, vnni)});
      if (vnni) fns.push_back({"avx512 novnni", cpu::qgemm_avx512(wt, false)});
    }
    for (const auto& [name, f] : fns) {
      if (!f) continue;
      for (int64_t K : is_k_quant(wt) ? std::vector<int64_t>{768, 11008}
                                      : std::vector<int64_t>{736, 11008}) {
        const int64_t N = 75, T = K > 4096 ? 7 : 19;
        SCOPED_TRACE(label(wt, T, K, N) + " " + name);
        const Problem pr(wt, T, K, N, rng);
        const auto& [w, x, b, act, mag, ref] = pr;
        for (int64_t t1 = 1; t1 <= T; t1 += K > 4096 ? 6 : 1) {  // rows [0, t1)
          const int64_t cuts[] = {0, 13, 45, 75};
          std::vector<float> y(size_t(T * N), -7.0f);
          for (int c = 0; c < 3; ++c)
            f(act.a, t1, w.raw(), w.stride(0), cuts[c], cuts[c + 1], b.data<float>(), y.data(),
              size_t(N));
          int64_t bad = 0;
          for (int64_t i = 0; i < T * N; ++i) {
            const bool written = i / N < t1;
            const double got = y[size_t(i)], want = written ? ref[size_t(i)] : -7.0;
            if (!(std::fabs(got - want) <= (written ? 1e-6 * mag[size_t(i)] + 1e-30 : 0.0)) &&
                bad++ < 3)
              ADD_FAILURE() << "T=" << t1 << " element " << i << " got " << got << " want " << want;
          }
          ASSERT_EQ(bad, 0) << "T=" << t1;
        }
      }
    }
  }
}

TEST(QLinear, LinearManyGivesTheBitsOfSeparateLinears) {
  // One parallel region over several outputs (a layer's q, k, v or gate and up), with weights of
  // different types, row counts that are not multiples of 16, a bias, an output that is a view
  // of a wider buffer, 1 to 3 threads, and a row count beyond the GEMV (separate GEMMs).
  Rng rng(announce_seed(47, "QLinear.LinearManyGivesTheBitsOfSeparateLinears"));
  const int saved = num_threads();
  const int64_t K = 512;
  const std::vector<std::pair<DType, int64_t>> specs = {
      {DType::Q4_K, 200}, {DType::Q8_0, 37}, {DType::BF16, 64}, {DType::Q6_K, 16}, {DType::F32, 5}};
  std::vector<Tensor> ws, bs;
  for (const auto& [dt, N] : specs) {
    ws.push_back(random_tensor({N, K}, DType::F32, rng, 0.1).to(dt));
    bs.push_back(random_tensor({N}, DType::F32, rng));
  }
  for (int64_t T : {int64_t(1), int64_t(3), int64_t(40)}) {
    const Tensor x = random_tensor({T, K}, DType::F32, rng);
    for (int nt : {1, 2, 3}) {
      set_num_threads(nt);  // (oneDNN's GEMM, taken at T = 40, may differ between thread counts)
      std::vector<Tensor> want;  // into views like got's (oneDNN's result may depend on the stride)
      for (size_t i = 0; i < ws.size(); ++i) {
        want.push_back(Tensor::zeros({T, ws[i].size(0) + 7}).slice(1, 3, ws[i].size(0)));
        ops::linear(x, ws[i], i == 1 ? &bs[i] : nullptr, want[i]);
      }
      std::vector<Tensor> wide, got;
      std::vector<ops::LinearOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        wide.push_back(Tensor::zeros({T, ws[i].size(0) + 7}));
        std::fill(wide[i].data<float>(), wide[i].data<float>() + wide[i].numel(), -1.0f);
        got.push_back(wide[i].slice(1, 3, ws[i].size(0)));
      }
      for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], i == 1 ? &bs[i] : nullptr, &got[i]});
      ops::linear_many(x, outs);
      for (size_t i = 0; i < ws.size(); ++i) {
        const int64_t N = ws[i].size(0);
        for (int64_t t = 0; t < T; ++t) {
          EXPECT_EQ(std::memcmp(got[i].row<float>(t), want[i].row<float>(t), size_t(N) * 4), 0)
              << dtype_name(ws[i].dtype()) << " T=" << T << " threads " << nt << " row " << t;
          // The columns around the view are untouched.
          EXPECT_EQ(wide[i].row<float>(t)[0], -1.0f);
          EXPECT_EQ(wide[i].row<float>(t)[N + 6], -1.0f);
        }
      }
    }
  }
  set_num_threads(saved);
  // Outputs without rows do nothing.
  {
    const Tensor w0 = Tensor::zeros({0, K}, DType::Q8_0);
    Tensor y0 = Tensor::zeros({1, 0});
    const Tensor x1 = random_tensor({1, K}, DType::F32, rng);
    const ops::LinearOut none[] = {{&w0, nullptr, &y0}, {&w0, nullptr, &y0}};
    ops::linear_many(x1, none);
  }
  // A wrong shape is the same error as linear's.
  Tensor bad = Tensor::zeros({1, 3});
  const Tensor x1 = Tensor::zeros({1, K});
  const ops::LinearOut outs[] = {{&ws[0], nullptr, &bad}};
  EXPECT_THROW(ops::linear_many(x1, outs), Error);
}

// ---- weights packed for the integer kernels (qpack.h, ops::prepare_weight) ----

namespace {

const DType kPackable[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

Tensor packed_copy(const Tensor& w) {
  Tensor p = Tensor::zeros(w.shape(), w.dtype());
  cpu::pack_rows16(w.dtype(), w.data<uint8_t>(), w.stride(0), w.size(0), w.size(1),
                   p.data<uint8_t>());
  p.storage()->layout = Layout::kRows16;
  return p;
}

// The packed kernels this CPU runs at the selected level and below (names ending in -gemm: the
// GEMMs).
std::vector<std::pair<std::string, cpu::QGemvFn>> packed_kernels(DType wt) {
  std::vector<std::pair<std::string, cpu::QGemvFn>> k = {{"generic", cpu::qgemv_packed_generic(wt)}};
  IsaLevels isas;
  if (isas.levels().back() != Isa::Generic) {
    k.push_back({"avx2", cpu::qgemv_packed_avx2(wt, false)});
    k.push_back({"avx2-gemm", cpu::qgemm_packed_avx2(wt, false)});
    if (cpu_features().avx_vnni) {
      k.push_back({"avx2-vnni", cpu::qgemv_packed_avx2(wt, true)});
      k.push_back({"avx2-vnni-gemm", cpu::qgemm_packed_avx2(wt, true)});
    }
  }
  if (isa() == Isa::Avx512 && cpu_features().avx512_vnni) {
    k.push_back({"avx512", cpu::qgemv_packed_avx512(wt)});
    k.push_back({"avx512-gemm", cpu::qgemm_packed_avx512(wt)});
  }
  return k;
}

}  // namespace

TEST(QPack, PackingRoundTripsAndFollowsTheLayout) {
  Rng rng(announce_seed(60, "QPack.PackingRoundTripsAndFollowsTheLayout"));
  for (DType wt : kPackable) {
    const int64_t K = is_k_quant(wt) ? 512 : 192, N = 48;
    Tensor w = Tensor::zeros({N, K}, wt);
    for (size_t i = 0; i < w.nbytes(); ++i) w.data<uint8_t>()[i] = rbyte(rng);
    const Tensor p = packed_copy(w);
    std::vector<uint8_t> row(w.stride(0));
    for (int64_t n = 0; n < N; ++n) {
      cpu::unpack_row16(wt, p.data<uint8_t>(), n, K, row.data());
      ASSERT_EQ(std::memcmp(row.data(), w.row<uint8_t>(n), row.size()), 0) << dtype_name(wt) << " row " << n;
    }
  }
  // Hand-checked places: Q8_0 row 17 (group 1, row 1), block 3 (the second of pair 1): its f16
  // scale at 32 + 2 x 1 of the packed pair, quant byte 4k + i at 64 + 512 + 64k + 4 x 1 + i with
  // the top bit flipped.
  Tensor w = Tensor::zeros({32, 128}, DType::Q8_0);
  for (size_t i = 0; i < w.nbytes(); ++i) w.data<uint8_t>()[i] = rbyte(rng);
  const Tensor p = packed_copy(w);
  const uint8_t* blk = w.row<uint8_t>(17) + 3 * 34;
  const uint8_t* pb = p.data<uint8_t>() + 16 * w.stride(0) + 16 * 68;
  EXPECT_EQ(std::memcmp(pb + 32 + 2, blk, 2), 0);
  for (int k = 0; k < 8; ++k)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(pb[64 + 512 + 64 * k + 4 + i], blk[2 + 4 * k + i] ^ 0x80);
  EXPECT_FALSE(cpu::packable(DType::Q4_1, 256));
  EXPECT_FALSE(cpu::packable(DType::Q4_0, 96));
  EXPECT_FALSE(cpu::packable(DType::Q4_K, 384));
  EXPECT_THROW(cpu::pack_rows16(DType::Q4_1, w.data<uint8_t>(), 20, 16, 32, nullptr), Error);
  EXPECT_THROW(cpu::pack_rows16(DType::Q8_0, w.data<uint8_t>(), w.stride(0), 24, 128, nullptr), Error);
}

TEST(QPack, PackedKernelsGiveTheExactProduct) {
  // Exact blocks (see above) packed: every packed kernel returns the exact product, over row
  // ranges that start at 16 and at every tail of the 4-row tiles (GEMV) and the 6-row (AVX-512)
  // and 3-row (AVX2) tiles of the GEMMs, with T past 16 (where linear takes the GEMM).
  Rng rng(announce_seed(61, "QPack.PackedKernelsGiveTheExactProduct"));
  for (DType wt : kPackable) {
    const auto fns = packed_kernels(wt);
    // Simple formats: 1 pair, 1 chunk, a chunk and a pair, 129 pairs.
    const std::vector<int64_t> ks = is_k_quant(wt) ? k_sizes(wt, true) : std::vector<int64_t>{64, 256, 320, 8256};
    for (int64_t K : ks)
      for (int64_t N : {16, 48}) {
        if (K >= 4096 && N > 16) continue;
        const int64_t T = N == 16 ? 20 : 3;
        SCOPED_TRACE(label(wt, T, K, N));
        const Tensor w = exact_weights(wt, N, K, rng);
        const Tensor p = packed_copy(w);
        const Tensor x = exact_activations(T, K, rng);
        std::vector<float> bias(static_cast<size_t>(N));
        for (auto& b : bias) b = 0.0078125f * float(rint_in(rng, -1000, 1000));
        const auto want = exact_product(x, w, bias.data());
        Act act(T, K);
        for (int64_t t = 0; t < T; ++t) cpu::quantize_act_generic(x.row<float>(t), act.a, t);
        for (const auto& [name, fn] : fns)
          for (int64_t t1 = 1; t1 <= T; ++t1) {
            if (t1 > 7 && t1 < 17) continue;
            std::vector<float> y(size_t(T * N), -7.0f);
            const int64_t n0 = N > 16 && name != "avx512-gemm" ? 16 : 0;
            fn(act.a, t1, p.raw(), p.stride(0), n0, N, bias.data(), y.data(), size_t(N));
            int64_t bad = 0;
            for (int64_t i = 0; i < T * N; ++i) {
              const bool written = i / N < t1 && i % N >= n0;
              const double got = y[size_t(i)], exp = written ? want[size_t(i)] : -7.0;
              if (got != exp && bad++ < 3)
                ADD_FAILURE() << name << " T=" << t1 << ": element " << i << " got " << got << " want " << exp;
            }
            ASSERT_EQ(bad, 0) << name;
          }
      }
  }
}

TEST(QPack, LinearOnPreparedWeightsMatchesTheStoredOnes) {
  // ops::prepare_weight's result through ops::linear (GEMV at T <= 16, GEMM beyond) against the
  // scalar GEMV of the stored weights, within the SIMD tolerance; a strided x and y; the scalar
  // reference reads the packed rows exactly; at the generic level the packed weight still runs.
  Rng rng(announce_seed(62, "QPack.LinearOnPreparedWeightsMatchesTheStoredOnes"));
  for (DType wt : kPackable) {
    const int64_t K = is_k_quant(wt) ? 768 : 704, N = 80;
    const Tensor w = random_tensor({N, K}, DType::F32, rng, 0.1).to(wt);
    const Tensor p = ops::prepare_weight(w);
    // (Not on AVX-512 without VNNI, nor Q6_K on AVX2, nor Q8_0 on AVX2 without AVX-VNNI: their
    // packed GEMV was the slower.)
    const bool packs = (isa() == Isa::Avx512 && cpu_features().avx512_vnni) ||
                       (isa() == Isa::Avx2 && wt != DType::Q6_K && (wt != DType::Q8_0 || avx_vnni()));
    EXPECT_EQ(p.layout() == Layout::kRows16, packs) << dtype_name(wt);
    if (!packs) continue;
    const Tensor b = random_tensor({N}, DType::F32, rng);
    // At every packing level of this CPU: the layout is the same whichever level packed it.
    {
      IsaLevels levels;
      for (Isa l : levels.levels()) {
        if (l == Isa::Generic || (l == Isa::Avx512 && !cpu_features().avx512_vnni)) continue;
        set_isa(l);
        for (int64_t T : {1, 4, 5, 16, 17, 40}) {
          SCOPED_TRACE(label(wt, T, K, N) + (l == Isa::Avx2 ? " avx2" : " avx512"));
          const Tensor xw = random_tensor({T, K + 9}, DType::F32, rng);
          const Tensor x = xw.slice(1, 0, K);
          Act act(T, K);
          for (int64_t t = 0; t < T; ++t) cpu::quantize_act_generic(x.row<float>(t), act.a, t);
          const auto mag = magnitudes(w, act, T);
          const auto ref = run_gemv(cpu::qgemv_generic(wt), act.a, T, w, b.data<float>());
          Tensor yw = Tensor::zeros({T, N + 5});
          Tensor y = yw.slice(1, 2, N);
          ops::linear(x, p, &b, y);
          int64_t bad = 0;
          for (int64_t t = 0; t < T; ++t)
            for (int64_t n = 0; n < N; ++n) {
              const double got = y.row<float>(t)[n], want = ref[size_t(t * N + n)];
              if (!(std::fabs(got - want) <= 1e-6 * mag[size_t(t * N + n)] + 1e-30) && bad++ < 3)
                ADD_FAILURE() << "row " << t << " col " << n << " got " << got << " want " << want;
            }
          EXPECT_EQ(bad, 0);
          EXPECT_EQ(yw.row<float>(0)[0], 0.0f);
          EXPECT_EQ(yw.row<float>(T - 1)[N + 4], 0.0f);
        }
      }
    }
    // The scalar reference decodes the packed rows to the stored values.
    const Tensor x = random_tensor({2, K}, DType::F32, rng);
    Tensor y1 = Tensor::zeros({2, N}), y2 = Tensor::zeros({2, N});
    ops::ref::linear(x, w, &b, y1);
    ops::ref::linear(x, p, &b, y2);
    EXPECT_EQ(std::memcmp(y1.raw(), y2.raw(), y1.nbytes()), 0) << dtype_name(wt);
    // At the generic level: the packed rows unpacked, then the scalar GEMV (exactly its values).
    {
      IsaLevels levels;
      set_isa(Isa::Generic);
      Act act(2, K);
      for (int64_t t = 0; t < 2; ++t) cpu::quantize_act_generic(x.row<float>(t), act.a, t);
      const auto ref = run_gemv(cpu::qgemv_generic(wt), act.a, 2, w, b.data<float>());
      Tensor y = Tensor::zeros({2, N});
      ops::linear(x, p, &b, y);
      EXPECT_EQ(std::memcmp(y.raw(), ref.data(), y.nbytes()), 0) << dtype_name(wt) << " generic";
    }
    // A packed weight is a linear's only: embedding, copies and row views refuse it.
    std::vector<int32_t> ids = {0, 1};
    Tensor e = Tensor::zeros({2, K});
    EXPECT_THROW(ops::embedding(p, ids, e), Error);
    EXPECT_THROW(p.clone(), Error);
    EXPECT_THROW(p.to(DType::F32), Error);
    EXPECT_THROW(p.slice(0, 0, 16), Error);
  }
  // What has no packed layout, or no whole groups of 16 rows, stays as it is.
  for (const Tensor& w : {random_tensor({32, 256}, DType::F32, rng).to(DType::Q4_1),
                          random_tensor({32, 96}, DType::F32, rng).to(DType::Q4_0),
                          random_tensor({24, 256}, DType::F32, rng).to(DType::Q4_K),
                          random_tensor({32, 256}, DType::F32, rng).to(DType::BF16)}) {
    const Tensor p = ops::prepare_weight(w);
    EXPECT_EQ(p.layout(), Layout::kRows) << w.describe();
    EXPECT_EQ(p.raw(), w.raw()) << w.describe();
  }
}

TEST(QPack, LinearManyMixesPackedAndStoredWeights) {
  // A layer's outputs when some weights are packed: the bits of separate linear calls.
  Rng rng(announce_seed(63, "QPack.LinearManyMixesPackedAndStoredWeights"));
  const int64_t K = 512;
  std::vector<Tensor> ws = {ops::prepare_weight(random_tensor({208, K}, DType::F32, rng, 0.1).to(DType::Q4_K)),
                            random_tensor({37, K}, DType::F32, rng, 0.1).to(DType::Q8_0),
                            ops::prepare_weight(random_tensor({48, K}, DType::F32, rng, 0.1).to(DType::Q6_K)),
                            ops::prepare_weight(random_tensor({32, K}, DType::F32, rng, 0.1).to(DType::Q4_0))};
  const bool packs = (isa() == Isa::Avx512 && cpu_features().avx512_vnni) || isa() == Isa::Avx2;
  EXPECT_EQ(ws[0].layout() == Layout::kRows16, packs);
  const int saved = num_threads();
  for (int64_t T : {1, 3, 17}) {
    const Tensor x = random_tensor({T, K}, DType::F32, rng);
    for (int nt : {1, 2, 3}) {
      set_num_threads(nt);
      std::vector<Tensor> want, got;
      std::vector<ops::LinearOut> outs;
      for (const Tensor& w : ws) {
        want.push_back(Tensor::zeros({T, w.size(0)}));
        ops::linear(x, w, nullptr, want.back());
        got.push_back(Tensor::zeros({T, w.size(0)}));
      }
      for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], nullptr, &got[i]});
      ops::linear_many(x, outs);
      for (size_t i = 0; i < ws.size(); ++i)
        EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), got[i].nbytes()), 0)
            << ws[i].describe() << " T=" << T << " threads " << nt;
    }
  }
  set_num_threads(saved);
}

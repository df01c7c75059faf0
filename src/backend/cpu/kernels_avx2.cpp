// AVX2 + FMA + F16C kernels (8 lanes). The kernels are in kernels_impl.inc; this file supplies
// the vector type. Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt, by file name).
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "genperf/dtype.h"

namespace genperf::cpu::avx2 {
namespace {

struct V {
  using R = __m256;
  static constexpr int W = 8;
  static constexpr int kGemvT = 2;      // 4 rows x 2 accumulators + 4 weights: fits 16 registers
  static constexpr int kScoreKeys = 2;  // 2 keys x 4 query vectors
  static __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float f) { return _mm256_set1_ps(f); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R r) { _mm256_storeu_ps(p, r); }
  static R load_n(const float* p, int n) { return _mm256_maskload_ps(p, lanes_below(n)); }
  static void store_n(float* p, R r, int n) { _mm256_maskstore_ps(p, lanes_below(n), r); }
  static R bf16_to_ps(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // 16-bit tails have no masked load in AVX2: copy the n values into a zeroed block.
  static __m128i load8_u16_n(const uint16_t* p, int n) {
    alignas(16) uint16_t b[8] = {};
    memcpy(b, p, size_t(n) * 2);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(b));
  }
  static R load_bf16(const uint16_t* p) {
    return bf16_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R load_bf16_n(const uint16_t* p, int n) { return bf16_to_ps(load8_u16_n(p, n)); }
  static R load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R load_f16_n(const uint16_t* p, int n) { return _mm256_cvtph_ps(load8_u16_n(p, n)); }
  // 32 FP8 codes (one block) through f16 into out[0..3], as in kernels_avx512.cpp, 16 codes
  // per 256-bit step; a NaN code's f16 gets exponent 31.
  static void f16x16_to_ps(__m256i h, R* out) {
    out[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    out[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  static void load_e4m3(const uint8_t* p, R* out) {
    const __m256i em = _mm256_set1_epi16(0x3F80), mask = _mm256_set1_epi16(int16_t(0xBF80)),
                  nan_bits = _mm256_set1_epi16(0x7E00);
    for (int i = 0; i < 2; ++i) {
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
      __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(c), 7), mask);
      const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, em), em);
      h = _mm256_or_si256(h, _mm256_and_si256(nan, nan_bits));
      f16x16_to_ps(h, out + 2 * i);
    }
  }
  static void load_e5m2(const uint8_t* p, R* out) {
    for (int i = 0; i < 2; ++i) {
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
      f16x16_to_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8), out + 2 * i);
    }
  }
  static R load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static float f16(uint16_t h) { return _cvtsh_ss(h); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float hsum(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[0..3] = hsum(a), hsum(b), hsum(c), hsum(d): pairs interleaved and added within each
  // 128-bit lane, then the two lanes added.
  static void hsum4(R a, R b, R c, R d, float* out) {
    const R ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    const R cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    const R s = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)));
  }
  static float hmax(R a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // exp: x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r (Cephes expf's
  // coefficients, ~1 ulp), times 2^n built in the exponent field. 0 below -87.3.
  static R exp(R x) {
    const R under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
    // NaN stays NaN (the second operand wins), as in the generic level's exp1.
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.33654f), x));
    const R n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    R p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }
  static R swap_pairs(R a) { return _mm256_permute_ps(a, 0xB1); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  // Sums of squares in double (kernels_train.inc): the low and high four lanes of x widened.
  struct D {
    __m256d lo, hi;
  };
  static D dzero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static D add_squares(D d, R x) {
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    return {_mm256_fmadd_pd(lo, lo, d.lo), _mm256_fmadd_pd(hi, hi, d.hi)};
  }
  static double dsum(D d) {
    const __m256d s = _mm256_add_pd(d.lo, d.hi);
    const __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
  }
};

}  // namespace

#include "backend/cpu/kernels_impl.inc"
#include "backend/cpu/kernels_train.inc"

namespace {

// f32 -> f16 with F16C: round to nearest even, as f32_to_f16 (dtype.h) rounds.
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    alignas(16) uint16_t b[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(b),
                    _mm256_cvtps_ph(V::load_n(src + i, int(n - i)), _MM_FROUND_TO_NEAREST_INT));
    memcpy(dst + i, b, size_t(n - i) * 2);
  }
}

// Q8_0 as the reference quantizer; see kernels_avx512.cpp.
void quantize_q8_0_row(const float* src, void* dst, int64_t n) {
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b + 32 <= n; b += 32, o += 34) {
    __m256 x[4], m = _mm256_setzero_ps();
    for (int u = 0; u < 4; ++u) {
      x[u] = _mm256_loadu_ps(src + b + 8 * u);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, x[u]));
    }
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    const float d = _mm_cvtss_f32(s) / 127;
    const float id = d != 0 ? 1 / d : 0;
    const uint16_t h = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    memcpy(o, &h, 2);
    __m256i t[4];
    for (int u = 0; u < 4; ++u) {
      const __m256 v = _mm256_mul_ps(x[u], _mm256_set1_ps(id));
      t[u] = _mm256_cvttps_epi32(v);
      const __m256 frac = _mm256_sub_ps(v, _mm256_cvtepi32_ps(t[u]));
      // The comparisons' all-ones lanes are -1: subtracting moves up, adding moves down.
      t[u] = _mm256_sub_epi32(t[u], _mm256_castps_si256(_mm256_cmp_ps(frac, half, _CMP_GE_OQ)));
      t[u] = _mm256_add_epi32(t[u], _mm256_castps_si256(_mm256_cmp_ps(frac, mhalf, _CMP_LE_OQ)));
    }
    // Packing interleaves 128-bit lanes: 4-code groups come out as t0 t1 t2 t3 (low halves), then
    // the high halves; the permutation puts each t's eight codes together.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]), _mm256_packs_epi32(t[2], t[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 2), _mm256_permutevar8x32_epi32(p, order));
  }
}

}  // namespace

}  // namespace genperf::cpu::avx2

namespace genperf::cpu {

const Kernels& kernels_avx2() {
  static const Kernels k = [] {
    Kernels t{};
    t.name = "avx2";
    t.gemv[size_t(DType::F32)] = avx2::gemv<avx2::LoadF32>;
    t.gemv[size_t(DType::BF16)] = avx2::gemv<avx2::LoadBF16>;
    t.gemv[size_t(DType::F16)] = avx2::gemv<avx2::LoadF16>;
    t.to_f32[size_t(DType::F32)] = avx2::to_f32_row<avx2::LoadF32>;
    t.to_f32[size_t(DType::BF16)] = avx2::to_f32_row<avx2::LoadBF16>;
    t.to_f32[size_t(DType::F16)] = avx2::to_f32_row<avx2::LoadF16>;
    t.gemv[size_t(DType::F8_E4M3_B32)] = avx2::gemv<avx2::LoadE4M3B32>;
    t.gemv[size_t(DType::F8_E5M2_B32)] = avx2::gemv<avx2::LoadE5M2B32>;
    t.to_f32[size_t(DType::F8_E4M3_B32)] = avx2::to_f32_row<avx2::LoadE4M3B32>;
    t.to_f32[size_t(DType::F8_E5M2_B32)] = avx2::to_f32_row<avx2::LoadE5M2B32>;
    t.quantize_act = quantize_act_avx2;
    for (size_t i = 0; i < size_t(DType::COUNT); ++i) {
      t.qgemv[i] = qgemv_avx2(DType(i));
      if (const DequantFn f = dequant_avx2(DType(i))) t.to_f32[i] = f;
    }
    t.f32_to_bf16 = avx2::f32_to_bf16_scalar;
    t.f32_to_f16 = avx2::f32_to_f16_row;
    t.quantize_q8_0 = avx2::quantize_q8_0_row;
    t.rms_norm_row = avx2::rms_norm_row;
    t.rope_row = avx2::rope_row;
    t.silu_mul_row = avx2::silu_mul_row;
    t.add_row = avx2::add_row;
    t.sum_row = avx2::sum_row;
    t.attention = avx2::attention;
    // 4 rows x 2 vectors: 8 accumulators, 2 values of B and 1 of A in 16 registers.
    t.gemm_tile = avx2::gemm_tile<4, 2>;
    t.exp_sum = avx2::exp_sum;
    t.exp_scale = avx2::exp_scale;
    t.silu_mul_backward_row = avx2::silu_mul_backward_row;
    t.adamw_update = avx2::adamw_update;
    t.sum_squares = avx2::sum_squares;
    t.silu_row = avx2::silu_row;
    t.silu_backward_row = avx2::silu_backward_row;
    t.group_norm_moments = avx2::group_norm_moments;
    t.group_norm_apply = avx2::group_norm_apply;
    t.group_norm_grad_sums = avx2::group_norm_grad_sums;
    t.group_norm_dx = avx2::group_norm_dx;
    t.conv_few_oc_row = avx2::conv_few_oc_row;
    return t;
  }();
  return k;
}

}  // namespace genperf::cpu

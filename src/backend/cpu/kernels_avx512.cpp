// AVX-512 kernels (16 lanes; F, BW, VL, DQ). The kernels are in kernels_impl.inc; this file
// supplies the vector type. Compiled with the AVX-512 flags including BF16 and VNNI
// (CMakeLists.txt, by file name), but BF16 instructions run only where cpuid reports them.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wall then
// reports as "used uninitialized" (GCC bug 105593); the values are fully overwritten.
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither the bug nor -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "genperf/dtype.h"
#include "genperf/runtime.h"

namespace genperf::cpu::avx512 {
namespace {

struct V {
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int kGemvT = 4;      // 4 rows x 4 accumulators + 4 weights of 32 registers
  static constexpr int kScoreKeys = 8;  // 8 keys x 2 query vectors
  static __mmask16 lanes_below(int n) { return __mmask16((1u << n) - 1u); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float f) { return _mm512_set1_ps(f); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R r) { _mm512_storeu_ps(p, r); }
  static R load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(lanes_below(n), p); }
  static void store_n(float* p, R r, int n) { _mm512_mask_storeu_ps(p, lanes_below(n), r); }
  // bf16 -> f32 is a 16-bit left shift: exact and cheaper than the memory it waits for.
  static R bf16_to_ps(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load_bf16(const uint16_t* p) {
    return bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R load_bf16_n(const uint16_t* p, int n) {
    return bf16_to_ps(_mm256_maskz_loadu_epi16(lanes_below(n), p));
  }
  static R load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R load_f16_n(const uint16_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes_below(n), p));
  }
  // 32 FP8 codes (one block) through f16, into out[0..1] (kernels_impl.inc, LoadE4M3B32):
  // E4M3's seven low bits go to bits 7..13 and its sign to bit 15, which reads as the value
  // times 2^-8, and NaN codes (0x7F, 0xFF) become an f16 NaN. E5M2 is the top byte of the f16
  // of the same value.
  static void f16x32_to_ps(__m512i h, R* out) {
    out[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    out[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
  static void load_e4m3(const uint8_t* p, R* out) {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(c), 7),
                                       _mm512_set1_epi16(int16_t(0xBF80)));
    const __m256i m7 = _mm256_set1_epi8(0x7F);
    const __mmask32 nan = _mm256_cmpeq_epi8_mask(_mm256_and_si256(c, m7), m7);
    f16x32_to_ps(_mm512_mask_mov_epi16(h, nan, _mm512_set1_epi16(0x7E00)), out);
  }
  static void load_e5m2(const uint8_t* p, R* out) {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    f16x32_to_ps(_mm512_slli_epi16(_mm512_cvtepu8_epi16(c), 8), out);
  }
  static R load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static float f16(uint16_t h) { return _cvtsh_ss(h); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float hsum(R a) { return _mm512_reduce_add_ps(a); }
  // out[0..3] = hsum(a), hsum(b), hsum(c), hsum(d): pairs interleaved and added within each
  // 128-bit lane, then the four lanes added (13 operations where four hsums take about 32).
  static void hsum4(R a, R b, R c, R d, float* out) {
    const R ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const R cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const R s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  static float hmax(R a) { return _mm512_reduce_max_ps(a); }
  // exp as in kernels_avx2.cpp: n ln2 + r, Cephes expf's polynomial, 2^n in the exponent field.
  static R exp(R x) {
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
    // The clamp's operands in this order keep a NaN x (the second operand wins), as exp1 of the
    // generic level does: a NaN in a softmax then shows in its sum instead of vanishing.
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.33654f), x));
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    R p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(__mmask16(~under), p, _mm512_castsi512_ps(e));
  }
  static R swap_pairs(R a) { return _mm512_permute_ps(a, 0xB1); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  // Sums of squares in double (kernels_train.inc): the low and high eight lanes of x widened.
  struct D {
    __m512d lo, hi;
  };
  static D dzero() { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static D add_squares(D d, R x) {
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    return {_mm512_fmadd_pd(lo, lo, d.lo), _mm512_fmadd_pd(hi, hi, d.hi)};
  }
  static double dsum(D d) { return _mm512_reduce_add_pd(_mm512_add_pd(d.lo, d.hi)); }
};

}  // namespace

#include "backend/cpu/kernels_impl.inc"
#include "backend/cpu/kernels_train.inc"

namespace {

// f32 -> bf16 with the AVX512-BF16 instruction: round to nearest even, NaN stays NaN, and f32
// subnormals read as zero (harmless for activations).
void f32_to_bf16_native(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<const __m256i&>(b));
  }
  if (i < n) {
    const __mmask16 m = V::lanes_below(int(n - i));
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, reinterpret_cast<const __m256i&>(b));
  }
}

// f32 -> f16 with F16C: round to nearest even, as f32_to_f16 (dtype.h) rounds.
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRound));
  if (i < n) {
    const __mmask16 m = V::lanes_below(int(n - i));
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), kRound));
  }
}

// Q8_0 as the reference quantizer (src/core/codec_encode.cpp, encode_q8_0): d = amax / 127 in
// f32, stored as f16 rounded to nearest even; codes round(x * (1 / d)) with ties away from zero,
// here the truncated value moved one away from zero where the dropped fraction is at least 1/2.
void quantize_q8_0_row(const float* src, void* dst, int64_t n) {
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m512 sign = _mm512_set1_ps(-0.0f), half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f);
  const __m512i one = _mm512_set1_epi32(1);
  for (int64_t b = 0; b + 32 <= n; b += 32, o += 34) {
    const __m512 x[2] = {_mm512_loadu_ps(src + b), _mm512_loadu_ps(src + b + 16)};
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, x[0]), _mm512_andnot_ps(sign, x[1])));
    const float d = amax / 127;
    const float id = d != 0 ? 1 / d : 0;
    const uint16_t h = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    memcpy(o, &h, 2);
    for (int u = 0; u < 2; ++u) {
      const __m512 v = _mm512_mul_ps(x[u], _mm512_set1_ps(id));
      __m512i t = _mm512_cvttps_epi32(v);
      const __m512 frac = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
      t = _mm512_mask_add_epi32(t, _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ), t, one);
      t = _mm512_mask_sub_epi32(t, _mm512_cmp_ps_mask(frac, mhalf, _CMP_LE_OQ), t, one);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 2 + 16 * u), _mm512_cvtepi32_epi8(t));
    }
  }
}

// FP8 rows straight to bf16 (the decoded panels of the bf16 GEMM): d * fp8(code) in f32, then
// rounded as f32_to_bf16_native rounds it, without a row of f32 in between.
template <class L>
void f8_to_bf16_row(const void* src, uint16_t* dst, int64_t n) {
  const char* s = static_cast<const char*>(src);
  for (int64_t b = 0; b < n / kF8Elems; ++b, s += kF8BlockBytes, dst += kF8Elems) {
    const R d = f8_scale<L>(s);
    R v[2];
    L::load(reinterpret_cast<const uint8_t*>(s + 4), v);
    for (int h = 0; h < 2; ++h) {
      const __m256bh r = _mm512_cvtneps_pbh(V::mul(v[h], d));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * h),
                          reinterpret_cast<const __m256i&>(r));
    }
  }
}

// The same rounding in AVX-512F integer arithmetic, for CPUs without AVX512-BF16.
void f32_to_bf16_emulated(const float* src, uint16_t* dst, int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, odd)), 16);
    const __mmask16 nan =
        _mm512_cmp_ps_mask(_mm512_castsi512_ps(u), _mm512_castsi512_ps(u), _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan,
                              _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  f32_to_bf16_scalar(src + i, dst + i, n - i);
}

}  // namespace
}  // namespace genperf::cpu::avx512

namespace genperf::cpu {

const Kernels& kernels_avx512() {
  static const Kernels k = [] {
    Kernels t{};
    t.name = "avx512";
    t.gemv[size_t(DType::F32)] = avx512::gemv<avx512::LoadF32>;
    t.gemv[size_t(DType::BF16)] = avx512::gemv<avx512::LoadBF16>;
    t.gemv[size_t(DType::F16)] = avx512::gemv<avx512::LoadF16>;
    t.to_f32[size_t(DType::F32)] = avx512::to_f32_row<avx512::LoadF32>;
    t.to_f32[size_t(DType::BF16)] = avx512::to_f32_row<avx512::LoadBF16>;
    t.to_f32[size_t(DType::F16)] = avx512::to_f32_row<avx512::LoadF16>;
    t.gemv[size_t(DType::F8_E4M3_B32)] = avx512::gemv<avx512::LoadE4M3B32>;
    t.gemv[size_t(DType::F8_E5M2_B32)] = avx512::gemv<avx512::LoadE5M2B32>;
    t.to_f32[size_t(DType::F8_E4M3_B32)] = avx512::to_f32_row<avx512::LoadE4M3B32>;
    t.to_f32[size_t(DType::F8_E5M2_B32)] = avx512::to_f32_row<avx512::LoadE5M2B32>;
    t.quantize_act = quantize_act_avx512;
    for (size_t i = 0; i < size_t(DType::COUNT); ++i) {
      t.qgemv[i] = qgemv_avx512(DType(i), cpu_features().avx512_vnni);
      if (const DequantFn f = dequant_avx512(DType(i))) t.to_f32[i] = f;
      if (cpu_features().avx512_bf16) t.to_bf16[i] = dequant_bf16_avx512(DType(i));
    }
    if (cpu_features().avx512_bf16) {
      t.to_bf16[size_t(DType::F8_E4M3_B32)] = avx512::f8_to_bf16_row<avx512::LoadE4M3B32>;
      t.to_bf16[size_t(DType::F8_E5M2_B32)] = avx512::f8_to_bf16_row<avx512::LoadE5M2B32>;
    }
    t.f32_to_bf16 =
        cpu_features().avx512_bf16 ? avx512::f32_to_bf16_native : avx512::f32_to_bf16_emulated;
    t.f32_to_f16 = avx512::f32_to_f16_row;
    t.quantize_q8_0 = avx512::quantize_q8_0_row;
    t.rms_norm_row = avx512::rms_norm_row;
    t.rope_row = avx512::rope_row;
    t.silu_mul_row = avx512::silu_mul_row;
    t.add_row = avx512::add_row;
    t.sum_row = avx512::sum_row;
    t.attention = avx512::attention;
    t.gemm_tile = gemm_tile_avx512;
    t.exp_sum = avx512::exp_sum;
    t.exp_scale = avx512::exp_scale;
    t.silu_mul_backward_row = avx512::silu_mul_backward_row;
    t.adamw_update = avx512::adamw_update;
    t.sum_squares = avx512::sum_squares;
    t.silu_row = avx512::silu_row;
    t.silu_backward_row = avx512::silu_backward_row;
    t.group_norm_moments = avx512::group_norm_moments;
    t.group_norm_apply = avx512::group_norm_apply;
    t.group_norm_grad_sums = avx512::group_norm_grad_sums;
    t.group_norm_dx = avx512::group_norm_dx;
    t.conv_few_oc_row = avx512::conv_few_oc_row;
    return t;
  }();
  return k;
}

}  // namespace genperf::cpu

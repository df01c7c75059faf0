// AVX-512 row kernels of training (vec.h). exp(x) = 2^k e^r with k = round(x / ln 2) and
// |r| <= ln 2 / 2: e^r by its degree-7 Taylor polynomial (truncation below 1e-8 relative), 2^k
// applied with scalef, which gives 0 or infinity past the float range. Tails use masked lanes.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wall reports
// as uninitialized (as in src/backend/cpu/kernels_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither the bug nor -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "train/vec.h"

namespace genperf::train::avx512 {
namespace {

inline __m512 exp16(__m512 x) {
  // max(lo, x) keeps a NaN x (the second operand wins); -inf clamps to lo and gives 0.
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);  // ln 2 in two parts
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

inline __m512 sigmoid16(__m512 g) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

}  // namespace

float exp_sum(const float* x, float* out, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), s));
    if (out) _mm512_mask_storeu_ps(out + i, k, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, e));
  }
  return _mm512_reduce_add_ps(acc);
}

void exp_scale(const float* x, float* out, int64_t n, float shift, float scale) {
  const __m512 s = _mm512_set1_ps(shift), c = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), s));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(c, e));
  }
}

void swiglu_row(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_mul_ps(gv, sigmoid16(gv)), uv));
  }
}

void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
    const __m512 dv = _mm512_maskz_loadu_ps(k, d + i), s = sigmoid16(gv);
    _mm512_mask_storeu_ps(du + i, k, _mm512_mul_ps(_mm512_mul_ps(dv, gv), s));
    const __m512 t = _mm512_fmadd_ps(gv, _mm512_sub_ps(one, s), one);  // 1 + g (1 - s)
    _mm512_mask_storeu_ps(dg + i, k, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dv, uv), s), t));
  }
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& a) {
  const __m512 keep = _mm512_set1_ps(a.keep), b1 = _mm512_set1_ps(a.beta1), b2 = _mm512_set1_ps(a.beta2);
  const __m512 c1 = _mm512_set1_ps(1.0f - a.beta1), c2 = _mm512_set1_ps(1.0f - a.beta2);
  const __m512 step = _mm512_set1_ps(a.step_size), inv = _mm512_set1_ps(a.inv_bc2_sqrt);
  const __m512 eps = _mm512_set1_ps(a.eps);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
    const __m512 mv = _mm512_fmadd_ps(b1, _mm512_maskz_loadu_ps(k, m + i), _mm512_mul_ps(c1, gv));
    const __m512 vv = _mm512_fmadd_ps(b2, _mm512_maskz_loadu_ps(k, v + i), _mm512_mul_ps(c2, _mm512_mul_ps(gv, gv)));
    const __m512 den = _mm512_fmadd_ps(_mm512_sqrt_ps(vv), inv, eps);
    const __m512 pv = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), keep);
    _mm512_mask_storeu_ps(p + i, k, _mm512_sub_ps(pv, _mm512_div_ps(_mm512_mul_ps(step, mv), den)));
    _mm512_mask_storeu_ps(m + i, k, mv);
    _mm512_mask_storeu_ps(v + i, k, vv);
  }
}

double sum_squares(const float* x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    a0 = _mm512_fmadd_pd(lo, lo, a0);
    a1 = _mm512_fmadd_pd(hi, hi, a1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

}  // namespace genperf::train::avx512

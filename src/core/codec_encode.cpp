// The block codecs' encoders (codec.h): scale searches, the per-block encoders (ggml's
// reference rounding, and a search weighted by importance), the row driver that keeps the better
// of the two per block, and every quantize_*. The decoders are in codec.cpp, what they share in
// codec_internal.h.
#include "core/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/codec_internal.h"
#include "genperf/dtype.h"
#include "genperf/error.h"

namespace genperf::codec {

using namespace detail;

namespace {

// The element with the largest magnitude, with its sign (the first one on ties).
inline float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  return max;
}

inline float absmax(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// sum_i w_i (x_i - y_i)^2, in double so that comparing two encodings is not decided by rounding.
double weighted_sq_error(const float* x, const float* y, const float* w, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(x[i]) - double(y[i]);
    e += double(w[i]) * d * d;
  }
  return e;
}

// Relative stretches of the starting scale that the weighted searches try (0.8 .. 1.1).
constexpr int kStretchLo = -16, kStretchHi = 8;
inline float stretch(int k) { return 1.f + 0.0125f * float(k); }

// ---- scale searches ----

struct MinSearch {
  float rmin, rdelta;  // grid k stretches nmax to nmax + rmin + rdelta * k
  int steps;
  bool abs_error;      // minimize sum w |diff| instead of sum w diff^2
};
constexpr MinSearch kSearchK4{-1.f, 0.1f, 20, false};   // Q4_K / Q5_K
constexpr MinSearch kSearchQ2K{-0.5f, 0.1f, 15, true};  // Q2_K
constexpr MinSearch kSearchQ2KWeighted{-0.5f, 0.1f, 15, false};

// Weighted search of scale and min for q in [0, nmax] (x ~ scale * q - min_out, min_out >= 0):
// starts from the range, tries steps+1 stretched grids and refits scale and min by weighted
// least squares on each, keeps the smallest weighted error. Fills L, returns scale.
float search_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                       const MinSearch& s) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, uint8_t(0));
    *min_out = -lo;
    return 0.f;
  }
  // w * |diff| or w * diff * diff (in that order: the unweighted K-quants stay bit-identical).
  auto cost = [&](float w_i, float diff) { return s.abs_error ? w_i * std::fabs(diff) : w_i * diff * diff; };
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
    L[i] = uint8_t(l);
    best += cost(w[i], scale * l + lo - x[i]);
  }
  uint8_t Laux[kQK_K];
  for (int is = 0; is <= s.steps; ++is) {
    iscale = (s.rmin + s.rdelta * is + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      Laux[i] = uint8_t(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) err += cost(w[i], this_scale * Laux[i] + this_min - x[i]);
    if (err < best) {
      std::copy(Laux, Laux + n, L);
      best = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *min_out = -lo;
  return scale;
}

// Symmetric search for q in [-nmax, nmax - 1], weighted by w (x^2 when w is null): the element
// of largest magnitude maps to -nmax, then 19 nearby grids are tried with a least-squares scale.
// Returns the scale (0 for an all-zero group).
float search_scale_sym(int n, int nmax, const float* x, const float* w = nullptr) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-30f) return 0.f;
  auto fit = [&](float iscale, float* scale) {
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float wi = w ? w[i] : x[i] * x[i];
      sum_lx += wi * x[i] * l;
      sum_l2 += wi * l * l;
    }
    *scale = sum_l2 > 0 ? sum_lx / sum_l2 : 0.f;
    return std::pair{sum_lx, sum_l2};
  };
  float scale;
  auto [sumlx, suml2] = fit(-nmax / max, &scale);
  float best = scale * sumlx;  // the explained weighted energy: larger is better
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    float s;
    auto [lx, l2] = fit(-(nmax + 0.1f * is) / max, &s);
    if (l2 > 0 && lx * lx > best * l2) {
      scale = s;
      best = s * lx;
    }
  }
  return scale;
}

// Weighted fit of an f16 scale d for q in [lo, hi] (lo < 0 < hi), x ~ d * q: stretched grids
// around both ends, a least-squares d per grid, rounded to f16 and scored on the rounded grid.
// Returns the f16 d with the smallest weighted squared error (0 for an all-zero block).
uint16_t fit_sym_f16(const float* x, const float* w, int n, int lo, int hi) {
  const float max = signed_absmax(x, n);
  if (max == 0) return f2h(0.f);
  uint16_t best_d = f2h(max / float(lo));
  double best = INFINITY;
  for (const int end : {lo, hi})
    for (int k = kStretchLo; k <= kStretchHi; ++k) {
      const float iscale = float(end) * stretch(k) / max;
      float sum_lx = 0, sum_l2 = 0;
      for (int i = 0; i < n; ++i) {
        const int l = std::clamp(nearest_int(iscale * x[i]), lo, hi);
        sum_lx += w[i] * x[i] * l;
        sum_l2 += w[i] * l * l;
      }
      if (sum_l2 <= 0) continue;
      const uint16_t d16 = f2h(sum_lx / sum_l2);
      const float d = h2f(d16);
      if (d == 0 || !std::isfinite(d)) continue;
      double err = 0;
      for (int i = 0; i < n; ++i) {
        const double diff = double(x[i]) - double(d) * std::clamp(nearest_int(x[i] / d), lo, hi);
        err += double(w[i]) * diff * diff;
      }
      if (err < best) {
        best = err;
        best_d = d16;
      }
    }
  return best_d;
}

// Weighted fit of f16 d and m for x ~ d * q + m, q in [0, nmax] (m of either sign): stretched
// grids over the block's range, weighted least squares for (d, m) on each, both rounded to f16
// and scored on the rounded grid.
void fit_offset_f16(const float* x, const float* w, int n, int nmax, uint16_t* d_out, uint16_t* m_out) {
  float lo = x[0], hi = x[0], sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  *d_out = f2h((hi - lo) / nmax);
  *m_out = f2h(lo);
  if (hi == lo) return;
  double best = INFINITY;
  for (int k = kStretchLo; k <= kStretchHi; ++k) {
    const float iscale = nmax * stretch(k) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    const uint16_t d16 = f2h((sum_w * sum_xl - sum_x * sum_l) / D);
    const uint16_t m16 = f2h((sum_l2 * sum_x - sum_l * sum_xl) / D);
    const float d = h2f(d16), m = h2f(m16);
    if (d == 0 || !std::isfinite(d) || !std::isfinite(m)) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double diff = double(x[i]) - (double(d) * std::clamp(nearest_int((x[i] - m) / d), 0, nmax) + m);
      err += double(w[i]) * diff * diff;
    }
    if (err < best) {
      best = err;
      *d_out = d16;
      *m_out = m16;
    }
  }
}

// ---- the row driver ----

// Quantizes nrows x row_len: every block gets the unweighted encoding `ref`; with importance the
// `weighted` encoding (its search weighted by the block's importance) replaces it when its
// weighted squared error is smaller.
template <typename Block, int kBS>
void quantize_rows_impl(const char* name, const float* src, void* dst, int64_t nrows, int64_t row_len,
                        const float* importance, void (*ref)(const float*, Block&),
                        void (*weighted)(const float*, const float*, Block&),
                        void (*decode)(const void*, float*, int64_t)) {
  GP_CHECK(nrows >= 0 && row_len >= 0 && row_len % kBS == 0, "[quantize] ", name, ": row length ", row_len,
           " is not a multiple of the block size ", kBS);
  if (importance)
    for (int64_t i = 0; i < row_len; ++i)
      GP_CHECK(importance[i] >= 0 && std::isfinite(importance[i]), "[quantize] ", name, ": importance[", i,
               "] = ", importance[i], " (weights must be finite and non-negative)");
  auto* out = static_cast<Block*>(dst);
  const int64_t nb = row_len / kBS;
  float y[kBS];
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const float* x = src + r * row_len + b * kBS;
      Block& blk = out[r * nb + b];
      ref(x, blk);
      if (!importance) continue;
      const float* w = importance + b * kBS;
      Block cand;
      weighted(x, w, cand);
      decode(&blk, y, kBS);
      const double e_ref = weighted_sq_error(x, y, w, kBS);
      decode(&cand, y, kBS);
      if (weighted_sq_error(x, y, w, kBS) < e_ref) blk = cand;
    }
}

template <typename Block, int kBS>
void quantize_n_impl(const float* x, void* dst, int64_t n, void (*ref)(const float*, Block&)) {
  auto* b = blocks_out<Block>(dst);
  for (int64_t i = 0; i < n / kBS; ++i, x += kBS) ref(x, b[i]);
}

// ---- per-block encoders ----

// Q8_0: d = amax / 127, q = round(x / d) (ties away from zero, as ggml's reference).
void encode_q8_0(const float* x, BlockQ8_0& b) {
  const float d = absmax(x, kQK) / 127;
  const float id = d != 0 ? 1 / d : 0;
  b.d = f2h(d);
  for (int j = 0; j < kQK; ++j) b.qs[j] = int8_t(std::roundf(x[j] * id));
}
void encode_q8_0_w(const float* x, const float* w, BlockQ8_0& b) {
  b.d = fit_sym_f16(x, w, kQK, -127, 127);
  const float d = h2f(b.d);
  for (int j = 0; j < kQK; ++j) b.qs[j] = int8_t(d == 0 ? 0 : std::clamp(nearest_int(x[j] / d), -127, 127));
}

// Q4_0 / Q5_0: the signed extreme maps to q = 0 (value -half * d); truncating x/d + half + 0.5
// rounds half up, as ggml's reference.
template <int kHalf>
void encode_sym_ref(const float* x, uint16_t* d16, uint8_t* L) {
  const float max = signed_absmax(x, kQK);
  const float d = max / -kHalf;
  const float id = d != 0 ? 1 / d : 0;
  *d16 = f2h(d);
  for (int j = 0; j < kQK; ++j) L[j] = uint8_t(std::min(2 * kHalf - 1, int(int8_t(x[j] * id + (kHalf + 0.5f)))));
}
template <int kHalf>
void encode_sym_w(const float* x, const float* w, uint16_t* d16, uint8_t* L) {
  *d16 = fit_sym_f16(x, w, kQK, -kHalf, kHalf - 1);
  const float d = h2f(*d16);
  for (int j = 0; j < kQK; ++j) L[j] = uint8_t(d == 0 ? kHalf : std::clamp(nearest_int(x[j] / d), -kHalf, kHalf - 1) + kHalf);
}

void encode_q4_0(const float* x, BlockQ4_0& b) {
  uint8_t L[kQK];
  encode_sym_ref<8>(x, &b.d, L);
  pack_nibbles32(L, b.qs);
}
void encode_q4_0_w(const float* x, const float* w, BlockQ4_0& b) {
  uint8_t L[kQK];
  encode_sym_w<8>(x, w, &b.d, L);
  pack_nibbles32(L, b.qs);
}
void encode_q5_0(const float* x, BlockQ5_0& b) {
  uint8_t L[kQK];
  encode_sym_ref<16>(x, &b.d, L);
  pack_q5_32(L, b.qs, b.qh);
}
void encode_q5_0_w(const float* x, const float* w, BlockQ5_0& b) {
  uint8_t L[kQK];
  encode_sym_w<16>(x, w, &b.d, L);
  pack_q5_32(L, b.qs, b.qh);
}

// Q4_1 / Q5_1: the block's range split into nmax steps, m = the smallest element.
template <int kNmax>
void encode_offset_ref(const float* x, uint16_t* d16, uint16_t* m16, uint8_t* L) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kQK; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / kNmax;
  const float id = d != 0 ? 1 / d : 0;
  *d16 = f2h(d);
  *m16 = f2h(lo);
  for (int j = 0; j < kQK; ++j) L[j] = uint8_t(std::min(kNmax, int(uint8_t((x[j] - lo) * id + 0.5f))));
}
template <int kNmax>
void encode_offset_w(const float* x, const float* w, uint16_t* d16, uint16_t* m16, uint8_t* L) {
  fit_offset_f16(x, w, kQK, kNmax, d16, m16);
  const float d = h2f(*d16), m = h2f(*m16);
  for (int j = 0; j < kQK; ++j) L[j] = uint8_t(d == 0 ? 0 : std::clamp(nearest_int((x[j] - m) / d), 0, kNmax));
}

void encode_q4_1(const float* x, BlockQ4_1& b) {
  uint8_t L[kQK];
  encode_offset_ref<15>(x, &b.d, &b.m, L);
  pack_nibbles32(L, b.qs);
}
void encode_q4_1_w(const float* x, const float* w, BlockQ4_1& b) {
  uint8_t L[kQK];
  encode_offset_w<15>(x, w, &b.d, &b.m, L);
  pack_nibbles32(L, b.qs);
}
void encode_q5_1(const float* x, BlockQ5_1& b) {
  uint8_t L[kQK];
  encode_offset_ref<31>(x, &b.d, &b.m, L);
  pack_q5_32(L, b.qs, b.qh);
}
void encode_q5_1_w(const float* x, const float* w, BlockQ5_1& b) {
  uint8_t L[kQK];
  encode_offset_w<31>(x, w, &b.d, &b.m, L);
  pack_q5_32(L, b.qs, b.qh);
}

// Q2_K: per sub-block of 16 a scale/min search (weights |x|, absolute error, as ggml's
// reference; with importance, weights imp and squared error), then 4-bit sub-scales and mins
// against f16 d = max scale / 15 and dmin = max min / 15, then each q nearest on the decoded grid.
void encode_q2_k_impl(const float* x, const float* imp, BlockQ2_K& b) {
  uint8_t L[kQK_K];
  float w[16], sub_scale[16], sub_min[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    const float* xs = x + 16 * j;
    for (int l = 0; l < 16; ++l) w[l] = imp ? imp[16 * j + l] : std::fabs(xs[l]);
    sub_scale[j] = search_scale_min(16, 3, xs, w, L + 16 * j, &sub_min[j], imp ? kSearchQ2KWeighted : kSearchQ2K);
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  const float inv_scale = max_scale > 0 ? 15.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 15.f / max_min : 0.f;
  for (int j = 0; j < 16; ++j) {
    const int ls = std::clamp(nearest_int(inv_scale * sub_scale[j]), 0, 15);
    const int lm = std::clamp(nearest_int(inv_min * sub_min[j]), 0, 15);
    b.scales[j] = uint8_t(ls | (lm << 4));
  }
  b.d = f2h(max_scale / 15.f);
  b.dmin = f2h(max_min / 15.f);
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int j = 0; j < 16; ++j) {
    const float ds = d * (b.scales[j] & 0xF), dm = dmin * (b.scales[j] >> 4);
    for (int l = 0; l < 16; ++l)
      L[16 * j + l] = ds == 0 ? 0 : uint8_t(std::clamp(nearest_int((x[16 * j + l] + dm) / ds), 0, 3));
  }
  pack_2bit256(L, b.qs);
}
void encode_q2_k(const float* x, BlockQ2_K& b) { encode_q2_k_impl(x, nullptr, b); }
void encode_q2_k_w(const float* x, const float* w, BlockQ2_K& b) { encode_q2_k_impl(x, w, b); }

// Q3_K: per sub-block of 16 a symmetric scale search for q in [-4, 3] (weights x^2, or the
// importance), then signed 6-bit sub-scales against f16 d (the largest-magnitude sub-scale maps
// to -32), then each q nearest on the decoded grid.
void encode_q3_k_impl(const float* x, const float* imp, BlockQ3_K& b) {
  float sub[16];
  float max_scale = 0, max_abs = 0;
  for (int j = 0; j < 16; ++j) {
    sub[j] = search_scale_sym(16, 4, x + 16 * j, imp ? imp + 16 * j : nullptr);
    if (std::fabs(sub[j]) > max_abs) {
      max_abs = std::fabs(sub[j]);
      max_scale = sub[j];
    }
  }
  std::memset(b.scales, 0, sizeof b.scales);
  b.d = 0;
  uint8_t L[kQK_K];
  std::fill(L, L + kQK_K, uint8_t(4));  // the zero of the grid
  if (max_abs > 0) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int u = std::clamp(nearest_int(iscale * sub[j]), -32, 31) + 32;
      b.scales[j % 8] |= uint8_t((u & 0xF) << (j < 8 ? 0 : 4));
      b.scales[8 + j % 4] |= uint8_t((u >> 4) << (2 * (j / 4)));
    }
    b.d = f2h(1 / iscale);
    const float d = h2f(b.d);
    for (int j = 0; j < 16; ++j) {
      const float ds = d * unpack_scale_q3_k(b.scales, j);
      if (ds == 0) continue;
      for (int l = 0; l < 16; ++l) L[16 * j + l] = uint8_t(std::clamp(nearest_int(x[16 * j + l] / ds), -4, 3) + 4);
    }
  }
  pack_q3_k_codes(L, b);
}
void encode_q3_k(const float* x, BlockQ3_K& b) { encode_q3_k_impl(x, nullptr, b); }
void encode_q3_k_w(const float* x, const float* w, BlockQ3_K& b) { encode_q3_k_impl(x, w, b); }

// The Q4_K/Q5_K quantizer of one super-block: per-sub-block search (weights av|x| + |x|, or the
// importance), 6-bit sub-scales and mins against f16 d and dmin, then the final q (in [0, nmax])
// nearest to each x on the decoded grid.
void quantize_k4_superblock(const float* x, const float* imp, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                            uint8_t* scales, uint8_t* L) {
  float w[32], sub_scale[8], sub_min[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    if (imp) {
      for (int l = 0; l < 32; ++l) w[l] = imp[32 * j + l];
    } else {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    }
    sub_scale[j] = search_scale_min(32, nmax, xs, w, L + 32 * j, &sub_min[j], kSearchK4);
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, nearest_int(inv_scale * sub_scale[j]));
    const int lm = std::min(63, nearest_int(inv_min * sub_min[j]));
    pack_scale_min_k4(scales, j, ls, lm);
  }
  *d_out = f2h(max_scale / 63.f);
  *dmin_out = f2h(max_min / 63.f);
  const float d = h2f(*d_out), dmin = h2f(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(scales, j, &sc, &mn);
    const float ds = d * sc, dm = dmin * mn;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = ds == 0 ? 0 : uint8_t(std::clamp(nearest_int((x[32 * j + l] + dm) / ds), 0, nmax));
  }
}

void encode_q4_k_impl(const float* x, const float* imp, BlockQ4_K& b) {
  uint8_t L[kQK_K];
  quantize_k4_superblock(x, imp, 15, &b.d, &b.dmin, b.scales, L);
  pack_q4_k_codes(L, b);
}
void encode_q4_k(const float* x, BlockQ4_K& b) { encode_q4_k_impl(x, nullptr, b); }
void encode_q4_k_w(const float* x, const float* w, BlockQ4_K& b) { encode_q4_k_impl(x, w, b); }

void encode_q5_k_impl(const float* x, const float* imp, BlockQ5_K& b) {
  uint8_t L[kQK_K];
  quantize_k4_superblock(x, imp, 31, &b.d, &b.dmin, b.scales, L);
  pack_q5_k_codes(L, b);
}
void encode_q5_k(const float* x, BlockQ5_K& b) { encode_q5_k_impl(x, nullptr, b); }
void encode_q5_k_w(const float* x, const float* w, BlockQ5_K& b) { encode_q5_k_impl(x, w, b); }

void encode_q6_k_impl(const float* x, const float* imp, BlockQ6_K& b) {
  float sub[16];
  float max_scale = 0, max_abs = 0;
  for (int j = 0; j < 16; ++j) {
    sub[j] = search_scale_sym(16, 32, x + 16 * j, imp ? imp + 16 * j : nullptr);
    if (std::fabs(sub[j]) > max_abs) {
      max_abs = std::fabs(sub[j]);
      max_scale = sub[j];
    }
  }
  std::memset(b.scales, 0, sizeof b.scales);
  b.d = 0;
  uint8_t L[kQK_K];
  std::fill(L, L + kQK_K, uint8_t(32));  // all zero: d = 0, every q = 32 (the zero of the grid)
  if (max_abs > 0) {
    const float iscale = -128.f / max_scale;
    b.d = f2h(1 / iscale);
    for (int j = 0; j < 16; ++j) b.scales[j] = int8_t(std::min(127, nearest_int(iscale * sub[j])));
    const float d = h2f(b.d);
    for (int j = 0; j < 16; ++j) {
      const float ds = d * b.scales[j];
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = ds == 0 ? 32 : uint8_t(std::clamp(nearest_int(x[16 * j + l] / ds), -32, 31) + 32);
    }
  }
  pack_q6_k_codes(L, b);
}
void encode_q6_k(const float* x, BlockQ6_K& b) { encode_q6_k_impl(x, nullptr, b); }
void encode_q6_k_w(const float* x, const float* w, BlockQ6_K& b) { encode_q6_k_impl(x, w, b); }

// ---- FP8 ----

// Codes of n values against scale d (0: all codes 0).
void f8_encode_scaled(const F8Format& f, const float* x, int64_t n, float d, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = d == 0 ? 0 : f.encode(x[i] / d);
}

// The scale of n values: amax / max, or with weights the candidate among 0.75..1.1 times that
// with the least weighted squared error (ties keep the unweighted scale).
float f8_scale(const F8Format& f, const float* x, const float* w, int64_t n) {
  const float d0 = absmax(x, n) / f.max;
  if (!w || d0 == 0) return d0;
  float best_d = d0;
  double best = INFINITY;
  for (int k = -8; k <= 20; ++k) {
    const float d = k == 0 ? d0 : d0 * (1.f - 0.0125f * float(k));
    double err = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double diff = double(x[i]) - double(d) * double(f.decode(f.encode(x[i] / d)));
      err += double(w[i]) * diff * diff;
    }
    if (err < best || (k == 0 && err == best)) {
      best = err;
      best_d = d;
    }
  }
  return best_d;
}

template <const F8Format& kF>
void encode_f8_b32(const float* x, BlockF8& b) {
  b.d = f8_scale(kF, x, nullptr, kF8Block);
  f8_encode_scaled(kF, x, kF8Block, b.d, b.qs);
}
template <const F8Format& kF>
void encode_f8_b32_w(const float* x, const float* w, BlockF8& b) {
  b.d = f8_scale(kF, x, w, kF8Block);
  f8_encode_scaled(kF, x, kF8Block, b.d, b.qs);
}

}  // namespace

// ---- Q8_0 ----

void quantize_q8_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ8_0, kQK>(x, dst, n, encode_q8_0); }
void quantize_q8_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ8_0, kQK>("q8_0", x, dst, nrows, row_len, imp, encode_q8_0, encode_q8_0_w,
                                     dequantize_q8_0);
}

// ---- Q4_0 / Q4_1 ----

void quantize_q4_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_0, kQK>(x, dst, n, encode_q4_0); }
void quantize_q4_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_0, kQK>("q4_0", x, dst, nrows, row_len, imp, encode_q4_0, encode_q4_0_w,
                                     dequantize_q4_0);
}
void quantize_q4_1(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_1, kQK>(x, dst, n, encode_q4_1); }
void quantize_q4_1(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_1, kQK>("q4_1", x, dst, nrows, row_len, imp, encode_q4_1, encode_q4_1_w,
                                     dequantize_q4_1);
}

// ---- Q5_0 / Q5_1 ----

void quantize_q5_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_0, kQK>(x, dst, n, encode_q5_0); }
void quantize_q5_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_0, kQK>("q5_0", x, dst, nrows, row_len, imp, encode_q5_0, encode_q5_0_w,
                                     dequantize_q5_0);
}
void quantize_q5_1(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_1, kQK>(x, dst, n, encode_q5_1); }
void quantize_q5_1(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_1, kQK>("q5_1", x, dst, nrows, row_len, imp, encode_q5_1, encode_q5_1_w,
                                     dequantize_q5_1);
}

// ---- Q2_K / Q3_K ----

void quantize_q2_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ2_K, kQK_K>(x, dst, n, encode_q2_k); }
void quantize_q2_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ2_K, kQK_K>("q2_k", x, dst, nrows, row_len, imp, encode_q2_k, encode_q2_k_w,
                                       dequantize_q2_k);
}
void quantize_q3_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ3_K, kQK_K>(x, dst, n, encode_q3_k); }
void quantize_q3_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ3_K, kQK_K>("q3_k", x, dst, nrows, row_len, imp, encode_q3_k, encode_q3_k_w,
                                       dequantize_q3_k);
}

// ---- Q4_K / Q5_K ----

void quantize_q4_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_K, kQK_K>(x, dst, n, encode_q4_k); }
void quantize_q4_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_K, kQK_K>("q4_k", x, dst, nrows, row_len, imp, encode_q4_k, encode_q4_k_w,
                                       dequantize_q4_k);
}
void quantize_q5_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_K, kQK_K>(x, dst, n, encode_q5_k); }
void quantize_q5_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_K, kQK_K>("q5_k", x, dst, nrows, row_len, imp, encode_q5_k, encode_q5_k_w,
                                       dequantize_q5_k);
}

// ---- Q6_K ----

void quantize_q6_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ6_K, kQK_K>(x, dst, n, encode_q6_k); }
void quantize_q6_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ6_K, kQK_K>("q6_k", x, dst, nrows, row_len, imp, encode_q6_k, encode_q6_k_w,
                                       dequantize_q6_k);
}

// ---- FP8 with block scales ----

void quantize_f8_e4m3_b32(const float* x, void* dst, int64_t n) {
  quantize_n_impl<BlockF8, kF8Block>(x, dst, n, encode_f8_b32<kE4M3>);
}
void quantize_f8_e4m3_b32(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockF8, kF8Block>("f8_e4m3_b32", x, dst, nrows, row_len, imp, encode_f8_b32<kE4M3>,
                                        encode_f8_b32_w<kE4M3>, dequantize_f8_e4m3_b32);
}
void quantize_f8_e5m2_b32(const float* x, void* dst, int64_t n) {
  quantize_n_impl<BlockF8, kF8Block>(x, dst, n, encode_f8_b32<kE5M2>);
}
void quantize_f8_e5m2_b32(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockF8, kF8Block>("f8_e5m2_b32", x, dst, nrows, row_len, imp, encode_f8_b32<kE5M2>,
                                        encode_f8_b32_w<kE5M2>, dequantize_f8_e5m2_b32);
}

// ---- FP8 with per-channel scales ----

void quantize_f8_per_channel(DType t, const float* src, int64_t nrows, int64_t row_len, uint8_t* codes,
                             float* scales, const float* importance) {
  const F8Format& f = f8_format(t, "quantize_f8_per_channel");
  GP_CHECK(nrows >= 0 && row_len >= 0, "[quantize_f8_per_channel] bad shape [", nrows, ", ", row_len, "]");
  if (importance)
    for (int64_t i = 0; i < row_len; ++i)
      GP_CHECK(importance[i] >= 0 && std::isfinite(importance[i]), "[quantize_f8_per_channel] importance[", i,
               "] = ", importance[i], " (weights must be finite and non-negative)");
  for (int64_t r = 0; r < nrows; ++r) {
    const float* x = src + r * row_len;
    scales[r] = f8_scale(f, x, importance, row_len);
    f8_encode_scaled(f, x, row_len, scales[r], codes + r * row_len);
  }
}

}  // namespace genperf::codec

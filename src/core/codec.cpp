#include "core/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "genperf/dtype.h"
#include "genperf/error.h"

namespace genperf::codec {

namespace {

inline float h2f(uint16_t h) { return f16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_f16(f); }
inline int nearest_int(float f) { return int(std::lrintf(f)); }  // ties to even

template <typename Block>
inline const Block* blocks_in(const void* p) { return static_cast<const Block*>(p); }
template <typename Block>
inline Block* blocks_out(void* p) { return static_cast<Block*>(p); }

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

// ---- bit packing shared by several formats ----

// 32 4-bit values: element j (j < 16) in the low nibble of qs[j], element j + 16 in its high
// nibble (Q4_0, Q4_1, and the low bits of Q5_0, Q5_1).
inline void pack_nibbles32(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = uint8_t((L[j] & 0xF) | ((L[j + kQK / 2] & 0xF) << 4));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Q5_0 and Q5_1 (the same layout): low 4 bits as pack_nibbles32, bit 4 of element i is bit i
// of the little-endian word qh. (Q5_K spreads its fifth bits differently: see quantize_q5_k.)
inline void pack_q5_32(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
  pack_nibbles32(L, qs);
  uint32_t h = 0;
  for (int i = 0; i < kQK; ++i) h |= uint32_t((L[i] >> 4) & 1) << i;
  store_u32(qh, h);
}

// q of element j and j+16 from the low nibbles and the high-bit word.
inline void q5_pair(const uint8_t* qs, uint32_t qh, int j, int* q0, int* q1) {
  *q0 = (qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
  *q1 = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
}

// 256 2-bit values (Q2_K, and the low bits of Q3_K): per half of 128 (qs += 32), element
// 32k + l is bits 2k..2k+1 of qs[l].
inline void pack_2bit256(const uint8_t* L, uint8_t* qs) {
  for (int half = 0; half < kQK_K; half += 128, qs += 32)
    for (int l = 0; l < 32; ++l)
      qs[l] = uint8_t((L[half + l] & 3) | ((L[half + l + 32] & 3) << 2) | ((L[half + l + 64] & 3) << 4) |
                      ((L[half + l + 96] & 3) << 6));
}
inline int unpack_2bit256(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Packs 6-bit scale/min of sub-block j into the 12-byte Q4_K/Q5_K scales field (zeroed first).
inline void pack_scale_min_k4(uint8_t* s, int j, int ls, int lm) {
  if (j < 4) {
    s[j] = uint8_t(ls);
    s[j + 4] = uint8_t(lm);
  } else {
    s[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
    s[j - 4] |= uint8_t((ls >> 4) << 6);
    s[j] |= uint8_t((lm >> 4) << 6);
  }
}

// The codes (one per element, 0 .. levels - 1) of the K-quants into their blocks' quant fields
// (the scales untouched).
void pack_q3_k_codes(const uint8_t* L, BlockQ3_K& b) {
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int e = 0; e < kQK_K; ++e)
    if (L[e] & 4) b.hmask[e % 32] |= uint8_t(1u << (e / 32));
  pack_2bit256(L, b.qs);
}
void pack_q4_k_codes(const uint8_t* L, BlockQ4_K& b) {
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) b.qs[32 * p + l] = uint8_t((L[64 * p + l] & 0xF) | ((L[64 * p + 32 + l] & 0xF) << 4));
}
void pack_q5_k_codes(const uint8_t* L, BlockQ5_K& b) {
  std::memset(b.qh, 0, sizeof b.qh);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int l0 = L[64 * p + l], l1 = L[64 * p + 32 + l];
      b.qs[32 * p + l] = uint8_t((l0 & 0xF) | ((l1 & 0xF) << 4));
      b.qh[l] |= uint8_t((((l0 >> 4) & 1) << (2 * p)) | (((l1 >> 4) & 1) << (2 * p + 1)));
    }
}
void pack_q6_k_codes(const uint8_t* L, BlockQ6_K& b) {
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int base = 0; base < kQK_K; base += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      const int a = L[base + l], c = L[base + l + 32], e = L[base + l + 64], g = L[base + l + 96];
      ql[l] = uint8_t((a & 0xF) | ((e & 0xF) << 4));
      ql[l + 32] = uint8_t((c & 0xF) | ((g & 0xF) << 4));
      qh[l] = uint8_t(((a >> 4) & 3) | (((c >> 4) & 3) << 2) | (((e >> 4) & 3) << 4) | (((g >> 4) & 3) << 6));
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

struct F8Format {
  float max;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
constexpr F8Format kE4M3{kF8E4M3Max, f32_to_f8_e4m3, f8_e4m3_to_f32};
constexpr F8Format kE5M2{kF8E5M2Max, f32_to_f8_e5m2, f8_e5m2_to_f32};

const F8Format& f8_format(DType t, const char* op) {
  GP_CHECK(t == DType::F8_E4M3 || t == DType::F8_E5M2, "[", op, "] ", dtype_name(t),
           " is not an FP8 element type (expected f8_e4m3 or f8_e5m2)");
  return t == DType::F8_E4M3 ? kE4M3 : kE5M2;
}

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
template <const F8Format& kF>
void decode_f8_b32(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockF8>(src);
  for (int64_t i = 0; i < n / kF8Block; ++i, y += kF8Block)
    for (int j = 0; j < kF8Block; ++j) y[j] = b[i].d * kF.decode(b[i].qs[j]);
}

}  // namespace

void unpack_scale_min_k4(const uint8_t* q, int j, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *mn = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

int unpack_scale_q3_k(const uint8_t* s, int j) {
  const int low = (s[j % 8] >> (j < 8 ? 0 : 4)) & 0xF;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// ---- Q8_0 ----

void dequantize_q8_0(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ8_0>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = b[i].qs[j] * d;
  }
}
void quantize_q8_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ8_0, kQK>(x, dst, n, encode_q8_0); }
void quantize_q8_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ8_0, kQK>("q8_0", x, dst, nrows, row_len, imp, encode_q8_0, encode_q8_0_w,
                                     dequantize_q8_0);
}

// ---- Q4_0 / Q4_1 ----

void dequantize_q4_0(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ4_0>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (int(b[i].qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = (int(b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
void quantize_q4_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_0, kQK>(x, dst, n, encode_q4_0); }
void quantize_q4_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_0, kQK>("q4_0", x, dst, nrows, row_len, imp, encode_q4_0, encode_q4_0_w,
                                     dequantize_q4_0);
}

void dequantize_q4_1(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ4_1>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}
void quantize_q4_1(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_1, kQK>(x, dst, n, encode_q4_1); }
void quantize_q4_1(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_1, kQK>("q4_1", x, dst, nrows, row_len, imp, encode_q4_1, encode_q4_1_w,
                                     dequantize_q4_1);
}

// ---- Q5_0 / Q5_1 ----

void dequantize_q5_0(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ5_0>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      int q0, q1;
      q5_pair(b[i].qs, qh, j, &q0, &q1);
      y[j] = (q0 - 16) * d;
      y[j + kQK / 2] = (q1 - 16) * d;
    }
  }
}
void quantize_q5_0(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_0, kQK>(x, dst, n, encode_q5_0); }
void quantize_q5_0(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_0, kQK>("q5_0", x, dst, nrows, row_len, imp, encode_q5_0, encode_q5_0_w,
                                     dequantize_q5_0);
}

void dequantize_q5_1(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ5_1>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      int q0, q1;
      q5_pair(b[i].qs, qh, j, &q0, &q1);
      y[j] = q0 * d + m;
      y[j + kQK / 2] = q1 * d + m;
    }
  }
}
void quantize_q5_1(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_1, kQK>(x, dst, n, encode_q5_1); }
void quantize_q5_1(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_1, kQK>("q5_1", x, dst, nrows, row_len, imp, encode_q5_1, encode_q5_1_w,
                                     dequantize_q5_1);
}

// ---- Q2_K / Q3_K ----

void dequantize_q2_k(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ2_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t sc = b[i].scales[e / 16];
      y[e] = d * (sc & 0xF) * unpack_2bit256(b[i].qs, e) - dmin * (sc >> 4);
    }
  }
}
void quantize_q2_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ2_K, kQK_K>(x, dst, n, encode_q2_k); }
void quantize_q2_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ2_K, kQK_K>("q2_k", x, dst, nrows, row_len, imp, encode_q2_k, encode_q2_k_w,
                                       dequantize_q2_k);
}

void dequantize_q3_k(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ3_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = h2f(b[i].d);
    float ds[16];
    for (int j = 0; j < 16; ++j) ds[j] = d * unpack_scale_q3_k(b[i].scales, j);
    for (int e = 0; e < kQK_K; ++e) {
      const int q = unpack_2bit256(b[i].qs, e) | (((b[i].hmask[e % 32] >> (e / 32)) & 1) << 2);
      y[e] = ds[e / 16] * (q - 4);
    }
  }
}
void quantize_q3_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ3_K, kQK_K>(x, dst, n, encode_q3_k); }
void quantize_q3_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ3_K, kQK_K>("q3_k", x, dst, nrows, row_len, imp, encode_q3_k, encode_q3_k_w,
                                       dequantize_q3_k);
}

// ---- Q4_K / Q5_K ----

void dequantize_q4_k(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ4_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int p = 0; p < 4; ++p, q += 32, y += 64) {
      uint8_t sc0, m0, sc1, m1;
      unpack_scale_min_k4(b[i].scales, 2 * p, &sc0, &m0);
      unpack_scale_min_k4(b[i].scales, 2 * p + 1, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      for (int l = 0; l < 32; ++l) {
        y[l] = d0 * (q[l] & 0xF) - mm0;
        y[l + 32] = d1 * (q[l] >> 4) - mm1;
      }
    }
  }
}
void quantize_q4_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ4_K, kQK_K>(x, dst, n, encode_q4_k); }
void quantize_q4_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ4_K, kQK_K>("q4_k", x, dst, nrows, row_len, imp, encode_q4_k, encode_q4_k_w,
                                       dequantize_q4_k);
}

void dequantize_q5_k(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ5_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int p = 0; p < 4; ++p, q += 32, y += 64) {
      uint8_t sc0, m0, sc1, m1;
      unpack_scale_min_k4(b[i].scales, 2 * p, &sc0, &m0);
      unpack_scale_min_k4(b[i].scales, 2 * p + 1, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      const uint8_t u0 = uint8_t(1u << (2 * p)), u1 = uint8_t(2u << (2 * p));
      for (int l = 0; l < 32; ++l) {
        y[l] = d0 * ((q[l] & 0xF) + (b[i].qh[l] & u0 ? 16 : 0)) - mm0;
        y[l + 32] = d1 * ((q[l] >> 4) + (b[i].qh[l] & u1 ? 16 : 0)) - mm1;
      }
    }
  }
}
void quantize_q5_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ5_K, kQK_K>(x, dst, n, encode_q5_k); }
void quantize_q5_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ5_K, kQK_K>("q5_k", x, dst, nrows, row_len, imp, encode_q5_k, encode_q5_k_w,
                                       dequantize_q5_k);
}

// ---- Q6_K ----

void dequantize_q6_k(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ6_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128)
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q0;
        y[l + 32] = d * sc[is + 2] * q1;
        y[l + 64] = d * sc[is + 4] * q2;
        y[l + 96] = d * sc[is + 6] * q3;
      }
  }
}
void quantize_q6_k(const float* x, void* dst, int64_t n) { quantize_n_impl<BlockQ6_K, kQK_K>(x, dst, n, encode_q6_k); }
void quantize_q6_k(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockQ6_K, kQK_K>("q6_k", x, dst, nrows, row_len, imp, encode_q6_k, encode_q6_k_w,
                                       dequantize_q6_k);
}

// ---- FP8 with block scales ----

void dequantize_f8_e4m3_b32(const void* src, float* y, int64_t n) { decode_f8_b32<kE4M3>(src, y, n); }
void quantize_f8_e4m3_b32(const float* x, void* dst, int64_t n) {
  quantize_n_impl<BlockF8, kF8Block>(x, dst, n, encode_f8_b32<kE4M3>);
}
void quantize_f8_e4m3_b32(const float* x, void* dst, int64_t nrows, int64_t row_len, const float* imp) {
  quantize_rows_impl<BlockF8, kF8Block>("f8_e4m3_b32", x, dst, nrows, row_len, imp, encode_f8_b32<kE4M3>,
                                        encode_f8_b32_w<kE4M3>, dequantize_f8_e4m3_b32);
}
void dequantize_f8_e5m2_b32(const void* src, float* y, int64_t n) { decode_f8_b32<kE5M2>(src, y, n); }
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

void dequantize_f8_per_channel(DType t, const uint8_t* codes, const float* scales, int64_t nrows,
                               int64_t row_len, float* dst) {
  const F8Format& f = f8_format(t, "dequantize_f8_per_channel");
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t i = 0; i < row_len; ++i) dst[r * row_len + i] = scales[r] * f.decode(codes[r * row_len + i]);
}

// ---- code grids (GPTQ) ----

namespace {

// Element e of these blocks is offset[e] + step[e] * code[e].
void grid_q8_0(const void* blk, float* step, float* offset) {
  const float d = h2f(static_cast<const BlockQ8_0*>(blk)->d);
  std::fill(step, step + kQK, d);
  std::fill(offset, offset + kQK, -127 * d);  // codes 0..254 are q = -127..127
}
void codes_q8_0(void* blk, const uint8_t* L) {
  auto& b = *static_cast<BlockQ8_0*>(blk);
  for (int j = 0; j < kQK; ++j) b.qs[j] = int8_t(int(L[j]) - 127);
}

template <typename Block, int kHalf>
void grid_sym32(const void* blk, float* step, float* offset) {
  const float d = h2f(static_cast<const Block*>(blk)->d);
  std::fill(step, step + kQK, d);
  std::fill(offset, offset + kQK, -kHalf * d);
}
template <typename Block>
void grid_offset32(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const Block*>(blk);
  std::fill(step, step + kQK, h2f(b.d));
  std::fill(offset, offset + kQK, h2f(b.m));
}
template <typename Block>
void codes_nibbles32(void* blk, const uint8_t* L) { pack_nibbles32(L, static_cast<Block*>(blk)->qs); }
template <typename Block>
void codes_q5_32(void* blk, const uint8_t* L) {
  auto& b = *static_cast<Block*>(blk);
  pack_q5_32(L, b.qs, b.qh);
}

void grid_q2_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ2_K*>(blk);
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(b.scales[e / 16] & 0xF);
    offset[e] = -(dmin * float(b.scales[e / 16] >> 4));
  }
}
void codes_q2_k(void* blk, const uint8_t* L) { pack_2bit256(L, static_cast<BlockQ2_K*>(blk)->qs); }

void grid_q3_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ3_K*>(blk);
  const float d = h2f(b.d);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(unpack_scale_q3_k(b.scales, e / 16));
    offset[e] = -4 * step[e];
  }
}
void codes_q3_k(void* blk, const uint8_t* L) { pack_q3_k_codes(L, *static_cast<BlockQ3_K*>(blk)); }

template <typename Block>
void grid_k4(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const Block*>(blk);
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(b.scales, j, &sc, &mn);
    std::fill(step + 32 * j, step + 32 * j + 32, d * float(sc));
    std::fill(offset + 32 * j, offset + 32 * j + 32, -(dmin * float(mn)));
  }
}
void codes_q4_k(void* blk, const uint8_t* L) { pack_q4_k_codes(L, *static_cast<BlockQ4_K*>(blk)); }
void codes_q5_k(void* blk, const uint8_t* L) { pack_q5_k_codes(L, *static_cast<BlockQ5_K*>(blk)); }

void grid_q6_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ6_K*>(blk);
  const float d = h2f(b.d);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(b.scales[e / 16]);
    offset[e] = -32 * step[e];
  }
}
void codes_q6_k(void* blk, const uint8_t* L) { pack_q6_k_codes(L, *static_cast<BlockQ6_K*>(blk)); }

constexpr CodeGrid kGridQ8_0{255, grid_q8_0, codes_q8_0};
constexpr CodeGrid kGridQ4_0{16, grid_sym32<BlockQ4_0, 8>, codes_nibbles32<BlockQ4_0>};
constexpr CodeGrid kGridQ4_1{16, grid_offset32<BlockQ4_1>, codes_nibbles32<BlockQ4_1>};
constexpr CodeGrid kGridQ5_0{32, grid_sym32<BlockQ5_0, 16>, codes_q5_32<BlockQ5_0>};
constexpr CodeGrid kGridQ5_1{32, grid_offset32<BlockQ5_1>, codes_q5_32<BlockQ5_1>};
constexpr CodeGrid kGridQ2_K{4, grid_q2_k, codes_q2_k};
constexpr CodeGrid kGridQ3_K{8, grid_q3_k, codes_q3_k};
constexpr CodeGrid kGridQ4_K{16, grid_k4<BlockQ4_K>, codes_q4_k};
constexpr CodeGrid kGridQ5_K{32, grid_k4<BlockQ5_K>, codes_q5_k};
constexpr CodeGrid kGridQ6_K{64, grid_q6_k, codes_q6_k};

}  // namespace

const CodeGrid* code_grid(DType t) {
  switch (t) {
    case DType::Q8_0: return &kGridQ8_0;
    case DType::Q4_0: return &kGridQ4_0;
    case DType::Q4_1: return &kGridQ4_1;
    case DType::Q5_0: return &kGridQ5_0;
    case DType::Q5_1: return &kGridQ5_1;
    case DType::Q2_K: return &kGridQ2_K;
    case DType::Q3_K: return &kGridQ3_K;
    case DType::Q4_K: return &kGridQ4_K;
    case DType::Q5_K: return &kGridQ5_K;
    case DType::Q6_K: return &kGridQ6_K;
    default: return nullptr;
  }
}

}  // namespace genperf::codec

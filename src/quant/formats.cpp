#include "quant/formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "genperf/dtype.h"

namespace genperf::quant {

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

// Weighted search of scale and min for q in [0, nmax] (x ~ scale * q - min_out, min_out >= 0):
// starts from the range, tries nstep+1 stretched grids and refits scale and min by weighted
// least squares on each, keeps the smallest weighted squared error. Fills L, returns scale.
float search_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out) {
  constexpr float kRmin = -1.f, kRdelta = 0.1f;
  constexpr int kSteps = 20;
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
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
    L[i] = uint8_t(l);
    const float diff = scale * l + lo - x[i];
    best += w[i] * diff * diff;
  }
  uint8_t Laux[kQK_K];
  for (int is = 0; is <= kSteps; ++is) {
    iscale = (kRmin + kRdelta * is + nmax) / (hi - lo);
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
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * Laux[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
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

// Symmetric search for q in [-nmax, nmax - 1] weighted by x^2: the element of largest magnitude
// maps to -nmax, then 19 nearby grids are tried with a least-squares scale. Returns the scale
// (0 for an all-zero group).
float search_scale_sym(int n, int nmax, const float* x) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-30f) return 0.f;
  auto fit = [&](float iscale, float* scale) {
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
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

// The Q4_K/Q5_K quantizer of one super-block: per-sub-block search, 6-bit sub-scales and mins
// against f16 d and dmin, then the final q (in [0, nmax]) nearest to each x on the decoded grid.
void quantize_k4_superblock(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales,
                            uint8_t* L) {
  float w[32], sub_scale[8], sub_min[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    sub_scale[j] = search_scale_min(32, nmax, xs, w, L + 32 * j, &sub_min[j]);
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

// ---- Q8_0 ----

void dequantize_q8_0(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockQ8_0>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = b[i].qs[j] * d;
  }
}

void quantize_q8_0(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ8_0>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1 / d : 0;
    b[i].d = f2h(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::roundf(x[j] * id));
  }
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

void quantize_q4_0(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ4_0>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float max = signed_absmax(x, kQK);
    const float d = max / -8;
    const float id = d != 0 ? 1 / d : 0;
    b[i].d = f2h(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // x * id >= -8 (the extreme maps to q = 0); truncation of x*id + 8.5 rounds half up.
      const int q0 = std::min(15, int(int8_t(x[j] * id + 8.5f)));
      const int q1 = std::min(15, int(int8_t(x[j + kQK / 2] * id + 8.5f)));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
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

// Smallest and largest of n values: the range the offset formats (Q4_1, Q5_1) spread over.
static void block_range(const float* x, int n, float& lo, float& hi) {
  lo = hi = x[0];
  for (int j = 1; j < n; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

void quantize_q4_1(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ4_1>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float lo, hi;
    block_range(x, kQK, lo, hi);
    const float d = (hi - lo) / 15;
    const float id = d != 0 ? 1 / d : 0;
    b[i].d = f2h(d);
    b[i].m = f2h(lo);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, int(int8_t((x[j] - lo) * id + 0.5f)));
      const int q1 = std::min(15, int(int8_t((x[j + kQK / 2] - lo) * id + 0.5f)));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

// ---- Q5_0 / Q5_1 ----

namespace {
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// q of element j and j+16 from the low nibbles and the high-bit word.
inline void q5_pair(const uint8_t* qs, uint32_t qh, int j, int* q0, int* q1) {
  *q0 = (qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
  *q1 = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
}
}  // namespace

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

void quantize_q5_0(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ5_0>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float max = signed_absmax(x, kQK);
    const float d = max / -16;
    const float id = d != 0 ? 1 / d : 0;
    b[i].d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, int(int8_t(x[j] * id + 16.5f)));
      const int q1 = std::min(31, int(int8_t(x[j + kQK / 2] * id + 16.5f)));
      b[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 >> 4) & 1) << j;
      qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
    }
    store_u32(b[i].qh, qh);
  }
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

void quantize_q5_1(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ5_1>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float lo, hi;
    block_range(x, kQK, lo, hi);
    const float d = (hi - lo) / 31;
    const float id = d != 0 ? 1 / d : 0;
    b[i].d = f2h(d);
    b[i].m = f2h(lo);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, int(uint8_t((x[j] - lo) * id + 0.5f)));
      const int q1 = std::min(31, int(uint8_t((x[j + kQK / 2] - lo) * id + 0.5f)));
      b[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 >> 4) & 1) << j;
      qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
    }
    store_u32(b[i].qh, qh);
  }
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

void quantize_q4_k(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ4_K>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_superblock(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) b[i].qs[32 * p + l] = uint8_t(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
  }
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

void quantize_q5_k(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ5_K>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_superblock(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        const int l0 = L[64 * p + l], l1 = L[64 * p + 32 + l];
        b[i].qs[32 * p + l] = uint8_t((l0 & 0xF) | ((l1 & 0xF) << 4));
        b[i].qh[l] |= uint8_t(((l0 >> 4) << (2 * p)) | ((l1 >> 4) << (2 * p + 1)));
      }
  }
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

void quantize_q6_k(const float* x, void* dst, int64_t n) {
  auto* b = blocks_out<BlockQ6_K>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float sub[16];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      sub[j] = search_scale_sym(16, 32, x + 16 * j);
      if (std::fabs(sub[j]) > max_abs) {
        max_abs = std::fabs(sub[j]);
        max_scale = sub[j];
      }
    }
    std::memset(&b[i], 0, sizeof b[i]);
    uint8_t L[kQK_K] = {};
    if (max_abs == 0) {
      // All zero: d = 0, every q = 32 (the zero of the grid).
      std::fill(L, L + kQK_K, uint8_t(32));
    } else {
      const float iscale = -128.f / max_scale;
      b[i].d = f2h(1 / iscale);
      for (int j = 0; j < 16; ++j) b[i].scales[j] = int8_t(std::min(127, nearest_int(iscale * sub[j])));
      const float d = h2f(b[i].d);
      for (int j = 0; j < 16; ++j) {
        const float ds = d * b[i].scales[j];
        for (int l = 0; l < 16; ++l)
          L[16 * j + l] = ds == 0 ? 32 : uint8_t(std::clamp(nearest_int(x[16 * j + l] / ds), -32, 31) + 32);
      }
    }
    uint8_t* ql = b[i].ql;
    uint8_t* qh = b[i].qh;
    for (int base = 0; base < kQK_K; base += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const int a = L[base + l], c = L[base + l + 32], e = L[base + l + 64], g = L[base + l + 96];
        ql[l] = uint8_t((a & 0xF) | ((e & 0xF) << 4));
        ql[l + 32] = uint8_t((c & 0xF) | ((g & 0xF) << 4));
        qh[l] = uint8_t((a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((g >> 4) << 6));
      }
  }
}

}  // namespace genperf::quant

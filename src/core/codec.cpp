// The block codecs' decoders (codec.h): dequantize_* of every format, the K-quants' scale
// unpacking, and FP8 with block or per-channel scales. The encoders are in codec_encode.cpp, the
// GPTQ code grids in codec_grid.cpp, what they share in codec_internal.h.
#include "core/codec.h"

#include "core/codec_internal.h"
#include "genperf/dtype.h"

namespace genperf::codec {

using namespace detail;

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

// ---- FP8 with block scales ----

namespace {

template <const F8Format& kF>
void decode_f8_b32(const void* src, float* y, int64_t n) {
  const auto* b = blocks_in<BlockF8>(src);
  for (int64_t i = 0; i < n / kF8Block; ++i, y += kF8Block)
    for (int j = 0; j < kF8Block; ++j) y[j] = b[i].d * kF.decode(b[i].qs[j]);
}

}  // namespace

void dequantize_f8_e4m3_b32(const void* src, float* y, int64_t n) { decode_f8_b32<kE4M3>(src, y, n); }
void dequantize_f8_e5m2_b32(const void* src, float* y, int64_t n) { decode_f8_b32<kE5M2>(src, y, n); }

// ---- FP8 with per-channel scales ----

void dequantize_f8_per_channel(DType t, const uint8_t* codes, const float* scales, int64_t nrows,
                               int64_t row_len, float* dst) {
  const F8Format& f = f8_format(t, "dequantize_f8_per_channel");
  for (int64_t r = 0; r < nrows; ++r)
    for (int64_t i = 0; i < row_len; ++i) dst[r * row_len + i] = scales[r] * f.decode(codes[r * row_len + i]);
}

}  // namespace genperf::codec

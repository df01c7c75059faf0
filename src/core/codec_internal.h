// Internal to src/core: what the block codecs' files share (codec.cpp, the decoders;
// codec_encode.cpp, the encoders; codec_grid.cpp, the GPTQ code grids): f16 conversion, typed
// views of block buffers, every format's bit packing and unpacking, and the FP8 formats.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/codec.h"
#include "genperf/dtype.h"
#include "genperf/error.h"

namespace genperf::codec::detail {

inline float h2f(uint16_t h) { return f16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_f16(f); }
inline int nearest_int(float f) { return int(std::lrintf(f)); }  // ties to even

template <typename Block>
inline const Block* blocks_in(const void* p) { return static_cast<const Block*>(p); }
template <typename Block>
inline Block* blocks_out(void* p) { return static_cast<Block*>(p); }

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
inline void pack_q3_k_codes(const uint8_t* L, BlockQ3_K& b) {
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int e = 0; e < kQK_K; ++e)
    if (L[e] & 4) b.hmask[e % 32] |= uint8_t(1u << (e / 32));
  pack_2bit256(L, b.qs);
}
inline void pack_q4_k_codes(const uint8_t* L, BlockQ4_K& b) {
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) b.qs[32 * p + l] = uint8_t((L[64 * p + l] & 0xF) | ((L[64 * p + 32 + l] & 0xF) << 4));
}
inline void pack_q5_k_codes(const uint8_t* L, BlockQ5_K& b) {
  std::memset(b.qh, 0, sizeof b.qh);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int l0 = L[64 * p + l], l1 = L[64 * p + 32 + l];
      b.qs[32 * p + l] = uint8_t((l0 & 0xF) | ((l1 & 0xF) << 4));
      b.qh[l] |= uint8_t((((l0 >> 4) & 1) << (2 * p)) | (((l1 >> 4) & 1) << (2 * p + 1)));
    }
}
inline void pack_q6_k_codes(const uint8_t* L, BlockQ6_K& b) {
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

// ---- FP8 ----

struct F8Format {
  float max;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
inline constexpr F8Format kE4M3{kF8E4M3Max, f32_to_f8_e4m3, f8_e4m3_to_f32};
inline constexpr F8Format kE5M2{kF8E5M2Max, f32_to_f8_e5m2, f8_e5m2_to_f32};

inline const F8Format& f8_format(DType t, const char* op) {
  GP_CHECK(t == DType::F8_E4M3 || t == DType::F8_E5M2, "[", op, "] ", dtype_name(t),
           " is not an FP8 element type (expected f8_e4m3 or f8_e5m2)");
  return t == DType::F8_E4M3 ? kE4M3 : kE5M2;
}

}  // namespace genperf::codec::detail

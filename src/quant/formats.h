// Block-quantized formats, byte-compatible with ggml/GGUF. Each block stores its scales as f16
// (genperf::f32_to_f16 / f16_to_f32) and its quants packed as ggml lays them out; the structs
// below are the exact on-disk layouts (little-endian, no padding; sizes are static_asserted).
//
// Scalar reference code only: quantize_* follows ggml's reference quantizers (round to nearest;
// for the K-quants a weighted search of scale and min per sub-block, then 6- or 8-bit sub-scales
// relative to one f16 super-block scale), dequantize_* is the exact decode. n is the element
// count, a multiple of the block size; these are the to_f32 / from_f32 rows of the traits table.
#pragma once
#include <cstdint>

namespace genperf::quant {

constexpr int kQK = 32;    // elements per block of the simple formats
constexpr int kQK_K = 256; // elements per super-block of the K-quants
constexpr int kKScaleBytes = 12;  // Q4_K / Q5_K: 8 scales + 8 mins, 6 bits each

// x = d * q, q in [-127, 127]; element i is qs[i].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// x = d * (q - 8); element j (j < 16) is the low nibble of qs[j], element j + 16 its high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m; nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x = d * (q - 16), q 5 bits: low 4 bits as Q4_0, bit 4 of element i is bit i of qh (a
// little-endian u32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x = d * q + m; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// 8 sub-blocks of 32: x = (d * sc[j]) * q - (dmin * mn[j]), q 4 bits, sc/mn 6 bits packed in
// `scales` (see unpack_scale_min_k4). Each 64 elements take 32 bytes of qs: elements 0..31
// are the low nibbles, 32..63 the high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with 5-bit q: the fifth bit of element 64*p + l (l < 32) is bit 2p of qh[l], of
// element 64*p + 32 + l bit 2p + 1 of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6 bits (low 4 in ql, high 2 in qh),
// scales signed 8-bit. Per half of 128 elements (ql += 64, qh += 32), for l < 32:
// element l = ql[l] low | qh[l] bits 0-1, l+32 = ql[l+32] low | bits 2-3,
// l+64 = ql[l] high | bits 4-5, l+96 = ql[l+32] high | bits 6-7.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block.
void unpack_scale_min_k4(const uint8_t* scales, int j, uint8_t* sc, uint8_t* mn);

void dequantize_q8_0(const void* src, float* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
void dequantize_q4_1(const void* src, float* dst, int64_t n);
void quantize_q4_1(const float* src, void* dst, int64_t n);
void dequantize_q5_0(const void* src, float* dst, int64_t n);
void quantize_q5_0(const float* src, void* dst, int64_t n);
void dequantize_q5_1(const void* src, float* dst, int64_t n);
void quantize_q5_1(const float* src, void* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);

}  // namespace genperf::quant

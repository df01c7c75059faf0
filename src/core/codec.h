// Block-quantized formats, byte-compatible with ggml/GGUF, and the FP8 formats (not ggml types).
// Each ggml block stores its scales as f16 (genperf::f32_to_f16 / f16_to_f32) and its quants
// packed as ggml lays them out; the structs below are the exact on-disk layouts (little-endian,
// no padding; sizes are static_asserted).
//
// Scalar reference code only: quantize_* follows ggml's reference quantizers (round to nearest;
// for the K-quants a weighted search of scale (and min) per sub-block, then 4-, 6- or 8-bit
// sub-scales relative to f16 super-block scales), dequantize_* is the exact decode. n is the
// element count, a multiple of the block size; these are the to_f32 / from_f32 rows of the
// traits table.
//
// Importance (imatrix) weighting: every format also has quantize_*(src, dst, nrows, row_len,
// importance), the traits table's `quantize` row. importance is null (the result equals the
// unweighted quantize_* of each row) or row_len non-negative weights w, one per input column.
// Each block then keeps whichever of two encodings has the smaller sum w_i (x_i - decoded_i)^2:
// the unweighted one, and one whose scale search is weighted by w (scales rounded to their
// stored precision inside the search). So the weighted error never exceeds the unweighted
// quantizer's, block by block.
//
// FP8. F8_E4M3_B32 / F8_E5M2_B32: blocks of 32 codes with one f32 scale, x = d * fp8(q),
// d = amax / fp8_max (448 or 57344). The scale is f32, not f16: E5M2's d = amax / 57344 is below
// f16's normal range for any amax under 3.5 (and rounds to zero under 1.7e-3), and an f32 d
// is exact, so the block's largest element encodes as exactly +-max; 9 bits per weight instead
// of 8.5, and the 36-byte block keeps the scale 4-byte aligned.
// Per-channel FP8 (one scale per output row) is not a block format: the weight is a plain
// F8_E4M3 / F8_E5M2 tensor [N, K] plus an f32 tensor [N] of scales, x[n, k] = scale[n] *
// fp8(code[n, k]), the layout HF safetensors checkpoints use ("weight" + "weight_scale"). A
// block of one whole row would make the block size depend on the tensor; as separate tensors the
// matmul kernel is the plain fp8 element kernel and the scale multiplies each output column once
// (y[:, n] *= scale[n]), outside the inner loop. quantize_f8_per_channel /
// dequantize_f8_per_channel below produce and read that pair.
#pragma once
#include <cstdint>

#include "genperf/dtype.h"

namespace genperf::codec {

constexpr int kQK = 32;    // elements per block of the simple formats
constexpr int kQK_K = 256; // elements per super-block of the K-quants
constexpr int kKScaleBytes = 12;  // Q4_K / Q5_K: 8 scales + 8 mins; Q3_K: 16 scales; 6 bits each

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

// 16 sub-blocks of 16: x = (d * (sc & 0xF)) * q - (dmin * (sc >> 4)), sc = scales[j], q 2 bits.
// Per half of 128 elements (qs += 32), element 32k + l (k < 4, l < 32) is bits 2k..2k+1 of qs[l].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * s[j] * (q - 4), q 3 bits, s signed 6-bit (see unpack_scale_q3_k).
// The low 2 bits of q sit in qs as in Q2_K; bit 2 of element e is bit e / 32 of hmask[e % 32].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// F8_E4M3_B32 and F8_E5M2_B32: x = d * fp8(qs[i]) (d an f32; see the file comment).
constexpr int kF8Block = 32;
struct BlockF8 {
  float d;
  uint8_t qs[kF8Block];
};
static_assert(sizeof(BlockF8) == 36);

// Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block.
void unpack_scale_min_k4(const uint8_t* scales, int j, uint8_t* sc, uint8_t* mn);
// Sub-block j's signed scale (-32..31) of a Q3_K block: the low 4 bits are the low (j < 8) or
// high (j >= 8) nibble of scales[j % 8], the high 2 bits are bits 2(j/4)..2(j/4)+1 of
// scales[8 + j % 4]; the stored 6-bit value is offset by 32.
int unpack_scale_q3_k(const uint8_t* scales, int j);

// The codes of a block format as an affine grid, for quantizers that choose every element's code
// themselves once a block's scales are set (GPTQ compensates each element's rounding error in
// the elements after it, inside the block too). `grid` gives, for one block, each element's
// step and offset: code c (0 .. levels - 1) decodes to offset + step * c (the decoder may round
// that product differently by an ulp). `set_codes` writes one code per element into the block,
// keeping its scales.
struct CodeGrid {
  int levels;
  void (*grid)(const void* block, float* step, float* offset);
  void (*set_codes)(void* block, const uint8_t* codes);
};
// The grid of a ggml block format; null for the others (FP8's codes are not an affine grid).
const CodeGrid* code_grid(DType t);

// Unweighted quantizers of n elements and the exact decoders (the traits rows).
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
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void quantize_q2_k(const float* src, void* dst, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
void dequantize_f8_e4m3_b32(const void* src, float* dst, int64_t n);
void quantize_f8_e4m3_b32(const float* src, void* dst, int64_t n);
void dequantize_f8_e5m2_b32(const void* src, float* dst, int64_t n);
void quantize_f8_e5m2_b32(const float* src, void* dst, int64_t n);

// Row quantizers with optional importance (see the file comment): nrows rows of row_len
// elements, row_len a multiple of the block size; importance null or row_len weights.
void quantize_q8_0(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q4_0(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q4_1(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q5_0(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q5_1(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q2_k(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q3_k(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q4_k(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q5_k(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_q6_k(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_f8_e4m3_b32(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
void quantize_f8_e5m2_b32(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);

// Per-channel FP8 (see the file comment). t is DType::F8_E4M3 or F8_E5M2. Row r of src [nrows,
// row_len] becomes codes[r, :] = fp8(x / scales[r]) with scales[r] = amax(row r) / fp8_max; a row
// whose scale would be zero (all zero) gets scale 0 and zero codes. With importance (row_len
// weights), the row's scale is searched among 0.75..1.1 times that (the outliers may clip) for
// the least weighted error, the unweighted scale being one candidate.
void quantize_f8_per_channel(DType t, const float* src, int64_t nrows, int64_t row_len, uint8_t* codes,
                             float* scales, const float* importance = nullptr);
void dequantize_f8_per_channel(DType t, const uint8_t* codes, const float* scales, int64_t nrows,
                               int64_t row_len, float* dst);

}  // namespace genperf::codec

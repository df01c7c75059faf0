// Element types and block formats. Every type is one row of the traits table (dtype.cpp):
// block size, bytes per block, the ggml id (or -1), and scalar reference conversions to and from
// f32. Quantized formats join as new rows; code that handles "any type" goes through traits(),
// never a switch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace genperf {

enum class DType : uint8_t {
  F32 = 0,
  F16,
  BF16,
  I32,
  // Block-quantized, byte-compatible with ggml (layouts in src/core/codec.h).
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q4_K,
  Q5_K,
  Q6_K,
  Q2_K,
  Q3_K,
  // OCP 8-bit floats (not ggml types; GGUF refuses them). F8_E4M3 is the finite "E4M3FN"
  // (PyTorch float8_e4m3fn), F8_E5M2 the IEEE-like one with inf/NaN. As plain elements they are
  // the storage of per-channel scaled weights (scales in a separate tensor, see
  // src/core/codec.h); the _B32 rows carry one f32 scale per block of 32.
  F8_E4M3,
  F8_E5M2,
  F8_E4M3_B32,
  F8_E5M2_B32,
  COUNT  // number of rows in the traits table
};

struct TypeTraits {
  const char* name;     // "f32", "bf16", "q4_k", "f8_e4m3_b32", ...
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool is_float;        // f32/f16/bf16 (false for the quantized and FP8 formats)
  // Scalar reference conversions of n elements (n a multiple of block_size); from_f32 is the
  // unweighted quantizer.
  void (*to_f32)(const void* src, float* dst, int64_t n);
  void (*from_f32)(const float* src, void* dst, int64_t n);
  // The ggml type id GGUF stores (Q2_K 10, Q4_K 12, ...), or -1: not a ggml type.
  int32_t ggml_type;
  // Quantizes nrows rows of row_len elements each (row_len a multiple of block_size). importance
  // is null (then this equals from_f32 row by row) or row_len non-negative weights, one per
  // input column (an imatrix: mean squared activations); the scale search then minimizes
  // sum_i importance[i] * (x_i - decoded_i)^2 over each block. Plain types ignore it.
  void (*quantize)(const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance);
};

const TypeTraits& traits(DType t);
inline const char* dtype_name(DType t) { return traits(t).name; }
// Parses a type name: "f32", "f16", "bf16" (also "float32", "float16", "bfloat16", and the upper-case
// names), every other row's name in lower or upper case ("q4_0", "Q4_0", "q6_k", "Q6_K",
// "f8_e4m3", "F8_E4M3_B32", ...), and PyTorch's "float8_e4m3fn" and "float8_e5m2"; throws
// genperf::Error otherwise.
DType parse_dtype(std::string_view name);
// Bytes taken by n elements of type t; n must be a multiple of the block size.
size_t bytes_for(DType t, int64_t n);
// traits(t).quantize after checking that row_len is a multiple of the block size.
void quantize_rows(DType t, const float* src, void* dst, int64_t nrows, int64_t row_len,
                   const float* importance = nullptr);

// Exact conversions. f32 -> f16/bf16 round to nearest, ties to even; NaN stays NaN, overflow
// goes to infinity, f16 subnormals are produced exactly.
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// FP8 (OCP OFP8). E4M3: bias 7, no infinity, NaN = S.1111.111, largest finite 448, smallest
// subnormal 2^-9. E5M2: bias 15, inf = S.11111.00, NaN = S.11111.{01,10,11}, largest finite 57344,
// smallest subnormal 2^-16. fp8 -> f32 is exact. f32 -> fp8 rounds to nearest, ties to even, and
// saturates: finite values beyond the largest finite and +-inf become +-max (as PTX
// cvt.rn.satfinite and NVIDIA Transformer Engine do, so a scaled weight never turns into inf or
// NaN); NaN stays NaN (code S.1111111 in both formats).
constexpr float kF8E4M3Max = 448.f;
constexpr float kF8E5M2Max = 57344.f;
float f8_e4m3_to_f32(uint8_t v);
float f8_e5m2_to_f32(uint8_t v);
uint8_t f32_to_f8_e4m3(float f);
uint8_t f32_to_f8_e5m2(float f);

}  // namespace genperf

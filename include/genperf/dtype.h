// Element types and block formats. Every type is one row of the traits table (dtype.cpp):
// block size, bytes per block, and scalar reference conversions to and from f32. Quantized
// formats join as new rows; code that handles "any type" goes through traits(), never a switch.
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
  // Block-quantized, byte-compatible with ggml (layouts in src/quant/formats.h).
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q4_K,
  Q5_K,
  Q6_K,
  COUNT  // number of rows in the traits table
};

struct TypeTraits {
  const char* name;     // "f32", "bf16", ...
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool is_float;        // f32/f16/bf16 (false for the quantized formats)
  // Scalar reference conversions of n elements (n a multiple of block_size).
  void (*to_f32)(const void* src, float* dst, int64_t n);
  void (*from_f32)(const float* src, void* dst, int64_t n);
};

const TypeTraits& traits(DType t);
inline const char* dtype_name(DType t) { return traits(t).name; }
// Parses a type name: "f32", "f16", "bf16" (also "float32", "float16", "bfloat16", and the upper-case
// names), and the quantized formats in either case ("q4_0", "Q4_0", "q6_k", "Q6_K", ...);
// throws genperf::Error otherwise.
DType parse_dtype(std::string_view name);
// Bytes taken by n elements of type t; n must be a multiple of the block size.
size_t bytes_for(DType t, int64_t n);

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

}  // namespace genperf

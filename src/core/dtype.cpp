#include "genperf/dtype.h"

#include <array>
#include <cmath>
#include <string>

#include "genperf/error.h"
#include "core/codec.h"

namespace genperf {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  // Subnormal: value = mant * 2^-24, exact in f32.
  float v = float(mant) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): the f16 value is round(|f| * 2^24) * 2^-24.
    if (a < 0x33000000u) return sign;  // below half the smallest subnormal (ties to even: 0)
    const uint32_t e = a >> 23;                   // biased f32 exponent, 102..112
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand
    const uint32_t shift = 126u - e;              // so that m >> shift = |f| * 2^24 truncated
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  // Normal: rebias exponent, round the 13 dropped bits to nearest even. A carry out of the
  // mantissa correctly bumps the exponent.
  uint32_t r = a - 0x38000000u;  // exponent 127 -> 15 bias
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

// ---- FP8 ----
// One encoder/decoder for both layouts: kE exponent bits, kM mantissa bits, bias 2^(kE-1) - 1.
// E4M3 spends its top code on NaN only (no infinity), E5M2 has IEEE inf/NaN; both saturate.

namespace {

template <int kE, int kM>
struct F8Layout {
  static constexpr int kBias = (1 << (kE - 1)) - 1;
  static constexpr uint32_t kExpAll = (1u << kE) - 1;
};

template <int kE, int kM, bool kIeee>
float f8_decode(uint8_t v) {
  using L = F8Layout<kE, kM>;
  const bool neg = v & 0x80;
  const uint32_t exp = (v >> kM) & L::kExpAll;
  const uint32_t mant = v & ((1u << kM) - 1);
  float r;
  if (exp == L::kExpAll && (kIeee || mant == (1u << kM) - 1)) {
    r = kIeee && mant == 0 ? INFINITY : NAN;
  } else if (exp == 0) {
    r = std::ldexp(float(mant), 1 - L::kBias - kM);  // subnormal: mant * 2^(1 - bias - M), exact
  } else {
    r = bits_f32(((exp - L::kBias + 127) << 23) | (mant << (23 - kM)));
  }
  return neg ? -r : r;
}

// max_code: the largest finite magnitude's code (0x7E for E4M3, 0x7B for E5M2).
template <int kE, int kM>
uint8_t f8_encode(float f, uint8_t max_code, float max) {
  using L = F8Layout<kE, kM>;
  const uint32_t u = f32_bits(f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint8_t(sign | 0x7F);           // NaN
  if (a >= f32_bits(max)) return uint8_t(sign | max_code);     // saturate (also +-inf)
  if (a < uint32_t(127 + 1 - L::kBias) << 23) {
    // Below the smallest normal: the code is round(|f| * 2^(bias - 1 + M)), which may carry into
    // the smallest normal's code (correctly). |f| = m * 2^(e - 150) for a normal f32.
    const uint32_t e = a >> 23;
    if (e == 0) return sign;  // f32 subnormals are far below half the smallest fp8 subnormal
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 151u - L::kBias - kM - e;  // >= 24 - M
    if (shift >= 32) return sign;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint8_t(sign | q);
  }
  // Normal: rebias the exponent, round the 23 - M dropped bits to nearest even; a carry out of the
  // mantissa bumps the exponent, and the result stays <= max_code since |f| < max.
  uint32_t r = a - (uint32_t(127 - L::kBias) << 23);
  r += (1u << (22 - kM)) - 1u + ((r >> (23 - kM)) & 1u);
  return uint8_t(sign | (r >> (23 - kM)));
}

}  // namespace

float f8_e4m3_to_f32(uint8_t v) { return f8_decode<4, 3, false>(v); }
float f8_e5m2_to_f32(uint8_t v) { return f8_decode<5, 2, true>(v); }
uint8_t f32_to_f8_e4m3(float f) { return f8_encode<4, 3>(f, 0x7E, kF8E4M3Max); }
uint8_t f32_to_f8_e5m2(float f) { return f8_encode<5, 2>(f, 0x7B, kF8E5M2Max); }

namespace {

void f32_to_f32(const void* s, float* d, int64_t n) { std::memcpy(d, s, size_t(n) * 4); }
void f32_from_f32(const float* s, void* d, int64_t n) { std::memcpy(d, s, size_t(n) * 4); }
void f16_to_f32_row(const void* s, float* d, int64_t n) {
  auto* p = static_cast<const uint16_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = f16_to_f32(p[i]);
}
void f16_from_f32_row(const float* s, void* d, int64_t n) {
  auto* p = static_cast<uint16_t*>(d);
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(s[i]);
}
void bf16_to_f32_row(const void* s, float* d, int64_t n) {
  auto* p = static_cast<const uint16_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(p[i]);
}
void bf16_from_f32_row(const float* s, void* d, int64_t n) {
  auto* p = static_cast<uint16_t*>(d);
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(s[i]);
}
void i32_to_f32_row(const void* s, float* d, int64_t n) {
  auto* p = static_cast<const int32_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = float(p[i]);
}
void i32_from_f32_row(const float* s, void* d, int64_t n) {
  auto* p = static_cast<int32_t*>(d);
  for (int64_t i = 0; i < n; ++i) p[i] = int32_t(s[i]);
}

void f8_e4m3_to_f32_row(const void* s, float* d, int64_t n) {
  auto* p = static_cast<const uint8_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = f8_e4m3_to_f32(p[i]);
}
void f8_e4m3_from_f32_row(const float* s, void* d, int64_t n) {
  auto* p = static_cast<uint8_t*>(d);
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f8_e4m3(s[i]);
}
void f8_e5m2_to_f32_row(const void* s, float* d, int64_t n) {
  auto* p = static_cast<const uint8_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = f8_e5m2_to_f32(p[i]);
}
void f8_e5m2_from_f32_row(const float* s, void* d, int64_t n) {
  auto* p = static_cast<uint8_t*>(d);
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f8_e5m2(s[i]);
}

// Plain types convert element by element: rows are contiguous and importance cannot change the
// nearest value.
template <void (*kFrom)(const float*, void*, int64_t)>
void plain_rows(const float* s, void* d, int64_t nrows, int64_t row_len, const float*) {
  kFrom(s, d, nrows * row_len);
}

using Rows = void (*)(const float*, void*, int64_t, int64_t, const float*);
using N = void (*)(const float*, void*, int64_t);

constexpr std::array<TypeTraits, size_t(DType::COUNT)> kTraits = {{
    {"f32", 1, 4, true, f32_to_f32, f32_from_f32, 0, plain_rows<f32_from_f32>},
    {"f16", 1, 2, true, f16_to_f32_row, f16_from_f32_row, 1, plain_rows<f16_from_f32_row>},
    {"bf16", 1, 2, true, bf16_to_f32_row, bf16_from_f32_row, 30, plain_rows<bf16_from_f32_row>},
    {"i32", 1, 4, false, i32_to_f32_row, i32_from_f32_row, 26, plain_rows<i32_from_f32_row>},
    {"q8_0", 32, 34, false, codec::dequantize_q8_0, N(codec::quantize_q8_0), 8, Rows(codec::quantize_q8_0)},
    {"q4_0", 32, 18, false, codec::dequantize_q4_0, N(codec::quantize_q4_0), 2, Rows(codec::quantize_q4_0)},
    {"q4_1", 32, 20, false, codec::dequantize_q4_1, N(codec::quantize_q4_1), 3, Rows(codec::quantize_q4_1)},
    {"q5_0", 32, 22, false, codec::dequantize_q5_0, N(codec::quantize_q5_0), 6, Rows(codec::quantize_q5_0)},
    {"q5_1", 32, 24, false, codec::dequantize_q5_1, N(codec::quantize_q5_1), 7, Rows(codec::quantize_q5_1)},
    {"q4_k", 256, 144, false, codec::dequantize_q4_k, N(codec::quantize_q4_k), 12, Rows(codec::quantize_q4_k)},
    {"q5_k", 256, 176, false, codec::dequantize_q5_k, N(codec::quantize_q5_k), 13, Rows(codec::quantize_q5_k)},
    {"q6_k", 256, 210, false, codec::dequantize_q6_k, N(codec::quantize_q6_k), 14, Rows(codec::quantize_q6_k)},
    {"q2_k", 256, 84, false, codec::dequantize_q2_k, N(codec::quantize_q2_k), 10, Rows(codec::quantize_q2_k)},
    {"q3_k", 256, 110, false, codec::dequantize_q3_k, N(codec::quantize_q3_k), 11, Rows(codec::quantize_q3_k)},
    {"f8_e4m3", 1, 1, false, f8_e4m3_to_f32_row, f8_e4m3_from_f32_row, -1, plain_rows<f8_e4m3_from_f32_row>},
    {"f8_e5m2", 1, 1, false, f8_e5m2_to_f32_row, f8_e5m2_from_f32_row, -1, plain_rows<f8_e5m2_from_f32_row>},
    {"f8_e4m3_b32", 32, 36, false, codec::dequantize_f8_e4m3_b32, N(codec::quantize_f8_e4m3_b32), -1,
     Rows(codec::quantize_f8_e4m3_b32)},
    {"f8_e5m2_b32", 32, 36, false, codec::dequantize_f8_e5m2_b32, N(codec::quantize_f8_e5m2_b32), -1,
     Rows(codec::quantize_f8_e5m2_b32)},
}};

}  // namespace

const TypeTraits& traits(DType t) {
  const auto i = size_t(t);
  GP_CHECK(i < kTraits.size(), "[dtype] unknown type id ", i);
  return kTraits[i];
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "F32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "F16") return DType::F16;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::BF16;
  if (name == "i32" || name == "int32" || name == "I32") return DType::I32;
  if (name == "float8_e4m3fn") return DType::F8_E4M3;  // PyTorch's names
  if (name == "float8_e5m2") return DType::F8_E5M2;
  // The quantized and FP8 rows: the row name in lower or upper case ("q4_k", "Q4_K").
  std::string expected;
  for (size_t i = size_t(DType::Q8_0); i < kTraits.size(); ++i) {
    const std::string_view row = kTraits[i].name;
    bool lower = name == row, upper = name.size() == row.size();
    for (size_t c = 0; upper && c < row.size(); ++c)
      upper = name[c] == (row[c] >= 'a' && row[c] <= 'z' ? char(row[c] - 'a' + 'A') : row[c]);
    if (lower || upper) return DType(i);
    expected += cat(", ", row);
  }
  fail("[dtype] unknown type '", std::string(name), "' (expected f32, f16, bf16, i32", expected, ")");
}

size_t bytes_for(DType t, int64_t n) {
  const auto& tr = traits(t);
  GP_CHECK(n % tr.block_size == 0, "[dtype] ", n, " elements is not a multiple of the ", tr.name,
           " block size ", tr.block_size);
  return size_t(n / tr.block_size) * tr.block_bytes;
}

}  // namespace genperf

namespace genperf {

void quantize_rows(DType t, const float* src, void* dst, int64_t nrows, int64_t row_len, const float* importance) {
  const auto& tr = traits(t);
  GP_CHECK(nrows >= 0 && row_len >= 0, "[quantize] ", tr.name, ": bad shape [", nrows, ", ", row_len, "]");
  GP_CHECK(row_len % tr.block_size == 0, "[quantize] ", tr.name, ": row length ", row_len,
           " is not a multiple of the block size ", tr.block_size);
  tr.quantize(src, dst, nrows, row_len, importance);
}

}  // namespace genperf

#include "genperf/dtype.h"

#include <array>
#include <string>

#include "genperf/error.h"
#include "quant/formats.h"

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

constexpr std::array<TypeTraits, size_t(DType::COUNT)> kTraits = {{
    {"f32", 1, 4, true, f32_to_f32, f32_from_f32},
    {"f16", 1, 2, true, f16_to_f32_row, f16_from_f32_row},
    {"bf16", 1, 2, true, bf16_to_f32_row, bf16_from_f32_row},
    {"i32", 1, 4, false, i32_to_f32_row, i32_from_f32_row},
    {"q8_0", 32, 34, false, quant::dequantize_q8_0, quant::quantize_q8_0},
    {"q4_0", 32, 18, false, quant::dequantize_q4_0, quant::quantize_q4_0},
    {"q4_1", 32, 20, false, quant::dequantize_q4_1, quant::quantize_q4_1},
    {"q5_0", 32, 22, false, quant::dequantize_q5_0, quant::quantize_q5_0},
    {"q5_1", 32, 24, false, quant::dequantize_q5_1, quant::quantize_q5_1},
    {"q4_k", 256, 144, false, quant::dequantize_q4_k, quant::quantize_q4_k},
    {"q5_k", 256, 176, false, quant::dequantize_q5_k, quant::quantize_q5_k},
    {"q6_k", 256, 210, false, quant::dequantize_q6_k, quant::quantize_q6_k},
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
  // Quantized formats: the row name in lower or upper case ("q4_k", "Q4_K").
  for (size_t i = size_t(DType::Q8_0); i < kTraits.size(); ++i) {
    const std::string_view row = kTraits[i].name;
    bool lower = name == row, upper = name.size() == row.size();
    for (size_t c = 0; upper && c < row.size(); ++c)
      upper = name[c] == (row[c] >= 'a' && row[c] <= 'z' ? char(row[c] - 'a' + 'A') : row[c]);
    if (lower || upper) return DType(i);
  }
  fail("[dtype] unknown type '", std::string(name),
       "' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k)");
}

size_t bytes_for(DType t, int64_t n) {
  const auto& tr = traits(t);
  GP_CHECK(n % tr.block_size == 0, "[dtype] ", n, " elements is not a multiple of the ", tr.name,
           " block size ", tr.block_size);
  return size_t(n / tr.block_size) * tr.block_bytes;
}

}  // namespace genperf

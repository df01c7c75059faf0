// Block-quantized formats: sizes, hand-built blocks in the published ggml layout, reconstruction
// error of the reference quantizers, idempotence, tensors and GGUF round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/tensor.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "core/codec.h"

using namespace genperf;

namespace {

const DType kQuant[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                        DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
const DType kSimple[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1};

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(bytes_for(t, int64_t(x.size())));
  traits(t).from_f32(x.data(), q.data(), int64_t(x.size()));
  return q;
}
std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  traits(t).to_f32(q.data(), y.data(), n);
  return y;
}

uint16_t h(float f) { return f32_to_f16(f); }
float hf(uint16_t v) { return f16_to_f32(v); }

// The decode grid of element e of a block: value = a * q + b for integer q in [qlo, qhi].
struct Grid {
  float a, b;
  int qlo, qhi;
  bool simple;  // quantizer rounds with the unrounded f32 scale (then stores it as f16)
};

Grid grid_of(DType t, const uint8_t* blk, int e) {
  using namespace codec;
  switch (t) {
    case DType::Q8_0: {
      const float d = hf(reinterpret_cast<const BlockQ8_0*>(blk)->d);
      return {d, 0, -128, 127, true};
    }
    case DType::Q4_0: {
      const float d = hf(reinterpret_cast<const BlockQ4_0*>(blk)->d);
      return {d, -8 * d, 0, 15, true};
    }
    case DType::Q4_1: {
      auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
      return {hf(b->d), hf(b->m), 0, 15, true};
    }
    case DType::Q5_0: {
      const float d = hf(reinterpret_cast<const BlockQ5_0*>(blk)->d);
      return {d, -16 * d, 0, 31, true};
    }
    case DType::Q5_1: {
      auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
      return {hf(b->d), hf(b->m), 0, 31, true};
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      // Both start with d, dmin, scales[12].
      auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
      uint8_t sc, mn;
      unpack_scale_min_k4(b->scales, e / 32, &sc, &mn);
      return {hf(b->d) * sc, -(hf(b->dmin) * mn), 0, t == DType::Q4_K ? 15 : 31, false};
    }
    case DType::Q2_K: {
      auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
      const uint8_t sc = b->scales[e / 16];
      return {hf(b->d) * (sc & 15), -(hf(b->dmin) * (sc >> 4)), 0, 3, false};
    }
    case DType::Q3_K: {
      auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
      const float a = hf(b->d) * unpack_scale_q3_k(b->scales, e / 16);
      return {a, -4 * a, 0, 7, false};
    }
    case DType::Q6_K: {
      auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
      const float a = hf(b->d) * b->scales[e / 16];
      return {a, -32 * a, 0, 63, false};
    }
    default:
      ADD_FAILURE() << "not a quantized type";
      return {0, 0, 0, 0, false};
  }
}

// Distance from x to the nearest grid point.
float nearest_dist(const Grid& g, float x) {
  if (g.a == 0) return std::fabs(x - g.b);
  const long q0 = std::lround((x - g.b) / g.a);
  float best = INFINITY;
  for (long q = q0 - 1; q <= q0 + 1; ++q) {
    const long qc = std::clamp<long>(q, g.qlo, g.qhi);
    best = std::min(best, std::fabs(x - (g.a * float(qc) + g.b)));
  }
  return best;
}

// Checks every element of a quantized vector against its block's grid:
//  - the decoded value is the nearest grid point to x (up to the f16 rounding of the scales
//    for the simple formats, which round with the unrounded f32 scale);
//  - when x lies inside the grid's range, |x - x^| <= step/2 (+ that slack).
// For the simple formats also the overall bound: |x - x^| <= step/2, or <= step for Q4_0/Q5_0
// (their largest-magnitude element maps to the grid's end, so the opposite end is one step short).
void check_reconstruction(DType t, const std::vector<float>& x, const std::string& what) {
  const auto& tr = traits(t);
  const auto q = quantize(t, x);
  const auto y = dequantize(t, q, int64_t(x.size()));
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const uint8_t* blk = q.data() + (i / size_t(tr.block_size)) * tr.block_bytes;
    const Grid g = grid_of(t, blk, int(i % size_t(tr.block_size)));
    const float step = std::fabs(g.a);
    const float err = std::fabs(x[i] - y[i]);
    // f16 scale rounding: |d - d16| <= |d16| * 2^-11 (normal) or 2^-25 (subnormal); |q| (at most
    // 128 for Q8_0, 32 otherwise) multiplies it, and the quantizer's choice can be off by that
    // much on either side.
    const float qmag = t == DType::Q8_0 ? 128.f : 32.f;
    const float slack = g.simple ? 2 * (qmag * (step * 0x1p-11f + 0x1p-25f) + std::fabs(g.b) * 0x1p-10f + 0x1p-25f)
                                 : 1e-5f * (std::fabs(x[i]) + step * float(g.qhi) + std::fabs(g.b)) + 1e-30f;
    const float lo = std::min(g.a * g.qlo, g.a * g.qhi) + g.b, hi = std::max(g.a * g.qlo, g.a * g.qhi) + g.b;
    bool ok = err <= nearest_dist(g, x[i]) + slack;
    if (x[i] >= lo && x[i] <= hi) ok = ok && err <= step / 2 + slack;
    if (g.simple) {
      const bool one_sided = t == DType::Q4_0 || t == DType::Q5_0;
      ok = ok && err <= (one_sided ? step : step / 2) + slack;
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << tr.name << " " << what << ": element " << i << " x=" << x[i] << " decoded " << y[i]
                    << " err " << err << " step " << step << " offset " << g.b << " slack " << slack;
    }
  }
}

double rel_rms_error(DType t, const std::vector<float>& x) {
  const auto y = dequantize(t, quantize(t, x), int64_t(x.size()));
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += double(x[i] - y[i]) * (x[i] - y[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

}  // namespace

TEST(QuantFormats, TraitsRows) {
  struct Row {
    DType t;
    const char* name;
    const char* upper;
    int64_t bs;
    size_t bb;
  };
  const Row rows[] = {{DType::Q8_0, "q8_0", "Q8_0", 32, 34},   {DType::Q4_0, "q4_0", "Q4_0", 32, 18},
                      {DType::Q4_1, "q4_1", "Q4_1", 32, 20},   {DType::Q5_0, "q5_0", "Q5_0", 32, 22},
                      {DType::Q5_1, "q5_1", "Q5_1", 32, 24},   {DType::Q4_K, "q4_k", "Q4_K", 256, 144},
                      {DType::Q5_K, "q5_k", "Q5_K", 256, 176}, {DType::Q6_K, "q6_k", "Q6_K", 256, 210},
                      {DType::Q2_K, "q2_k", "Q2_K", 256, 84},  {DType::Q3_K, "q3_k", "Q3_K", 256, 110}};
  for (const auto& r : rows) {
    const auto& tr = traits(r.t);
    EXPECT_STREQ(tr.name, r.name);
    EXPECT_EQ(tr.block_size, r.bs);
    EXPECT_EQ(tr.block_bytes, r.bb);
    EXPECT_FALSE(tr.is_float);
    EXPECT_NE(tr.to_f32, nullptr);
    EXPECT_NE(tr.from_f32, nullptr);
    EXPECT_EQ(parse_dtype(r.name), r.t);
    EXPECT_EQ(parse_dtype(r.upper), r.t);
    EXPECT_EQ(bytes_for(r.t, 3 * r.bs), 3 * r.bb);
    EXPECT_THROW(bytes_for(r.t, r.bs + 1), Error);
    // The GGUF table agrees on the block geometry.
    const GgmlType* g = ggml_type(ggml_type_id(r.t));
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(int64_t(g->id), int64_t(tr.ggml_type));
    EXPECT_STREQ(g->name, r.upper);
    EXPECT_EQ(g->block_size, r.bs);
    EXPECT_EQ(g->block_bytes, r.bb);
  }
  // The ids of ggml.h's enum ggml_type.
  EXPECT_EQ(traits(DType::Q2_K).ggml_type, 10);
  EXPECT_EQ(traits(DType::Q3_K).ggml_type, 11);
  EXPECT_EQ(traits(DType::Q4_K).ggml_type, 12);
  EXPECT_EQ(traits(DType::BF16).ggml_type, 30);
  // Every row has both conversions and a row quantizer; the non-ggml rows say so.
  for (size_t i = 0; i < size_t(DType::COUNT); ++i) {
    const auto& tr = traits(DType(i));
    EXPECT_NE(tr.quantize, nullptr) << tr.name;
    EXPECT_EQ(parse_dtype(tr.name), DType(i)) << tr.name;
    if (tr.ggml_type < 0) {
      EXPECT_THROW(ggml_type_id(DType(i)), Error) << tr.name;
    }
  }
  EXPECT_EQ(parse_dtype("f16"), DType::F16);
  EXPECT_THROW(parse_dtype("q4_2"), Error);
  EXPECT_THROW(parse_dtype("Q4_k"), Error);  // mixed case is not a name
  EXPECT_THROW(parse_dtype("q4"), Error);
}

// ---- hand-built blocks in the published layout ----

TEST(QuantFormats, HandBlockQ8_0) {
  codec::BlockQ8_0 b;
  b.d = h(0.25f);
  for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(i * 8 - 127);  // -127 .. 121
  float y[32];
  codec::dequantize_q8_0(&b, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (i * 8 - 127) * 0.25f) << i;
}

TEST(QuantFormats, HandBlockQ4_0AndQ4_1) {
  uint8_t raw0[18], raw1[20];
  const uint16_t d = h(0.5f), m = h(-3.0f);
  std::memcpy(raw0, &d, 2);
  std::memcpy(raw1, &d, 2);
  std::memcpy(raw1 + 2, &m, 2);
  // Byte j: low nibble j (element j), high nibble 15 - j (element j + 16).
  for (int j = 0; j < 16; ++j) raw0[2 + j] = raw1[4 + j] = uint8_t(j | ((15 - j) << 4));
  float y0[32], y1[32];
  codec::dequantize_q4_0(raw0, y0, 32);
  codec::dequantize_q4_1(raw1, y1, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y0[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y0[j + 16], (15 - j - 8) * 0.5f) << j;
    EXPECT_EQ(y1[j], j * 0.5f - 3.0f) << j;
    EXPECT_EQ(y1[j + 16], (15 - j) * 0.5f - 3.0f) << j;
  }
}

TEST(QuantFormats, HandBlockQ5_0AndQ5_1) {
  // Element i has q = (i * 7 + 3) % 32: low 4 bits in the nibbles, bit 4 in bit i of qh (LE u32).
  int qv[32];
  uint32_t qh = 0;
  uint8_t qs[16];
  for (int i = 0; i < 32; ++i) {
    qv[i] = (i * 7 + 3) % 32;
    if (qv[i] & 16) qh |= 1u << i;
  }
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((qv[j] & 15) | ((qv[j + 16] & 15) << 4));
  uint8_t raw0[22], raw1[24];
  const uint16_t d = h(0.125f), m = h(1.5f);
  std::memcpy(raw0, &d, 2);
  raw0[2] = uint8_t(qh), raw0[3] = uint8_t(qh >> 8), raw0[4] = uint8_t(qh >> 16), raw0[5] = uint8_t(qh >> 24);
  std::memcpy(raw0 + 6, qs, 16);
  std::memcpy(raw1, &d, 2);
  std::memcpy(raw1 + 2, &m, 2);
  std::memcpy(raw1 + 4, raw0 + 2, 4 + 16);
  float y0[32], y1[32];
  codec::dequantize_q5_0(raw0, y0, 32);
  codec::dequantize_q5_1(raw1, y1, 32);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(y0[i], (qv[i] - 16) * 0.125f) << i;
    EXPECT_EQ(y1[i], qv[i] * 0.125f + 1.5f) << i;
  }
}

namespace {
// Published 12-byte packing of eight 6-bit scales and mins: bytes 0-3 hold scales 0-3 (bits 0-5)
// and the top 2 bits of scales 4-7 (bits 6-7); bytes 4-7 the same for mins; bytes 8-11 hold
// the low 4 bits of scale 4+k (low nibble) and min 4+k (high nibble).
void pack_k4(const int sc[8], const int mn[8], uint8_t out[12]) {
  for (int k = 0; k < 4; ++k) {
    out[k] = uint8_t(sc[k] | ((sc[k + 4] >> 4) << 6));
    out[k + 4] = uint8_t(mn[k] | ((mn[k + 4] >> 4) << 6));
    out[k + 8] = uint8_t((sc[k + 4] & 15) | ((mn[k + 4] & 15) << 4));
  }
}
}  // namespace

TEST(QuantFormats, HandBlockQ4_KAndQ5_K) {
  const int sc[8] = {1, 2, 3, 63, 17, 33, 49, 5};
  const int mn[8] = {0, 7, 40, 63, 20, 1, 60, 48};
  uint8_t scales[12];
  pack_k4(sc, mn, scales);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    codec::unpack_scale_min_k4(scales, j, &s, &m);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(m, mn[j]) << j;
  }
  codec::BlockQ4_K b4;
  codec::BlockQ5_K b5;
  b4.d = b5.d = h(0.5f);
  b4.dmin = b5.dmin = h(0.25f);
  std::memcpy(b4.scales, scales, 12);
  std::memcpy(b5.scales, scales, 12);
  for (int i = 0; i < 128; ++i) b4.qs[i] = b5.qs[i] = uint8_t(i * 37 + 11);
  for (int i = 0; i < 32; ++i) b5.qh[i] = uint8_t(i * 73 + 5);
  float y4[256], y5[256];
  codec::dequantize_q4_k(&b4, y4, 256);
  codec::dequantize_q5_k(&b5, y5, 256);
  for (int e = 0; e < 256; ++e) {
    // Element e: chunk p = e / 64 uses qs[32p .. 32p+31]; the first 32 take the low nibbles,
    // the next 32 the high nibbles; Q5_K's fifth bit is bit 2p (first 32) or 2p+1 of qh[l].
    const int p = e / 64, r = e % 64, l = r % 32, hi = r / 32;
    const uint8_t byte = b4.qs[32 * p + l];
    const int q4 = hi ? byte >> 4 : byte & 15;
    const int q5 = q4 | (((b5.qh[l] >> (2 * p + hi)) & 1) << 4);
    const int j = e / 32;
    EXPECT_EQ(y4[e], 0.5f * sc[j] * q4 - 0.25f * mn[j]) << e;
    EXPECT_EQ(y5[e], 0.5f * sc[j] * q5 - 0.25f * mn[j]) << e;
  }
}

TEST(QuantFormats, HandBlockQ6_K) {
  uint8_t raw[210];
  for (int i = 0; i < 128; ++i) raw[i] = uint8_t(i * 7 + 1);         // ql
  for (int i = 0; i < 64; ++i) raw[128 + i] = uint8_t(i * 13 + 2);   // qh
  for (int j = 0; j < 16; ++j) raw[192 + j] = uint8_t(int8_t(j * 9 - 70));  // scales
  const uint16_t d = h(0.25f);
  std::memcpy(raw + 208, &d, 2);
  float y[256];
  codec::dequantize_q6_k(raw, y, 256);
  for (int e = 0; e < 256; ++e) {
    // Half hf = e / 128 uses ql[64hf ..], qh[32hf ..]; quarter g = (e % 128) / 32, l = e % 32:
    // g 0: ql[l] low, 1: ql[l+32] low, 2: ql[l] high, 3: ql[l+32] high; high bits
    // (qh[l] >> 2g) & 3; scale of sub-block e / 16.
    const int hf_ = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t qlb = raw[64 * hf_ + l + (g & 1) * 32];
    const int low = g < 2 ? qlb & 15 : qlb >> 4;
    const int high = (raw[128 + 32 * hf_ + l] >> (2 * g)) & 3;
    const int q = (low | (high << 4)) - 32;
    const int8_t s = int8_t(raw[192 + e / 16]);
    EXPECT_EQ(y[e], 0.25f * s * q) << e;
  }
}

TEST(QuantFormats, HandBlockQ2_K) {
  // 84 bytes: scales[16] (scale in the low nibble, min in the high), qs[64], d, dmin (f16).
  uint8_t raw[84];
  int sc[16], mn[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = (j * 5 + 3) % 16;
    mn[j] = (j * 7 + 1) % 16;
    raw[j] = uint8_t(sc[j] | (mn[j] << 4));
  }
  for (int i = 0; i < 64; ++i) raw[16 + i] = uint8_t(i * 37 + 11);
  const uint16_t d = h(0.5f), dmin = h(0.25f);
  std::memcpy(raw + 80, &d, 2);
  std::memcpy(raw + 82, &dmin, 2);
  float y[256];
  codec::dequantize_q2_k(raw, y, 256);
  for (int e = 0; e < 256; ++e) {
    // Half hf = e / 128 uses qs[32hf ..]; element 32k + l of the half is bits 2k..2k+1 of qs[l].
    const int hf_ = e / 128, k = (e % 128) / 32, l = e % 32;
    const int q = (raw[16 + 32 * hf_ + l] >> (2 * k)) & 3;
    EXPECT_EQ(y[e], 0.5f * sc[e / 16] * q - 0.25f * mn[e / 16]) << e;
  }
  // A few worked by hand: e 0: qs[0] = 11 -> q 3, scale 3, min 1; e 32: (11 >> 2) & 3 = 2, sub-block
  // 2 (scale 13, min 15); e 128: qs[32] = 171 -> 3, sub-block 8 (11, 9); e 255: qs[63] = 38 >> 6 = 0,
  // sub-block 15 (14, 10).
  EXPECT_EQ(y[0], 4.25f);
  EXPECT_EQ(y[32], 9.25f);
  EXPECT_EQ(y[128], 14.25f);
  EXPECT_EQ(y[255], -2.5f);
}

TEST(QuantFormats, HandBlockQ3_K) {
  // 110 bytes: hmask[32], qs[64], scales[12], d (f16). Sixteen signed 6-bit scales, stored +32:
  // the low 4 bits of scale j in byte j % 8 (low nibble for j < 8, high for j >= 8), the top 2
  // bits in byte 8 + j % 4 at bit 2 (j / 4). These bytes were packed by hand from that rule.
  const int s[16] = {-32, -1, 0, 1, 31, 5, -7, 12, 20, -20, 3, -3, 8, -8, 15, -16};
  const uint8_t packed[12] = {64, 207, 48, 209, 143, 133, 249, 12, 188, 73, 166, 90};
  uint8_t raw[110];
  for (int i = 0; i < 32; ++i) raw[i] = uint8_t(i * 29 + 7);       // hmask
  for (int i = 0; i < 64; ++i) raw[32 + i] = uint8_t(i * 53 + 3);  // qs
  std::memcpy(raw + 96, packed, 12);
  const uint16_t d = h(0.25f);
  std::memcpy(raw + 108, &d, 2);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(codec::unpack_scale_q3_k(packed, j), s[j]) << j;
  float y[256];
  codec::dequantize_q3_k(raw, y, 256);
  for (int e = 0; e < 256; ++e) {
    // Low 2 bits as Q2_K; the third bit of element e is bit e / 32 of hmask[e % 32]; q - 4.
    const int hf_ = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (raw[32 + 32 * hf_ + l] >> (2 * k)) & 3;
    const int high = (raw[e % 32] >> (e / 32)) & 1;
    EXPECT_EQ(y[e], 0.25f * s[e / 16] * (low + 4 * high - 4)) << e;
  }
  // By hand: e 0: qs[0] = 3 -> 3, hmask[0] = 7 bit 0 set -> q 3, scale -32; e 1: qs[1] = 56 -> 0,
  // hmask[1] = 36 bit 0 clear -> q -4; e 201: qs[41] = 128 -> (128 >> 4) & 3 = 0, hmask[9] = 12
  // bit 6 clear -> -4, scale 8.
  EXPECT_EQ(y[0], -24.f);
  EXPECT_EQ(y[1], 32.f);
  EXPECT_EQ(y[201], -8.f);
}

// ---- reference quantizers ----

TEST(QuantFormats, ReconstructionWithinStep) {
  const unsigned seed = 20240611;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto make = [&](size_t n, auto&& f) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = f(i);
    return x;
  };
  const size_t n = 256 * 8;
  struct Case {
    std::string name;
    std::vector<float> x;
  };
  std::vector<Case> cases = {
      {"gaussian", make(n, [&](size_t) { return normal(rng); })},
      {"uniform", make(n, [&](size_t) { return uni(rng); })},
      {"positive", make(n, [&](size_t) { return 2.f + uni(rng); })},
      {"negative", make(n, [&](size_t) { return -5.f + 0.1f * uni(rng); })},
      {"zeros", std::vector<float>(n, 0.f)},
      {"constant", std::vector<float>(n, 0.7f)},
      {"constant-negative", std::vector<float>(n, -3.25f)},
      {"huge", make(n, [&](size_t) { return 1e4f * uni(rng); })},
      {"small", make(n, [&](size_t) { return 1e-3f * normal(rng); })},
      {"tiny", make(n, [&](size_t) { return 1e-6f * normal(rng); })},
      {"outlier", make(n, [&](size_t i) { return i % 97 == 5 ? 40.f : 0.01f * normal(rng); })},
      {"mixed-blocks", make(n, [&](size_t i) {
         const size_t b = i / 32;
         return b % 4 == 0 ? 0.f : b % 4 == 1 ? 1.f : b % 4 == 2 ? 100.f * normal(rng) : 1e-2f * uni(rng);
       })},
  };
  for (const auto& c : cases)
    for (DType t : kQuant) check_reconstruction(t, c.x, c.name);
  // A single block of each format (Gaussian with one outlier).
  for (DType t : kQuant) {
    std::vector<float> one = make(size_t(traits(t).block_size), [&](size_t) { return normal(rng); });
    one[one.size() / 3] = 25.f;
    check_reconstruction(t, one, "one block");
  }
  // All-zero and constant input decode exactly.
  for (DType t : kQuant) {
    const auto z = dequantize(t, quantize(t, cases[4].x), int64_t(n));
    for (float v : z) ASSERT_EQ(v, 0.f) << traits(t).name;
  }
}

TEST(QuantFormats, ErrorLevelsOnGaussianWeights) {
  const unsigned seed = 777;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> x(256 * 64);
  for (auto& v : x) v = normal(rng);
  struct Limit {
    DType t;
    double max_rel_rms;
  };
  // Relative RMS error on Gaussian weights (measured: see the printout); the K-quants beat the
  // simple formats of the same width.
  const Limit limits[] = {{DType::Q8_0, 0.0065}, {DType::Q4_0, 0.10}, {DType::Q4_1, 0.09}, {DType::Q5_0, 0.05},
                          {DType::Q5_1, 0.045}, {DType::Q2_K, 0.40}, {DType::Q3_K, 0.20}, {DType::Q4_K, 0.08},
                          {DType::Q5_K, 0.04},  {DType::Q6_K, 0.02}};
  for (const auto& l : limits) {
    const double e = rel_rms_error(l.t, x);
    std::printf("%s relative rms error %.5f\n", traits(l.t).name, e);
    EXPECT_LT(e, l.max_rel_rms) << traits(l.t).name;
  }
}

TEST(QuantFormats, RequantizingIsStable) {
  const unsigned seed = 4242;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(32 * 200);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 32) % 10 == 3 ? 0.5f : (i / 32) % 10 == 4 ? 0.f : normal(rng);
  for (DType t : kSimple) {
    const auto q1 = quantize(t, x);
    const auto y1 = dequantize(t, q1, int64_t(x.size()));
    const auto q2 = quantize(t, y1);
    const auto y2 = dequantize(t, q2, int64_t(x.size()));
    EXPECT_EQ(y1, y2) << traits(t).name;
    EXPECT_EQ(q1, q2) << traits(t).name;
  }
  // The K-quants: a second pass decodes to the same values within a small fraction of the step.
  std::vector<float> xk(256 * 8);
  for (auto& v : xk) v = normal(rng);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const auto y1 = dequantize(t, quantize(t, xk), int64_t(xk.size()));
    const auto y2 = dequantize(t, quantize(t, y1), int64_t(xk.size()));
    double e = 0, s = 0;
    for (size_t i = 0; i < xk.size(); ++i) {
      e += double(y1[i] - y2[i]) * (y1[i] - y2[i]);
      s += double(y1[i]) * y1[i];
    }
    std::printf("%s requantize relative rms change %.5f\n", traits(t).name, std::sqrt(e / s));
    EXPECT_LT(std::sqrt(e / s), 0.05) << traits(t).name;
  }
}

// The code grids GPTQ quantizes on (core/codec.h, CodeGrid): writing back the codes of an encoded
// block reproduces its bytes, and every code decodes to offset + step * code.
TEST(QuantFormats, CodeGridsMatchTheDecoders) {
  const unsigned seed = 777;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(256 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i >= 256 * 5 && i < 256 * 5 + 16 ? 0.f : normal(rng) * (1 + float(i % 7));
  for (DType t : kQuant) {
    const auto& tr = traits(t);
    const codec::CodeGrid* g = codec::code_grid(t);
    ASSERT_NE(g, nullptr) << tr.name;
    const auto q = quantize(t, x);
    const auto y = dequantize(t, q, int64_t(x.size()));
    const int B = int(tr.block_size);
    std::vector<float> step(static_cast<size_t>(B)), offset(static_cast<size_t>(B));
    std::vector<uint8_t> codes(static_cast<size_t>(B)), blk(tr.block_bytes);
    std::vector<float> yb(static_cast<size_t>(B));
    for (size_t b = 0; b < x.size() / size_t(B); ++b) {
      const uint8_t* src = q.data() + b * tr.block_bytes;
      g->grid(src, step.data(), offset.data());
      bool any_zero_step = false;
      for (int e = 0; e < B; ++e) {
        const float ye = y[b * size_t(B) + size_t(e)];
        const Grid ref = grid_of(t, src, e);
        ASSERT_EQ(std::fabs(step[size_t(e)]), std::fabs(ref.a)) << tr.name << " block " << b << " element " << e;
        any_zero_step |= step[size_t(e)] == 0;
        const long c = step[size_t(e)] == 0 ? 0 : std::lround((ye - offset[size_t(e)]) / step[size_t(e)]);
        ASSERT_GE(c, 0) << tr.name << " element " << e;
        ASSERT_LT(c, g->levels) << tr.name << " element " << e;
        codes[size_t(e)] = uint8_t(c);
      }
      std::memcpy(blk.data(), src, tr.block_bytes);
      g->set_codes(blk.data(), codes.data());
      tr.to_f32(blk.data(), yb.data(), B);
      for (int e = 0; e < B; ++e)
        ASSERT_EQ(yb[size_t(e)], y[b * size_t(B) + size_t(e)]) << tr.name << " block " << b << " element " << e;
      if (!any_zero_step) {
        EXPECT_EQ(0, std::memcmp(blk.data(), src, tr.block_bytes)) << tr.name << " block " << b;
      }
      // Random codes decode to offset + step * code (within the decoder's rounding).
      std::uniform_int_distribution<int> code(0, g->levels - 1);
      for (auto& c : codes) c = uint8_t(code(rng));
      g->set_codes(blk.data(), codes.data());
      tr.to_f32(blk.data(), yb.data(), B);
      for (int e = 0; e < B; ++e) {
        const float want = offset[size_t(e)] + step[size_t(e)] * float(codes[size_t(e)]);
        const float tol = 1e-6f * (std::fabs(offset[size_t(e)]) + std::fabs(step[size_t(e)] * float(codes[size_t(e)])));
        ASSERT_NEAR(yb[size_t(e)], want, tol) << tr.name << " block " << b << " element " << e << " code "
                                               << int(codes[size_t(e)]);
      }
    }
  }
  EXPECT_EQ(codec::code_grid(DType::F8_E4M3_B32), nullptr);
  EXPECT_EQ(codec::code_grid(DType::BF16), nullptr);
}

// ---- tensors ----

TEST(QuantFormats, TensorsAndSlices) {
  std::vector<DType> types(std::begin(kQuant), std::end(kQuant));
  types.insert(types.end(), {DType::F8_E4M3_B32, DType::F8_E5M2_B32});
  for (DType t : types) {
    const auto& tr = traits(t);
    const int64_t bs = tr.block_size;
    Tensor z = Tensor::zeros({3, 4 * bs}, t);
    EXPECT_EQ(z.nbytes(), size_t(3 * 4) * tr.block_bytes) << tr.name;
    EXPECT_TRUE(z.is_contiguous());
    // Rows and block-aligned column slices address the right bytes.
    const Tensor row = z.slice(0, 1, 2);
    EXPECT_EQ(static_cast<char*>(row.raw()) - static_cast<char*>(z.raw()), ptrdiff_t(4 * tr.block_bytes));
    const Tensor cols = z.slice(1, 2 * bs, bs);
    EXPECT_EQ(static_cast<char*>(cols.raw()) - static_cast<char*>(z.raw()), ptrdiff_t(2 * tr.block_bytes));
    EXPECT_EQ(cols.shape(), (std::vector<int64_t>{3, bs}));
    EXPECT_THROW(z.slice(1, bs / 2, bs / 2), Error) << tr.name;
    EXPECT_THROW(Tensor::zeros({2, bs + 1}, t), Error) << tr.name;
    // A non-contiguous block slice clones into the selected blocks.
    std::vector<float> x(size_t(3 * 4 * bs));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6);
    tr.from_f32(x.data(), z.raw(), int64_t(x.size()));
    const Tensor c = z.slice(1, 2 * bs, bs).clone();
    ASSERT_EQ(c.nbytes(), size_t(3) * tr.block_bytes);
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(std::memcmp(static_cast<char*>(c.raw()) + r * tr.block_bytes,
                            static_cast<char*>(z.raw()) + (4 * r + 2) * tr.block_bytes, tr.block_bytes),
                0)
          << tr.name << " row " << r;
  }
}

// ---- GGUF ----

TEST(QuantFormats, GgufRoundTripBitExact) {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  genperf::testing::TempDir dir("quant_gguf");
  const std::string path = dir.path() + "/q.gguf";
  GgufWriter w(32);
  std::vector<std::pair<std::string, Tensor>> tensors;
  // Every ggml row of the traits table: the block formats first, then the plain types.
  std::vector<DType> types(std::begin(kQuant), std::end(kQuant));
  for (size_t i = 0; i < size_t(DType::COUNT); ++i)
    if (traits(DType(i)).ggml_type >= 0 && std::find(types.begin(), types.end(), DType(i)) == types.end())
      types.push_back(DType(i));
  EXPECT_EQ(types.size(), 14u);
  for (DType t : types) {
    const int64_t bs = traits(t).block_size;
    Tensor q = Tensor::zeros({3, 2 * bs}, t);
    std::vector<float> x(size_t(q.numel()));
    for (auto& v : x) v = normal(rng);
    traits(t).from_f32(x.data(), q.raw(), q.numel());
    tensors.emplace_back(std::string("w.") + traits(t).name, q);
    // A column slice (not contiguous) is written as its blocks.
    tensors.emplace_back(std::string("s.") + traits(t).name, q.slice(1, bs, bs));
  }
  for (const auto& [n, t] : tensors) w.add_tensor(n, t);
  w.write(path);
  const GgufFile g = GgufFile::open(path);
  for (const auto& [n, t] : tensors) {
    const Tensor r = g.tensor(n);
    EXPECT_EQ(r.dtype(), t.dtype()) << n;
    EXPECT_EQ(r.shape(), t.shape()) << n;
    EXPECT_TRUE(genperf::testing::same_bytes(r, t)) << n;
    EXPECT_EQ(g.find_tensor(n)->type_id, ggml_type_id(t.dtype())) << n;
    EXPECT_EQ(g.find_tensor(n)->bytes, t.clone().nbytes()) << n;
  }
  // Zero-copy: the tensor points into the mapping.
  const Tensor r = g.tensor("w.q4_k");
  const auto* base = static_cast<const uint8_t*>(g.file()->data());
  EXPECT_EQ(static_cast<const uint8_t*>(r.raw()), base + g.find_tensor("w.q4_k")->offset);

  // Change the type id of one tensor: a removed/unknown id is a parse error; a known type genperf
  // does not read (IQ2_XXS, id 16, whose blocks fit in the same bytes) opens but cannot be read.
  std::string bytes = genperf::testing::read_bytes(path);
  const std::string name = "w.q6_k";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t type_at = at + name.size() + 4 + 2 * 8;  // n_dims, two dims
  uint32_t id;
  std::memcpy(&id, bytes.data() + type_at, 4);
  ASSERT_EQ(id, 14u);
  auto with_id = [&](uint32_t v) {
    std::string b = bytes;
    std::memcpy(b.data() + type_at, &v, 4);
    return b;
  };
  for (uint32_t bad : {4u, 99u}) {
    const std::string b = with_id(bad);
    try {
      GgufFile::parse(MmapFile::from_bytes("bad.gguf", b.data(), b.size()));
      ADD_FAILURE() << "type id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown type id " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
  const std::string iq2 = with_id(16);
  const GgufFile g2 = GgufFile::parse(MmapFile::from_bytes("iq2.gguf", iq2.data(), iq2.size()));
  try {
    g2.tensor(name);
    ADD_FAILURE() << "IQ2_XXS read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[gguf] iq2.gguf: tensor w.q6_k has type IQ2_XXS (id 16) which genperf cannot read yet");
  }
  EXPECT_TRUE(genperf::testing::same_bytes(g2.tensor("w.q8_0"), tensors[0].second));
}

TEST(QuantFormats, GgufRefusesFp8) {
  GgufWriter w(32);
  for (DType t : {DType::F8_E4M3, DType::F8_E5M2, DType::F8_E4M3_B32, DType::F8_E5M2_B32}) {
    const Tensor q = Tensor::zeros({2, 64}, t);
    try {
      w.add_tensor("w", q);
      ADD_FAILURE() << dtype_name(t) << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string("[gguf] tensor 'w': type ") + dtype_name(t) +
                                           " is not a ggml type, so GGUF cannot hold it (FP8 weights go to "
                                           "safetensors)");
    }
    EXPECT_EQ(traits(t).ggml_type, -1);
    EXPECT_THROW(ggml_type_id(t), Error);
  }
}

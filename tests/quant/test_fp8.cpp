// FP8 (OCP E4M3 "FN" and E5M2): the 256 codes of each against values computed from the spec,
// f32 -> fp8 against a float64 round-to-nearest-even oracle on a dense sweep (ties, subnormals,
// saturation, NaN), and the scaled formats: blocks of 32 with an f32 scale, per-channel scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "genperf/dtype.h"
#include "genperf/error.h"
#include "genperf/tensor.h"
#include "core/codec.h"

using namespace genperf;

namespace {

// A format described by its parameters only; values come from the definition, in double.
struct Spec {
  const char* name;
  int E, M, bias;
  bool ieee;  // E5M2: exponent all ones = inf (mantissa 0) or NaN; E4M3: only S.1111.111 is NaN
  uint8_t max_code;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
  double max;
};
const Spec kE4M3{"e4m3", 4, 3, 7, false, 0x7E, f8_e4m3_to_f32, f32_to_f8_e4m3, 448.0};
const Spec kE5M2{"e5m2", 5, 2, 15, true, 0x7B, f8_e5m2_to_f32, f32_to_f8_e5m2, 57344.0};

enum class Kind { Finite, Inf, NaN };
Kind kind_of(const Spec& s, uint8_t c) {
  const int e = (c & 0x7F) >> s.M, m = c & ((1 << s.M) - 1);
  if (e == (1 << s.E) - 1) {
    if (s.ieee) return m == 0 ? Kind::Inf : Kind::NaN;
    if (m == (1 << s.M) - 1) return Kind::NaN;
  }
  return Kind::Finite;
}
// |value| of a finite code's magnitude bits.
double magnitude(const Spec& s, uint8_t c) {
  const int e = (c & 0x7F) >> s.M, m = c & ((1 << s.M) - 1);
  if (e == 0) return std::ldexp(double(m), 1 - s.bias - s.M);
  return std::ldexp(1.0 + std::ldexp(double(m), -s.M), e - s.bias);
}

// Round to nearest, ties to the even code, saturating at max; NaN -> S.1111111.
uint8_t oracle_encode(const Spec& s, double x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return uint8_t(sign | 0x7F);
  const double a = std::fabs(x);
  if (a >= s.max) return uint8_t(sign | s.max_code);
  // Magnitudes grow with the code for 0 .. max_code.
  uint8_t lo = 0;
  while (lo < s.max_code && magnitude(s, uint8_t(lo + 1)) <= a) ++lo;
  if (magnitude(s, lo) == a) return uint8_t(sign | lo);
  const uint8_t hi = uint8_t(lo + 1);
  const double dlo = a - magnitude(s, lo), dhi = magnitude(s, hi) - a;
  const uint8_t c = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return uint8_t(sign | c);
}

float next_up(float f) { return std::nextafter(f, INFINITY); }
float next_down(float f) { return std::nextafter(f, -INFINITY); }

// Half the spacing of the fp8 grid at magnitude v (v <= max).
double half_step(const Spec& s, double v) {
  const double min_normal = std::ldexp(1.0, 1 - s.bias);
  if (v < min_normal) return std::ldexp(0.5, 1 - s.bias - s.M);
  return std::ldexp(0.5, int(std::floor(std::log2(v))) - s.M);
}

}  // namespace

TEST(Fp8, AllCodesDecodeToTheirSpecValue) {
  for (const Spec* s : {&kE4M3, &kE5M2}) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = s->decode(uint8_t(c));
      const bool neg = c & 0x80;
      switch (kind_of(*s, uint8_t(c))) {
        case Kind::NaN:
          ++nans;
          EXPECT_TRUE(std::isnan(v)) << s->name << " code " << c;
          break;
        case Kind::Inf:
          ++infs;
          EXPECT_EQ(v, neg ? -INFINITY : INFINITY) << s->name << " code " << c;
          break;
        case Kind::Finite:
          EXPECT_EQ(double(v), neg ? -magnitude(*s, uint8_t(c)) : magnitude(*s, uint8_t(c))) << s->name << " code " << c;
          EXPECT_EQ(std::signbit(v), neg) << s->name << " code " << c;  // 0x80 is -0
          // Every finite code is its own nearest value.
          EXPECT_EQ(s->encode(v), uint8_t(c)) << s->name << " code " << c;
      }
    }
    // E4M3FN: NaN only at S.1111.111, no inf; E5M2: 2 infinities, 6 NaNs.
    EXPECT_EQ(nans, s->ieee ? 6 : 2) << s->name;
    EXPECT_EQ(infs, s->ieee ? 2 : 0) << s->name;
    EXPECT_EQ(s->decode(s->max_code), float(s->max)) << s->name;
  }
  EXPECT_EQ(f8_e4m3_to_f32(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(f8_e4m3_to_f32(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(f8_e4m3_to_f32(0x7E), 448.f);
  EXPECT_EQ(f8_e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(f8_e5m2_to_f32(0x04), 0x1p-14f);
  EXPECT_EQ(f8_e5m2_to_f32(0x7B), 57344.f);
  EXPECT_EQ(f8_e4m3_to_f32(0x38), 1.f);
  EXPECT_EQ(f8_e5m2_to_f32(0x3C), 1.f);
  EXPECT_EQ(kF8E4M3Max, 448.f);
  EXPECT_EQ(kF8E5M2Max, 57344.f);
}

TEST(Fp8, EncodeMatchesFloat64RoundToNearestEven) {
  const unsigned seed = 8088;
  std::printf("seed %u\n", seed);
  for (const Spec* s : {&kE4M3, &kE5M2}) {
    std::vector<float> xs;
    // Every midpoint between neighbours (a tie, exact in f32), every value, and one f32 ulp
    // either side of each; both signs.
    for (int c = 0; c < s->max_code; ++c) {
      const float v = float(magnitude(*s, uint8_t(c)));
      const float mid = float((magnitude(*s, uint8_t(c)) + magnitude(*s, uint8_t(c + 1))) / 2);
      for (float f : {v, next_up(v), next_down(v), mid, next_up(mid), next_down(mid)}) xs.push_back(f);
    }
    // Around and beyond the largest value, the half-steps of the smallest subnormal, specials.
    const float mx = float(s->max);
    for (float f : {mx, next_up(mx), next_down(mx), mx * 1.03125f, mx * 1.0625f, mx * 1.125f, mx * 2, 1e30f,
                    FLT_MAX, INFINITY, 0.f, FLT_MIN, FLT_TRUE_MIN, 1e-30f})
      xs.push_back(f);
    const float sub = float(magnitude(*s, 1));
    for (float f : {sub / 2, next_up(sub / 2), next_down(sub / 2), sub * 1.5f, next_down(sub * 1.5f), sub / 4})
      xs.push_back(f);
    // A strided sweep over every f32 exponent from 2^-30 to 2^20.
    for (uint32_t b = f32_bits(0x1p-30f); b < f32_bits(0x1p20f); b += 4099) xs.push_back(bits_f32(b));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
    for (int i = 0; i < 100000; ++i) xs.push_back(bits_f32(bits(rng)));  // any bit pattern
    const size_t n = xs.size();
    for (size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
    int failures = 0;
    for (float f : xs) {
      const uint8_t got = s->encode(f), want = oracle_encode(*s, double(f));
      if (std::isnan(f)) {
        // NaN stays NaN, sign kept, as the canonical S.1111111.
        if (got != want) ++failures;
        EXPECT_EQ(got, want) << s->name << " NaN bits " << std::hex << f32_bits(f);
        continue;
      }
      if (got != want && failures++ < 10)
        ADD_FAILURE() << s->name << " encode(" << f << " = bits 0x" << std::hex << f32_bits(f) << ") = 0x" << int(got)
                      << ", float64 RNE says 0x" << int(want);
    }
    EXPECT_EQ(failures, 0) << s->name << " over " << xs.size() << " values";
    std::printf("%s: %zu values checked\n", s->name, xs.size());
  }
  // Worked cases. Ties to even: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39) -> 0x38; 1 + 3/16
  // between 1.125 and 1.25 (0x3A) -> 0x3A. Saturation: 464 (a tie with the NaN code) and 1e6 -> 448;
  // inf -> max; NaN -> 0x7F / 0xFF.
  EXPECT_EQ(f32_to_f8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_f8_e4m3(1.1875f), 0x3A);
  EXPECT_EQ(f32_to_f8_e4m3(464.f), 0x7E);
  EXPECT_EQ(f32_to_f8_e4m3(-1e6f), 0xFE);
  EXPECT_EQ(f32_to_f8_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(f32_to_f8_e4m3(-NAN), 0xFF);
  EXPECT_EQ(f32_to_f8_e4m3(0x1p-10f), 0x00);  // half the smallest subnormal: tie -> 0
  EXPECT_EQ(f32_to_f8_e4m3(next_up(0x1p-10f)), 0x01);
  EXPECT_EQ(f32_to_f8_e4m3(-0.f), 0x80);
  EXPECT_EQ(f32_to_f8_e5m2(61440.f), 0x7B);  // the tie between max and 2^16 saturates
  EXPECT_EQ(f32_to_f8_e5m2(-INFINITY), 0xFB);
  EXPECT_EQ(f32_to_f8_e5m2(NAN), 0x7F);
  EXPECT_EQ(f32_to_f8_e5m2(0x1p-17f), 0x00);
  EXPECT_EQ(f32_to_f8_e5m2(0x1.8p-17f), 0x01);
}

TEST(Fp8, TraitsRows) {
  struct Row {
    DType t;
    const char* name;
    int64_t bs;
    size_t bb;
  };
  const Row rows[] = {{DType::F8_E4M3, "f8_e4m3", 1, 1},
                      {DType::F8_E5M2, "f8_e5m2", 1, 1},
                      {DType::F8_E4M3_B32, "f8_e4m3_b32", 32, 36},
                      {DType::F8_E5M2_B32, "f8_e5m2_b32", 32, 36}};
  for (const auto& r : rows) {
    const auto& tr = traits(r.t);
    EXPECT_STREQ(tr.name, r.name);
    EXPECT_EQ(tr.block_size, r.bs);
    EXPECT_EQ(tr.block_bytes, r.bb);
    EXPECT_EQ(tr.ggml_type, -1) << r.name;  // not a ggml type
    EXPECT_FALSE(tr.is_float);
    EXPECT_EQ(parse_dtype(r.name), r.t);
  }
  EXPECT_EQ(parse_dtype("F8_E4M3"), DType::F8_E4M3);
  EXPECT_EQ(parse_dtype("F8_E5M2_B32"), DType::F8_E5M2_B32);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::F8_E4M3);
  EXPECT_EQ(parse_dtype("float8_e5m2"), DType::F8_E5M2);
  EXPECT_THROW(parse_dtype("f8_e4m3fnuz"), Error);
  // The element rows are the scalar conversions.
  const float x[4] = {1.0625f, -500.f, 0x1p-9f, 3.f};
  uint8_t q[4];
  float y[4];
  traits(DType::F8_E4M3).from_f32(x, q, 4);
  traits(DType::F8_E4M3).to_f32(q, y, 4);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -448.f);
  EXPECT_EQ(y[2], 0x1p-9f);
  EXPECT_EQ(y[3], 3.f);
  EXPECT_EQ(bytes_for(DType::F8_E5M2, 7), 7u);
  EXPECT_EQ(Tensor::zeros({3, 5}, DType::F8_E4M3).nbytes(), 15u);
}

namespace {

// Checks decoded x^ = d * fp8(code) of each element: the code is the RNE of x / d, and
// |x - x^| <= d * (half the fp8 spacing at |x / d|) (plus f32 rounding of x / d and d * v).
void check_scaled(const Spec& s, const float* x, const float* y, const uint8_t* codes, float d, int64_t n,
                  const std::string& what, int* failures) {
  for (int64_t i = 0; i < n && *failures < 5; ++i) {
    const double v = d == 0 ? 0.0 : double(x[i]) / double(d);
    const double bound = d == 0 ? 0.0 : double(d) * half_step(s, std::min(std::fabs(v), s.max)) * (1 + 1e-6);
    const double err = std::fabs(double(x[i]) - double(y[i]));
    const bool ok = err <= bound + 1e-6 * std::fabs(double(x[i])) + 1e-37 && y[i] == d * s.decode(codes[i]) &&
                    (d == 0 ? codes[i] == 0 : codes[i] == s.encode(x[i] / d));
    if (!ok) {
      ++*failures;
      ADD_FAILURE() << s.name << " " << what << ": element " << i << " x=" << x[i] << " decoded " << y[i] << " d " << d
                    << " err " << err << " bound " << bound;
    }
  }
}

std::vector<float> gaussian_with_outliers(size_t n, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> normal(0.f, sigma);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> x(n);
  for (auto& v : x) v = pick(rng) == 0 ? 30 * normal(rng) : normal(rng);  // 1 in 64 is an outlier
  return x;
}

}  // namespace

TEST(Fp8, BlockScaledReconstruction) {
  const unsigned seed = 31337;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (const auto& [t, s] : {std::pair{DType::F8_E4M3_B32, &kE4M3}, std::pair{DType::F8_E5M2_B32, &kE5M2}}) {
    const auto& tr = traits(t);
    for (size_t n : {size_t(32), size_t(32 * 257)}) {
      for (float sigma : {1.f, 0.02f, 1e-5f, 3e4f}) {
        std::vector<float> x = gaussian_with_outliers(n, rng, sigma);
        if (n > 32) {
          for (size_t i = 64; i < 96; ++i) x[i] = 0;  // an all-zero block
        }
        std::vector<codec::BlockF8> q(n / 32);
        tr.from_f32(x.data(), q.data(), int64_t(n));
        std::vector<float> y(n);
        tr.to_f32(q.data(), y.data(), int64_t(n));
        int failures = 0;
        double e = 0, ss = 0;
        for (size_t b = 0; b < n / 32; ++b) {
          const float* xb = x.data() + 32 * b;
          float amax = 0;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
          EXPECT_EQ(q[b].d, amax / float(s->max)) << tr.name << " block " << b;  // d = amax / max, in f32
          check_scaled(*s, xb, y.data() + 32 * b, q[b].qs, q[b].d, 32, cat(n, " sigma ", sigma), &failures);
        }
        for (size_t i = 0; i < n; ++i) {
          e += double(x[i] - y[i]) * (x[i] - y[i]);
          ss += double(x[i]) * x[i];
        }
        if (n > 32 && sigma == 1.f) std::printf("%s relative rms error %.5f\n", tr.name, std::sqrt(e / ss));
        if (n > 32) {
          for (size_t i = 64; i < 96; ++i) ASSERT_EQ(y[i], 0.f);
        }
      }
    }
  }
}

TEST(Fp8, PerChannelScales) {
  const unsigned seed = 4711;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (const auto& [t, s] : {std::pair{DType::F8_E4M3, &kE4M3}, std::pair{DType::F8_E5M2, &kE5M2}}) {
    for (const int64_t row_len : {int64_t(1), int64_t(33), int64_t(4096)}) {
      const int64_t nrows = 7;
      std::vector<float> x(size_t(nrows * row_len));
      for (int64_t r = 0; r < nrows; ++r) {
        // Rows of very different magnitudes; row 3 is all zero.
        const float sigma = r == 3 ? 0.f : std::pow(10.f, float(r) - 4);
        auto row = gaussian_with_outliers(size_t(row_len), rng, sigma == 0 ? 1 : sigma);
        for (int64_t i = 0; i < row_len; ++i) x[size_t(r * row_len + i)] = sigma == 0 ? 0 : row[size_t(i)];
      }
      std::vector<uint8_t> codes(x.size());
      std::vector<float> scales(static_cast<size_t>(nrows)), y(x.size());
      codec::quantize_f8_per_channel(t, x.data(), nrows, row_len, codes.data(), scales.data());
      codec::dequantize_f8_per_channel(t, codes.data(), scales.data(), nrows, row_len, y.data());
      int failures = 0;
      for (int64_t r = 0; r < nrows; ++r) {
        float amax = 0;
        for (int64_t i = 0; i < row_len; ++i) amax = std::max(amax, std::fabs(x[size_t(r * row_len + i)]));
        EXPECT_EQ(scales[size_t(r)], amax / float(s->max)) << s->name << " row " << r;
        check_scaled(*s, x.data() + r * row_len, y.data() + r * row_len, codes.data() + r * row_len,
                     scales[size_t(r)], row_len, cat("per-channel row ", r, " of ", row_len), &failures);
      }
      EXPECT_EQ(scales[3], 0.f);
    }
  }
  float x[4] = {1, 2, 3, 4}, sc[1];
  uint8_t c[4];
  EXPECT_THROW(codec::quantize_f8_per_channel(DType::F8_E4M3_B32, x, 1, 4, c, sc), Error);
  EXPECT_THROW(codec::quantize_f8_per_channel(DType::F16, x, 1, 4, c, sc), Error);
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "genperf/dtype.h"
#include "genperf/error.h"
#include "genperf/tensor.h"

using namespace genperf;

// Double-precision reference for round-to-nearest-even into a format with `mant` explicit
// mantissa bits, minimum normal exponent `emin` and maximum finite value `maxv`.
static double round_ref(double x, int mant, int emin, double maxv) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const double a = std::fabs(x);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = std::max(e - 1, emin);
  const double ulp = std::ldexp(1.0, exp - mant);
  double q = a / ulp;
  double r = std::nearbyint(q);  // default rounding mode: ties to even
  double v = r * ulp;
  const double overflow = maxv + std::ldexp(1.0, int(std::ilogb(maxv)) - mant - 1);  // half ulp above max
  if (v > maxv || a >= overflow) v = INFINITY;
  return std::copysign(v, x);
}

TEST(DType, Bf16RoundTripAndRounding) {
  const unsigned seed = 1234;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float f = bits_f32(bits);
    const float got = bf16_to_f32(f32_to_bf16(f));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    const double want = round_ref(f, 7, -126, 3.3895313892515355e38);
    ASSERT_EQ(double(got), want) << std::hexfloat << f;
  }
  for (uint32_t h = 0; h < 65536; ++h) {  // every bf16 value round-trips
    const float f = bf16_to_f32(uint16_t(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
}

TEST(DType, F16RoundTripAndRounding) {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(-30.f, 18.f);
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(1.0f + float(rng() % 4096) / 4096.f + float(rng() % 7) * 1e-6f, int(mag(rng)));
    if (rng() & 1) f = -f;
    const double want = round_ref(f, 10, -14, 65504.0);
    ASSERT_EQ(double(f16_to_f32(f32_to_f16(f))), want) << std::hexfloat << f;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_f16(f), h) << h;
    } else {
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
    }
  }
  EXPECT_EQ(f32_to_f16(65519.f), 0x7bff);  // below the halfway point: max finite
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);  // halfway rounds to even: infinity
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0);      // half the smallest subnormal: ties to even (0)
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 1);
}

TEST(Tensor, ViewsSliceTransposeCopy) {
  Tensor a = Tensor::zeros({3, 4});
  for (int i = 0; i < 12; ++i) a.data<float>()[i] = float(i);
  Tensor t = a.transpose(0, 1);
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.clone();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(c.data<float>()[1], 4.f);  // c[0][1] = a[1][0]
  Tensor s = a.slice(1, 1, 2);         // columns 1..2
  Tensor sb = s.to(DType::BF16);
  EXPECT_EQ(bf16_to_f32(sb.data<uint16_t>()[2]), 5.f);
  EXPECT_THROW(a.view({5, 2}), Error);
  EXPECT_THROW(a.slice(0, 2, 2), Error);
}

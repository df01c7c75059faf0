// The SR metrics (genperf/sr_metrics.h) on cases whose answer is known: PSNR of an offset, the
// spectrum of a single wave, ratios and correlations of a map with itself and with its
// bicubic-free blur, Wasserstein-1 of a shift, consistency of the degradation's own output,
// coverage of a known fraction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

#include "genperf/error.h"
#include "genperf/sr.h"
#include "genperf/sr_metrics.h"

using namespace genperf;
using namespace genperf::sr;

namespace {

Map field(int64_t n, uint64_t seed) {
  DustFieldSpec s;
  s.size = n, s.seed = seed;
  return dust_field(s);
}

TEST(SrMetrics, Psnr) {
  Map a(8, 8), b(8, 8);
  for (int64_t i = 0; i < 64; ++i) a.v[size_t(i)] = double(i) / 63.0;  // range 1
  for (int64_t i = 0; i < 64; ++i) b.v[size_t(i)] = a.v[size_t(i)] + 0.1;
  EXPECT_NEAR(psnr(b, a), 20.0, 1e-9);  // 10 log10(1 / 0.01)
  EXPECT_EQ(psnr(a, a), std::numeric_limits<double>::infinity());
  EXPECT_THROW(psnr(a, Map(8, 4)), Error);
}

TEST(SrMetrics, SpectrumOfOneWave) {
  const int64_t n = 64, k0 = 10;
  Map m(n, n);
  for (int64_t y = 0; y < n; ++y)
    for (int64_t x = 0; x < n; ++x) m.at(y, x) = std::cos(2 * std::numbers::pi * double(k0 * x) / double(n));
  const auto p = power_spectrum(m);
  ASSERT_EQ(p.size(), size_t(n / 2 + 1));
  size_t peak = 0;
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] > p[peak]) peak = k;
  EXPECT_EQ(peak, size_t(k0));
  // The Hann taper spreads the wave over neighbouring bands only.
  EXPECT_LT(p[k0 + 3] + p[k0 - 3], 1e-20 * p[k0] + 1e-12);
  EXPECT_THROW(power_spectrum(Map(48, 48)), Error);
}

TEST(SrMetrics, SpectrumScoreAndCorrelation) {
  const Map hr = field(128, 3);
  const SpectrumScore self = spectrum_score(hr, hr, 4);
  EXPECT_NEAR(self.worst, 0.0, 1e-12);
  EXPECT_NEAR(self.min_corr, 1.0, 1e-12);
  // A blurred copy: the large scales agree, the small ones lose power.
  Degradation d;
  d.scale = 1, d.blur_sigma = 2.0;
  const Map blurred = degrade(hr, d);
  const SpectrumScore s = spectrum_score(blurred, hr, 4);
  std::printf("blurred: worst |R-1| %.3f, min r %.4f, R(40) %.4f\n", s.worst, s.min_corr, s.ratio[40]);
  EXPECT_GT(s.min_corr, 0.95);
  EXPECT_LT(s.ratio[40], 0.1);
  EXPECT_GT(s.worst, 0.9);
  // An independent field: no correlation to speak of.
  const auto r = spectrum_correlation(field(128, 4), hr);
  double mean_r = 0;
  for (size_t k = 1; k <= 16; ++k) mean_r += r[k] / 16;
  EXPECT_LT(std::fabs(mean_r), 0.2);
}

TEST(SrMetrics, WassersteinConsistencyCoverage) {
  const Map hr = field(64, 7);
  Map shifted = hr;
  double mean = 0, var = 0;
  for (double v : hr.v) mean += v / double(hr.v.size());
  for (double v : hr.v) var += (v - mean) * (v - mean) / double(hr.v.size());
  for (double& v : shifted.v) v += 0.25;
  EXPECT_NEAR(wasserstein1(shifted, hr), 0.25 / std::sqrt(var), 1e-12);
  EXPECT_NEAR(wasserstein1(hr, hr), 0.0, 1e-15);
  Degradation d;
  d.scale = 4;
  const Map lr = degrade(hr, d);
  EXPECT_NEAR(consistency(hr, lr, d), 0.0, 1e-15);
  EXPECT_GT(consistency(shifted, lr, d), 0.05);
  // Coverage: sd 1 around a mean off by 0.5 everywhere but on a quarter of the pixels, off by 2.
  Map m = hr, sd(64, 64, 1.0);
  for (size_t i = 0; i < m.v.size(); ++i) m.v[i] += i % 4 == 0 ? 2.0 : 0.5;
  EXPECT_DOUBLE_EQ(coverage(hr, m, sd), 0.75);
}

}  // namespace

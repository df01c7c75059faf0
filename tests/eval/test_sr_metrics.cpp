// The SR metrics (genperf/sr_metrics.h) on cases whose answer is known: PSNR of an offset, the
// spectrum of a single wave, ratios and correlations of a map with itself and with its
// bicubic-free blur, Wasserstein-1 of a shift, consistency of the degradation's own output,
// coverage of a known fraction and the predictive interval's coverage of calibrated Gaussian
// draws, Student's t quantiles against closed forms, the ensemble and pooled spectrum ratios and their wide bands, SSIM against its direct definition, Minkowski functionals of
// sets whose area, boundary and Euler characteristic are counted by hand.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

#include "genperf/error.h"
#include "genperf/rng.h"
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

TEST(SrMetrics, StudentTQuantiles) {
  // Closed forms: nu = 1 is Cauchy's, tan(pi (p - 1/2)); nu = 2 is (2p - 1) / sqrt(2 p (1 - p)).
  for (double p : {0.6, 0.75, 0.8413, 0.975}) {
    EXPECT_NEAR(student_t_quantile(p, 1), std::tan(std::numbers::pi * (p - 0.5)), 1e-6) << p;
    EXPECT_NEAR(student_t_quantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-6) << p;
    EXPECT_NEAR(student_t_quantile(1 - p, 2), -student_t_quantile(p, 2), 1e-12) << p;
  }
  EXPECT_NEAR(student_t_quantile(0.975, 7), 2.364624, 1e-5);  // the tables' value
  EXPECT_NEAR(student_t_quantile(0.841345, 1e6), 1.0, 1e-4);   // the normal's 1-sigma point
  EXPECT_THROW(student_t_quantile(1.0, 3), Error);
  EXPECT_THROW(student_t_quantile(0.5, 0), Error);
}

TEST(SrMetrics, PredictiveCoverageOfCalibratedDraws) {
  // Every pixel's truth and its N samples are draws from one Gaussian: a calibrated model. The
  // predictive interval covers 68.27%; mean +- sd covers less with few samples.
  const uint64_t seed = 11;
  std::printf("seed %llu\n", (unsigned long long)seed);
  Rng rng(seed);
  for (int64_t n : {2, 4, 8}) {
    Map hr(256, 256), mean(256, 256), sd(256, 256);
    for (size_t i = 0; i < hr.v.size(); ++i) {
      const double mu = 3 * rng.normal(), sigma = 0.5 + rng.uniform();
      hr.v[i] = mu + sigma * rng.normal();
      double s = 0, ss = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double x = mu + sigma * rng.normal();
        s += x, ss += x * x;
      }
      mean.v[i] = s / double(n);
      sd.v[i] = std::sqrt(std::max(0.0, (ss - s * s / double(n)) / double(n - 1)));
    }
    EXPECT_NEAR(predictive_coverage(hr, mean, sd, n), 0.6827, 0.006) << n;
    EXPECT_LT(coverage(hr, mean, sd), 0.64) << n;
  }
  const Map one(8, 8, 1.0);
  EXPECT_THROW(predictive_coverage(one, one, one, 1), Error);
}

TEST(SrMetrics, EnsembleAndPooledSpectrumRatios) {
  // Samples whose deviations from the mean are 1x and 3x the truth's: <P_sr> = (1 + 9) / 2 P_hr.
  const Map hr = field(64, 5), other = field(64, 6);
  auto scaled = [](const Map& m, double f) {
    double mu = 0;
    for (double v : m.v) mu += v / double(m.v.size());
    Map out = m;
    for (double& v : out.v) v = mu + f * (v - mu);
    return out;
  };
  const std::vector<Map> srs = {hr, scaled(hr, 3)};
  const SpectrumScore s = spectrum_score(srs, hr, 4);
  for (size_t k = 1; k < s.ratio.size(); ++k) EXPECT_NEAR(s.ratio[k], 5.0, 1e-9) << k;
  EXPECT_NEAR(s.worst, 4.0, 1e-9);
  EXPECT_NEAR(s.mean, 5.0, 1e-9);
  EXPECT_NEAR(s.min_corr, 1.0, 1e-9);  // each sample is in phase with the truth
  // Pooled over two truths: the summed spectra's ratio, not the mean of the ratios.
  const SpectrumScore t = spectrum_score(scaled(other, 2), other, 4);
  const std::vector<SpectrumScore> both = {s, t};
  const SpectrumScore pooled = pooled_spectrum_score(both, 4);
  const auto p1 = power_spectrum(hr), p2 = power_spectrum(other);
  double worst = 0, mean = 0;
  for (size_t k = 1; k < pooled.ratio.size(); ++k) {
    const double want = (5 * p1[k] + 4 * p2[k]) / (p1[k] + p2[k]);
    EXPECT_NEAR(pooled.ratio[k], want, 1e-9 * want) << k;
    if (k > 8 && k <= 25) worst = std::max(worst, want - 1), mean += want / 17;
  }
  EXPECT_NEAR(pooled.worst, worst, 1e-9);
  EXPECT_NEAR(pooled.mean, mean, 1e-9);
  const std::vector<SpectrumScore> mixed = {s, spectrum_score(field(32, 7), field(32, 8), 4)};
  EXPECT_THROW(pooled_spectrum_score(mixed, 4), Error);
}

TEST(SrMetrics, WideBandsPoolTheirModes) {
  // 64 pixels at scale 4: the bands 8 < k <= 25 four to an octave, edges 8 x 2^(j/4) = 9.51,
  // 11.31, 13.45, 16, 19.03, 22.63, 26.91.
  const Map hr = field(64, 5), other = field(64, 6);
  auto scaled = [](const Map& m, double f) {
    Map out = m;
    for (double& v : out.v) v *= f;
    return out;
  };
  const SpectrumScore s = spectrum_score(scaled(hr, 2), hr, 4), t = spectrum_score(scaled(other, 3), other, 4);
  const std::vector<std::pair<int64_t, int64_t>> want = {{9, 9}, {10, 11}, {12, 13}, {14, 16},
                                                        {17, 19}, {20, 22}, {23, 25}};
  EXPECT_EQ(s.wide_bands, want);
  ASSERT_EQ(s.wide_ratio.size(), want.size());
  for (double r : s.wide_ratio) EXPECT_NEAR(r, 4.0, 1e-9);
  EXPECT_NEAR(s.worst_wide, 3.0, 1e-9);
  // Pooled: each wide band's summed power over its modes, counted here mode by mode.
  const std::vector<SpectrumScore> both = {s, t};
  const SpectrumScore pooled = pooled_spectrum_score(both, 4);
  std::vector<double> count(33, 0.0);
  for (int64_t y = 0; y < 64; ++y)
    for (int64_t x = 0; x < 64; ++x) {
      const double ky = double(y <= 32 ? y : y - 64), kx = double(x <= 32 ? x : x - 64);
      const auto k = size_t(std::sqrt(kx * kx + ky * ky));
      if (k <= 32) count[k] += 1;
    }
  const auto p1 = power_spectrum(hr), p2 = power_spectrum(other);
  ASSERT_EQ(pooled.wide_bands, want);
  double worst = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    double num = 0, den = 0;
    for (int64_t k = want[b].first; k <= want[b].second; ++k)
      num += count[size_t(k)] * (4 * p1[size_t(k)] + 9 * p2[size_t(k)]), den += count[size_t(k)] * (p1[size_t(k)] + p2[size_t(k)]);
    EXPECT_NEAR(pooled.wide_ratio[b], num / den, 1e-9 * num / den) << b;
    worst = std::max(worst, std::fabs(num / den - 1));
  }
  EXPECT_NEAR(pooled.worst_wide, worst, 1e-9);
}

}  // namespace

namespace {

// SSIM by its definition with a direct 2-D window (not the library's separable sums).
double ssim_direct(const Map& x, const Map& ref) {
  double lo = ref.v[0], hi = ref.v[0];
  for (double v : ref.v) lo = std::min(lo, v), hi = std::max(hi, v);
  const double C1 = std::pow(0.01 * (hi - lo), 2), C2 = std::pow(0.03 * (hi - lo), 2);
  double total = 0;
  for (int64_t y = 0; y < x.h; ++y)
    for (int64_t c = 0; c < x.w; ++c) {
      double k = 0, a = 0, b = 0, aa = 0, bb = 0, ab = 0;
      for (int64_t dy = -5; dy <= 5; ++dy)
        for (int64_t dx = -5; dx <= 5; ++dx) {
          const int64_t yy = y + dy, xx = c + dx;
          if (yy < 0 || yy >= x.h || xx < 0 || xx >= x.w) continue;
          const double g = std::exp(-0.5 * double(dy * dy + dx * dx) / 2.25);
          const double p = x.at(yy, xx), q = ref.at(yy, xx);
          k += g, a += g * p, b += g * q, aa += g * p * p, bb += g * q * q, ab += g * p * q;
        }
      a /= k, b /= k;
      const double va = aa / k - a * a, vb = bb / k - b * b, cab = ab / k - a * b;
      total += (2 * a * b + C1) * (2 * cab + C2) / ((a * a + b * b + C1) * (va + vb + C2));
    }
  return total / double(x.h * x.w);
}

}  // namespace

TEST(SrMetrics, Ssim) {
  DustFieldSpec spec;
  spec.size = 32, spec.seed = 3;
  const Map hr = dust_field(spec);
  EXPECT_NEAR(ssim(hr, hr), 1.0, 1e-12);
  Map noisy = hr;
  Rng rng(5);
  for (double& v : noisy.v) v += 0.2 * rng.normal();
  const double s = ssim(noisy, hr);
  EXPECT_LT(s, 0.95);
  EXPECT_GT(s, 0.0);
  EXPECT_NEAR(s, ssim_direct(noisy, hr), 1e-12);
  Map rect(20, 13);  // not square, edges renormalized
  for (size_t i = 0; i < rect.v.size(); ++i) rect.v[i] = std::sin(0.37 * double(i));
  Map rect2 = rect;
  for (double& v : rect2.v) v = 0.8 * v + 0.1;
  EXPECT_NEAR(ssim(rect2, rect), ssim_direct(rect2, rect), 1e-12);
}

TEST(SrMetrics, MinkowskiFunctionalsOfKnownSets) {
  // Pixels of value 1 on 0: one threshold between them picks exactly those pixels.
  auto functionals = [](const Map& m) {
    double mu = 0, ss = 0;
    for (double v : m.v) mu += v;
    mu /= double(m.v.size());
    for (double v : m.v) ss += (v - mu) * (v - mu);
    const double sd = std::sqrt(ss / double(m.v.size()));
    const Minkowski f = minkowski(m, m, {(0.5 - mu) / sd});
    const double n = double(m.v.size());
    return std::array<double, 3>{f.area[0] * n, f.perimeter[0] * n, f.euler[0] * n};
  };
  Map one(8, 8);
  one.at(3, 4) = 1;
  EXPECT_EQ(functionals(one), (std::array<double, 3>{1, 4, 1}));
  Map two = one;
  two.at(6, 1) = 1;  // apart: two components
  EXPECT_EQ(functionals(two), (std::array<double, 3>{2, 8, 2}));
  Map ring(9, 9);  // a 5 x 5 square outline: one component with one hole
  for (int64_t i = 2; i <= 6; ++i) ring.at(2, i) = ring.at(6, i) = ring.at(i, 2) = ring.at(i, 6) = 1;
  EXPECT_EQ(functionals(ring), (std::array<double, 3>{16, 32, 0}));
  Map diag(6, 6);  // corner-touching squares share a vertex: one component
  diag.at(2, 2) = diag.at(3, 3) = 1;
  EXPECT_EQ(functionals(diag), (std::array<double, 3>{2, 8, 1}));
  // A field against itself scores 0; a smoothed copy is farther than the field is from itself.
  DustFieldSpec spec;
  spec.size = 64;
  const Map hr = dust_field(spec);
  Map blur = hr;
  for (int64_t y = 1; y + 1 < hr.h; ++y)
    for (int64_t x = 1; x + 1 < hr.w; ++x)
      blur.at(y, x) = (hr.at(y - 1, x) + hr.at(y + 1, x) + hr.at(y, x - 1) + hr.at(y, x + 1) + hr.at(y, x)) / 5;
  EXPECT_EQ(minkowski_score(hr, hr, blur), 0.0);
  Map half = hr;
  for (size_t i = 0; i < half.v.size(); ++i) half.v[i] = 0.5 * (hr.v[i] + blur.v[i]);
  const double sc = minkowski_score(half, hr, blur);
  EXPECT_GT(sc, 0.0);
  EXPECT_LT(sc, 1.0);
  EXPECT_EQ(minkowski_thresholds().size(), 25u);
}

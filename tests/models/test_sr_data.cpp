// The SR problem's data (genperf/sr.h): the degradation keeps constants and the mean, averages
// blocks exactly without blur, adds noise of the stated size, refuses maps that do not divide;
// synthetic dust fields are log-normal with the stated slope and width, and the same for a seed;
// a spec lists files and synthetic fields together.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fits.h"
#include "genperf/fft.h"
#include "genperf/sr.h"

using namespace genperf;
using namespace genperf::sr;

namespace {

TEST(SrData, Degradation) {
  Map flat(16, 12, 2.5);
  Degradation d;
  d.scale = 4;
  const Map lf = degrade(flat, d);
  ASSERT_EQ(lf.h, 4);
  ASSERT_EQ(lf.w, 3);
  for (double v : lf.v) EXPECT_NEAR(v, 2.5, 1e-12);
  // Without blur: the block means, exactly.
  Map ramp(8, 8);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x) ramp.at(y, x) = double(y * 8 + x);
  d.scale = 2, d.blur_sigma = 0;
  const Map l2 = degrade(ramp, d);
  EXPECT_DOUBLE_EQ(l2.at(1, 2), (20 + 21 + 28 + 29) / 4.0);  // rows 2-3, columns 4-5
  // With blur (edges reflected) the total is kept.
  d.blur_sigma = -1;
  const Map lb = degrade(ramp, d);
  double s_hr = 0, s_lr = 0;
  for (double v : ramp.v) s_hr += v;
  for (double v : lb.v) s_lr += v;
  EXPECT_NEAR(s_lr * 4, s_hr, 1e-9 * s_hr);
  // Noise of the stated fraction of the map's standard deviation, reproducible by seed.
  DustFieldSpec spec;
  spec.size = 64;
  const Map field = dust_field(spec);
  Degradation dn;
  dn.scale = 4, dn.noise = 0.1, dn.seed = 9;
  const Map clean = degrade(field, Degradation{4, -1, 0, 0}), noisy = degrade(field, dn);
  double var_c = 0, var_n = 0, mean_c = 0;
  for (double v : clean.v) mean_c += v / double(clean.v.size());
  for (size_t i = 0; i < clean.v.size(); ++i) {
    var_c += (clean.v[i] - mean_c) * (clean.v[i] - mean_c);
    var_n += (noisy.v[i] - clean.v[i]) * (noisy.v[i] - clean.v[i]);
  }
  EXPECT_NEAR(std::sqrt(var_n / var_c), 0.1, 0.03);
  EXPECT_EQ(noisy.v, degrade(field, dn).v);
  EXPECT_THROW(degrade(Map(10, 8), Degradation{4}), Error);
}

TEST(SrData, DustFieldIsLogNormalWithTheStatedSpectrum) {
  for (double slope : {-2.5, -3.0}) {
    DustFieldSpec spec;
    spec.size = 128, spec.slope = slope, spec.sigma_ln = 0.7, spec.seed = 5;
    const Map m = dust_field(spec);
    std::printf("seed %llu slope %.2f\n", (unsigned long long)spec.seed, slope);
    EXPECT_EQ(m.v, dust_field(spec).v);
    double mean = 0, ln_var = 0, ln_mean = 0;
    for (double v : m.v) {
      ASSERT_GT(v, 0);
      mean += v;
      ln_mean += std::log(v);
    }
    mean /= double(m.v.size());
    ln_mean /= double(m.v.size());
    for (double v : m.v) ln_var += (std::log(v) - ln_mean) * (std::log(v) - ln_mean);
    EXPECT_NEAR(std::sqrt(ln_var / double(m.v.size())), 0.7, 1e-9);
    EXPECT_NEAR(mean, 1.0, 0.15);
    // The slope of ln(map)'s spectrum: a least-squares line through log P(k), log k for k in
    // [4, 48], P the mean |FFT|^2 in each integer band (no taper: the field is periodic).
    const int64_t n = m.h;
    std::vector<std::complex<double>> f(m.v.size());
    for (size_t i = 0; i < f.size(); ++i) f[i] = std::log(m.v[i]) - ln_mean;
    fft2(f, n, n);
    std::vector<double> p(size_t(n / 2 + 1), 0.0), c(p.size(), 0.0);
    for (int64_t y = 0; y < n; ++y)
      for (int64_t x = 0; x < n; ++x) {
        const double ky = double(y <= n / 2 ? y : y - n), kx = double(x <= n / 2 ? x : x - n);
        const auto k = size_t(std::sqrt(kx * kx + ky * ky) + 0.5);
        if (k < p.size()) p[k] += std::norm(f[size_t(y * n + x)]), c[k] += 1;
      }
    double sx = 0, sy = 0, sxx = 0, sxy = 0, cnt = 0;
    for (size_t k = 4; k <= 48; ++k) {
      const double lx = std::log(double(k)), ly = std::log(p[k] / c[k]);
      sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, cnt += 1;
    }
    const double fitted = (cnt * sxy - sx * sy) / (cnt * sxx - sx * sx);
    std::printf("  fitted slope %.3f\n", fitted);
    EXPECT_NEAR(fitted, slope, 0.15);
  }
  EXPECT_THROW(dust_field(DustFieldSpec{100}), Error);
}

TEST(SrData, SpecListsFilesAndSyntheticFields) {
  genperf::testing::TempDir tmp("srmaps");
  FitsImage f;
  f.width = 8, f.height = 4, f.bitpix = -64;
  for (int i = 0; i < 32; ++i) f.pixels.push_back(1 + 0.5 * i);
  write_fits(tmp / "a.fits", {f});
  const auto maps = read_maps("synthetic:2:32:7," + (tmp / "a.fits") + ",synthetic:1:16:3:mixed");
  ASSERT_EQ(maps.size(), 4u);
  EXPECT_EQ(maps[0].first, "synthetic-32-seed7");
  EXPECT_EQ(maps[1].first, "synthetic-32-seed8");
  EXPECT_EQ(maps[2].first, tmp / "a.fits");
  EXPECT_EQ(maps[2].second.w, 8);
  EXPECT_EQ(maps[3].first, "synthetic-16-seed3-mixed");
  DustFieldSpec d;
  d.size = 32, d.seed = 8;
  EXPECT_EQ(maps[1].second.v, dust_field(d).v);
  EXPECT_THROW(read_maps("synthetic:2:32:7," + (tmp / "missing.fits")), Error);
  EXPECT_THROW(read_maps("synthetic:x"), Error);
  EXPECT_THROW(read_maps(","), Error);
}

}  // namespace

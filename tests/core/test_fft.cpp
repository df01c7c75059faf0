// The FFT against a direct float64 DFT at sizes 1 to 256, the inverse round trip, the 2-D
// transform against the direct 2-D sum, and sizes that are not powers of two refused.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <numbers>
#include <vector>

#include "genperf/error.h"
#include "genperf/fft.h"
#include "genperf/rng.h"

using namespace genperf;
using cd = std::complex<double>;

namespace {

std::vector<cd> dft(const std::vector<cd>& x) {
  const size_t n = x.size();
  std::vector<cd> out(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      out[k] += x[j] * std::polar(1.0, -2 * std::numbers::pi * double((k * j) % n) / double(n));
  return out;
}

double max_diff(const std::vector<cd>& a, const std::vector<cd>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST(Fft, MatchesTheDirectTransform) {
  const uint64_t seed = 31;
  std::printf("seed %llu\n", (unsigned long long)seed);
  Rng r(seed);
  for (size_t n : {1, 2, 4, 8, 64, 256}) {
    std::vector<cd> x(n);
    for (auto& v : x) v = {r.normal(), r.normal()};
    std::vector<cd> f = x;
    fft(f);
    EXPECT_LT(max_diff(f, dft(x)), 1e-11 * double(n)) << n;
    fft(f, true);
    EXPECT_LT(max_diff(f, x), 1e-13) << n;
  }
  // 2-D: rows of 8, columns of 4.
  const int64_t h = 4, w = 8;
  std::vector<cd> a(size_t(h * w)), want(a.size());
  for (auto& v : a) v = {r.normal(), 0.0};
  for (int64_t ky = 0; ky < h; ++ky)
    for (int64_t kx = 0; kx < w; ++kx)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          want[size_t(ky * w + kx)] += a[size_t(y * w + x)] *
              std::polar(1.0, -2 * std::numbers::pi * (double(ky * y) / double(h) + double(kx * x) / double(w)));
  fft2(a, h, w);
  EXPECT_LT(max_diff(a, want), 1e-11);
  std::vector<cd> bad(6);
  EXPECT_THROW(fft(bad), Error);
}

}  // namespace

// The SR problem's data (genperf/sr.h): the degradation and synthetic dust fields.
#include <cmath>
#include <complex>
#include <vector>

#include "genperf/error.h"
#include "genperf/fft.h"
#include "genperf/rng.h"
#include "genperf/sr.h"

namespace genperf::sr {
namespace {

// Index reflected into [0, n) about the edges (... 2 1 0 | 0 1 2 ... n-1 | n-1 n-2 ...).
int64_t reflect(int64_t i, int64_t n) {
  while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - i - 1;
  return i;
}

// Separable Gaussian blur, edges reflected; the kernel spans +-4 sigma and sums to 1.
Map blur(const Map& m, double sigma) {
  if (sigma <= 0) return m;
  const int64_t r = std::max<int64_t>(1, int64_t(std::ceil(4 * sigma)));
  std::vector<double> k(static_cast<size_t>(2 * r + 1));
  double sum = 0;
  for (int64_t i = -r; i <= r; ++i) sum += k[size_t(i + r)] = std::exp(-0.5 * double(i * i) / (sigma * sigma));
  for (double& v : k) v /= sum;
  Map tmp(m.h, m.w), out(m.h, m.w);
  for (int64_t y = 0; y < m.h; ++y)
    for (int64_t x = 0; x < m.w; ++x) {
      double a = 0;
      for (int64_t i = -r; i <= r; ++i) a += k[size_t(i + r)] * m.at(y, reflect(x + i, m.w));
      tmp.at(y, x) = a;
    }
  for (int64_t y = 0; y < m.h; ++y)
    for (int64_t x = 0; x < m.w; ++x) {
      double a = 0;
      for (int64_t i = -r; i <= r; ++i) a += k[size_t(i + r)] * tmp.at(reflect(y + i, m.h), x);
      out.at(y, x) = a;
    }
  return out;
}

}  // namespace

Map degrade(const Map& hr, const Degradation& d) {
  const int64_t s = d.scale;
  GP_CHECK(s >= 1, "[sr] scale ", s, ": expected a positive integer");
  GP_CHECK(hr.h > 0 && hr.w > 0 && hr.h % s == 0 && hr.w % s == 0, "[sr] a ", hr.h, " x ", hr.w,
           " map does not divide into ", s, " x ", s, " blocks");
  const Map b = blur(hr, d.sigma());
  Map lr(hr.h / s, hr.w / s);
  for (int64_t y = 0; y < lr.h; ++y)
    for (int64_t x = 0; x < lr.w; ++x) {
      double a = 0;
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) a += b.at(y * s + i, x * s + j);
      lr.at(y, x) = a / double(s * s);
    }
  if (d.noise > 0) {
    double mean = 0, var = 0;
    for (double v : lr.v) mean += v;
    mean /= double(lr.v.size());
    for (double v : lr.v) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / double(lr.v.size()));
    Rng rng(d.seed);
    for (double& v : lr.v) v += d.noise * sd * rng.normal();
  }
  return lr;
}

Map dust_field(const DustFieldSpec& spec) {
  const int64_t n = spec.size;
  GP_CHECK(is_pow2(n) && n >= 4, "[sr] dust field size ", n, ": expected a power of two >= 4");
  GP_CHECK(spec.sigma_ln > 0, "[sr] dust field sigma_ln ", spec.sigma_ln, ": expected > 0");
  // White noise filtered by sqrt(P(k)), then the real part of the inverse transform (the field
  // is real and its spectrum keeps the shape).
  Rng rng(spec.seed);
  std::vector<std::complex<double>> f(static_cast<size_t>(n * n));
  for (auto& v : f) v = {rng.normal(), 0.0};
  fft2(f, n, n);
  for (int64_t y = 0; y < n; ++y)
    for (int64_t x = 0; x < n; ++x) {
      const double ky = double(y <= n / 2 ? y : y - n), kx = double(x <= n / 2 ? x : x - n);
      const double k = std::sqrt(kx * kx + ky * ky);
      f[size_t(y * n + x)] *= k > 0 ? std::pow(k, 0.5 * spec.slope) : 0.0;
    }
  fft2(f, n, n, true);
  Map g(n, n);
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n * n; ++i) mean += g.v[size_t(i)] = f[size_t(i)].real();
  mean /= double(n * n);
  for (double v : g.v) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / double(n * n)), s = spec.sigma_ln;
  for (double& v : g.v) v = std::exp(s * (v - mean) / sd - 0.5 * s * s);
  return g;
}

}  // namespace genperf::sr

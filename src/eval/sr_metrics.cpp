// The super-resolution metrics (genperf/sr_metrics.h).
#include "genperf/sr_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>

#include "genperf/error.h"
#include "genperf/fft.h"

namespace genperf::sr {
namespace {

void check_same(const char* what, const Map& a, const Map& b) {
  GP_CHECK(a.h == b.h && a.w == b.w && a.h > 0 && a.w > 0, "[sr ", what, "] maps of ", a.h, " x ", a.w, " and ",
           b.h, " x ", b.w, ": expected two non-empty maps of one size");
}

double mean_of(const Map& m) {
  double s = 0;
  for (double v : m.v) s += v;
  return s / double(m.v.size());
}

double sd_of(const Map& m) {
  const double mu = mean_of(m);
  double s = 0;
  for (double v : m.v) s += (v - mu) * (v - mu);
  return std::sqrt(s / double(m.v.size()));
}

// The Hann-tapered transform of m less its mean.
std::vector<std::complex<double>> spectrum_of(const Map& m) {
  GP_CHECK(m.h == m.w && is_pow2(m.h), "[sr spectrum] a ", m.h, " x ", m.w,
           " map: spectra take square maps whose side is a power of two");
  const int64_t n = m.h;
  const double mu = mean_of(m);
  std::vector<double> hann(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) hann[size_t(i)] = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * double(i) / double(n));
  std::vector<std::complex<double>> f(static_cast<size_t>(n * n));
  for (int64_t y = 0; y < n; ++y)
    for (int64_t x = 0; x < n; ++x) f[size_t(y * n + x)] = (m.at(y, x) - mu) * hann[size_t(y)] * hann[size_t(x)];
  fft2(f, n, n);
  return f;
}

// fn(k, i) for each mode i of an n x n transform and its integer band k = floor(|k|) <= n/2.
template <typename Fn>
void for_each_mode(int64_t n, Fn fn) {
  for (int64_t y = 0; y < n; ++y)
    for (int64_t x = 0; x < n; ++x) {
      const double ky = double(y <= n / 2 ? y : y - n), kx = double(x <= n / 2 ? x : x - n);
      const auto k = size_t(std::sqrt(kx * kx + ky * ky));
      if (k <= size_t(n / 2)) fn(k, size_t(y * n + x));
    }
}

// The number of modes in each integer band of |k|, k = 0 .. n/2.
std::vector<double> band_counts(int64_t n) {
  std::vector<double> cnt(size_t(n / 2 + 1), 0.0);
  for_each_mode(n, [&](size_t k, size_t) { cnt[k] += 1; });
  return cnt;
}

// The mean of value(mode) over the modes of each integer band of |k|, k = 0 .. n/2.
template <typename Fn>
std::vector<double> band_average(int64_t n, Fn value) {
  std::vector<double> sum(size_t(n / 2 + 1), 0.0), cnt(sum.size(), 0.0);
  for_each_mode(n, [&](size_t k, size_t i) {
    sum[k] += value(i);
    cnt[k] += 1;
  });
  for (size_t k = 0; k < sum.size(); ++k) sum[k] = cnt[k] > 0 ? sum[k] / cnt[k] : 0.0;
  return sum;
}

// The worst |R - 1| and the mean R over the bands the input lacks, k_lr < k <= 0.8 k_Nyquist, and
// the ratio over those bands grouped into wide ones (the modes' power summed).
void score_ratio(SpectrumScore& s, int64_t n, int64_t scale) {
  const int64_t k_lr = n / (2 * scale), k_hi = int64_t(0.8 * double(n / 2));
  s.worst = s.mean = 0;
  for (int64_t k = k_lr + 1; k <= k_hi; ++k) {
    s.worst = std::max(s.worst, std::fabs(s.ratio[size_t(k)] - 1));
    s.mean += s.ratio[size_t(k)] / double(k_hi - k_lr);
  }
  const std::vector<double> cnt = band_counts(n);
  s.wide_bands.clear(), s.wide_ratio.clear(), s.worst_wide = 0;
  int64_t k = k_lr + 1;
  for (int j = 0; k <= k_hi; ++j) {
    const double hi = double(k_lr) * std::exp2(double(j + 1) / kWideBandsPerOctave);
    double sr = 0, hr = 0;
    const int64_t first = k;
    for (; k <= k_hi && double(k) <= hi; ++k) {
      sr += cnt[size_t(k)] * s.p_sr[size_t(k)];
      hr += cnt[size_t(k)] * s.p_hr[size_t(k)];
    }
    if (k == first) continue;  // no integer k in this octave's part
    s.wide_bands.emplace_back(first, k - 1);
    s.wide_ratio.push_back(hr > 0 ? sr / hr : 0.0);
    s.worst_wide = std::max(s.worst_wide, std::fabs(s.wide_ratio.back() - 1));
  }
}

std::vector<double> ratio_of(const std::vector<double>& p_sr, const std::vector<double>& p_hr) {
  std::vector<double> r(p_sr.size());
  for (size_t k = 0; k < r.size(); ++k) r[k] = p_hr[k] > 0 ? p_sr[k] / p_hr[k] : 0.0;
  return r;
}


// The band powers of a transform, and the band correlation of two transforms given their powers.
std::vector<double> band_power(const std::vector<std::complex<double>>& f, int64_t n) {
  return band_average(n, [&](size_t i) { return std::norm(f[i]); });
}

std::vector<double> band_correlation(const std::vector<std::complex<double>>& fa, const std::vector<double>& pa,
                                     const std::vector<std::complex<double>>& fb, const std::vector<double>& pb,
                                     int64_t n) {
  auto r = band_average(n, [&](size_t i) { return (fa[i] * std::conj(fb[i])).real(); });
  for (size_t k = 0; k < r.size(); ++k) r[k] = pa[k] > 0 && pb[k] > 0 ? r[k] / std::sqrt(pa[k] * pb[k]) : 0.0;
  return r;
}

}  // namespace

double psnr(const Map& x, const Map& ref) {
  check_same("psnr", x, ref);
  double mse = 0;
  for (size_t i = 0; i < x.v.size(); ++i) mse += (x.v[i] - ref.v[i]) * (x.v[i] - ref.v[i]);
  mse /= double(x.v.size());
  const auto [lo, hi] = std::minmax_element(ref.v.begin(), ref.v.end());
  const double range = *hi - *lo;
  return mse == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(range * range / mse);
}

std::vector<double> power_spectrum(const Map& m) { return band_power(spectrum_of(m), m.h); }

std::vector<double> spectrum_correlation(const Map& a, const Map& b) {
  check_same("spectrum_correlation", a, b);
  const auto fa = spectrum_of(a), fb = spectrum_of(b);
  return band_correlation(fa, band_power(fa, a.h), fb, band_power(fb, b.h), a.h);
}

SpectrumScore spectrum_score(std::span<const Map> srs, const Map& hr, int64_t scale) {
  GP_CHECK(!srs.empty(), "[sr spectrum_score] no samples to score");
  GP_CHECK(scale >= 1 && hr.h / (2 * scale) >= 2, "[sr spectrum_score] scale ", scale, " leaves no band below a ",
           hr.h, "-pixel map's low-resolution Nyquist");
  SpectrumScore s;
  const auto f_hr = spectrum_of(hr);  // one transform per map, the truth's shared by every sample
  s.p_hr = band_power(f_hr, hr.h);
  s.p_sr.assign(s.p_hr.size(), 0.0);
  std::vector<double> corr(s.p_hr.size(), 0.0);
  for (const Map& sr : srs) {
    check_same("spectrum_score", sr, hr);
    const auto f = spectrum_of(sr);
    const auto p = band_power(f, hr.h), r = band_correlation(f, p, f_hr, s.p_hr, hr.h);
    for (size_t k = 0; k < p.size(); ++k) {
      s.p_sr[k] += p[k] / double(srs.size());
      corr[k] += r[k] / double(srs.size());
    }
  }
  s.ratio = ratio_of(s.p_sr, s.p_hr);
  score_ratio(s, hr.h, scale);
  s.min_corr = 1;
  for (int64_t k = 1; k <= hr.h / (2 * scale) / 2; ++k) s.min_corr = std::min(s.min_corr, corr[size_t(k)]);
  return s;
}

SpectrumScore pooled_spectrum_score(std::span<const SpectrumScore> scores, int64_t scale) {
  GP_CHECK(!scores.empty(), "[sr pooled_spectrum_score] no scores to pool");
  SpectrumScore s;
  s.p_sr.assign(scores[0].p_sr.size(), 0.0);
  s.p_hr = s.p_sr;
  for (const SpectrumScore& one : scores) {
    GP_CHECK(one.p_sr.size() == s.p_sr.size() && one.p_hr.size() == s.p_hr.size(),
             "[sr pooled_spectrum_score] spectra of ", one.p_sr.size(), " and ", s.p_sr.size(),
             " bands: pooling takes maps of one side");
    for (size_t k = 0; k < s.p_sr.size(); ++k) s.p_sr[k] += one.p_sr[k], s.p_hr[k] += one.p_hr[k];
    s.min_corr += one.min_corr / double(scores.size());
  }
  s.ratio = ratio_of(s.p_sr, s.p_hr);
  score_ratio(s, 2 * (int64_t(s.ratio.size()) - 1), scale);
  return s;
}

double wasserstein1(const Map& a, const Map& ref) {
  check_same("wasserstein1", a, ref);
  std::vector<double> x = a.v, y = ref.v;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  double d = 0;  // equal sample counts: the mean distance between matched order statistics
  for (size_t i = 0; i < x.size(); ++i) d += std::fabs(x[i] - y[i]);
  const double sd = sd_of(ref);
  GP_CHECK(sd > 0, "[sr wasserstein1] the reference map is constant: no scale to divide by");
  return d / double(x.size()) / sd;
}

double consistency(const Map& sr, const Map& lr, const Degradation& d) {
  Degradation clean = d;
  clean.noise = 0;
  const Map back = degrade(sr, clean);
  check_same("consistency", back, lr);
  double num = 0, den = 0;
  for (size_t i = 0; i < lr.v.size(); ++i) {
    num += (back.v[i] - lr.v[i]) * (back.v[i] - lr.v[i]);
    den += lr.v[i] * lr.v[i];
  }
  GP_CHECK(den > 0, "[sr consistency] the low-resolution map is all zeros");
  return std::sqrt(num / den);
}

double coverage(const Map& hr, const Map& mean, const Map& sd) {
  check_same("coverage", hr, mean);
  check_same("coverage", hr, sd);
  int64_t in = 0;
  for (size_t i = 0; i < hr.v.size(); ++i) in += std::fabs(hr.v[i] - mean.v[i]) <= sd.v[i];
  return double(in) / double(hr.v.size());
}

double student_t_quantile(double p, double nu) {
  GP_CHECK(nu > 0 && p > 0 && p < 1, "[sr student_t_quantile] p ", p, ", nu ", nu,
           ": expected 0 < p < 1 and nu > 0");
  if (p < 0.5) return -student_t_quantile(1 - p, nu);
  // The CDF above 0 by Simpson's rule on the density, bisected for p; ample for the 1e-6 needed.
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * std::numbers::pi);
  auto density = [&](double t) { return c * std::pow(1 + t * t / nu, -(nu + 1) / 2); };
  auto cdf = [&](double q) {
    const int n = 2000;
    const double h = q / n;
    double sum = density(0) + density(q);
    for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * density(i * h);
    return 0.5 + sum * h / 3;
  };
  double lo = 0, hi = 1;
  while (cdf(hi) < p) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (cdf(mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double predictive_coverage(const Map& hr, const Map& mean, const Map& sd, int64_t samples) {
  GP_CHECK(samples >= 2, "[sr predictive_coverage] ", samples, " samples: an interval needs at least 2");
  const double q = student_t_quantile(0.5 + 0.5 * std::erf(1 / std::sqrt(2.0)), double(samples - 1)) *
                   std::sqrt(1 + 1 / double(samples));
  Map wide = sd;
  for (double& v : wide.v) v *= q;
  return coverage(hr, mean, wide);
}

double ssim(const Map& x, const Map& ref) {
  check_same("ssim", x, ref);
  const auto [lo, hi] = std::minmax_element(ref.v.begin(), ref.v.end());
  const double L = *hi - *lo, C1 = (0.01 * L) * (0.01 * L), C2 = (0.03 * L) * (0.03 * L);
  const int r = 5;  // 3.5 sigma of 1.5, rounded
  std::vector<double> g(2 * r + 1);
  for (int i = -r; i <= r; ++i) g[size_t(i + r)] = std::exp(-0.5 * i * i / (1.5 * 1.5));
  // Separable weighted sums of a, b, a^2, b^2, a b; weights renormalized where the window leaves the map.
  const int64_t h = x.h, w = x.w;
  std::vector<std::array<double, 6>> row(size_t(h * w)), col(size_t(h * w));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t c = 0; c < w; ++c) {
      std::array<double, 6> s{};
      for (int i = -r; i <= r; ++i) {
        const int64_t cc = c + i;
        if (cc < 0 || cc >= w) continue;
        const double a = x.at(y, cc), b = ref.at(y, cc), k = g[size_t(i + r)];
        s[0] += k * a, s[1] += k * b, s[2] += k * a * a, s[3] += k * b * b, s[4] += k * a * b, s[5] += k;
      }
      row[size_t(y * w + c)] = s;
    }
  double total = 0;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t c = 0; c < w; ++c) {
      std::array<double, 6> s{};
      double kw = 0;
      for (int i = -r; i <= r; ++i) {
        const int64_t yy = y + i;
        if (yy < 0 || yy >= h) continue;
        const auto& q = row[size_t(yy * w + c)];
        const double k = g[size_t(i + r)];
        for (int j = 0; j < 5; ++j) s[size_t(j)] += k * q[size_t(j)];
        kw += k * q[5];
      }
      const double mx = s[0] / kw, my = s[1] / kw;
      const double vx = s[2] / kw - mx * mx, vy = s[3] / kw - my * my, cxy = s[4] / kw - mx * my;
      total += (2 * mx * my + C1) * (2 * cxy + C2) / ((mx * mx + my * my + C1) * (vx + vy + C2));
    }
  return total / double(h * w);
}

std::vector<double> minkowski_thresholds() {
  std::vector<double> t;
  for (int i = -12; i <= 12; ++i) t.push_back(0.25 * i);
  return t;
}

Minkowski minkowski(const Map& m, const Map& scale_of, const std::vector<double>& thresholds) {
  check_same("minkowski", m, scale_of);
  const double mu = mean_of(scale_of), sd = sd_of(scale_of);
  GP_CHECK(sd > 0, "[sr minkowski] the reference map is constant");
  const int64_t h = m.h, w = m.w;
  const double n = double(h * w);
  Minkowski r;
  std::vector<uint8_t> in(size_t(h * w));
  for (double nu : thresholds) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = (m.v[i] - mu) / sd > nu;
    auto at = [&](int64_t y, int64_t x) { return y >= 0 && y < h && x >= 0 && x < w && in[size_t(y * w + x)]; };
    double faces = 0, boundary = 0, edges = 0, vertices = 0;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        faces += at(y, x);
        if (x + 1 < w) boundary += at(y, x) != at(y, x + 1);
        if (y + 1 < h) boundary += at(y, x) != at(y + 1, x);
      }
    // Edges of the union of closed squares: horizontal edge (y, x) lies between rows y - 1 and y.
    for (int64_t y = 0; y <= h; ++y)
      for (int64_t x = 0; x < w; ++x) edges += at(y - 1, x) || at(y, x);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x <= w; ++x) edges += at(y, x - 1) || at(y, x);
    for (int64_t y = 0; y <= h; ++y)
      for (int64_t x = 0; x <= w; ++x) vertices += at(y - 1, x - 1) || at(y - 1, x) || at(y, x - 1) || at(y, x);
    r.nu.push_back(nu);
    r.area.push_back(faces / n);
    r.perimeter.push_back(boundary / n);
    r.euler.push_back((vertices - edges + faces) / n);
  }
  return r;
}

double minkowski_score(const Map& sr, const Map& hr, const Map& other) {
  const Minkowski a = minkowski(sr, hr), t = minkowski(hr, hr), b = minkowski(other, hr);
  auto rms = [](const std::vector<double>& p, const std::vector<double>& q) {
    double s = 0;
    for (size_t i = 0; i < p.size(); ++i) s += (p[i] - q[i]) * (p[i] - q[i]);
    return std::sqrt(s / double(p.size()));
  };
  double score = 0;
  for (auto f : {&Minkowski::area, &Minkowski::perimeter, &Minkowski::euler}) {
    const double base = rms(b.*f, t.*f);
    score += base > 0 ? rms(a.*f, t.*f) / base : (rms(a.*f, t.*f) > 0 ? 1e9 : 0.0);
  }
  return score / 3;
}

}  // namespace genperf::sr

#include "genperf/fft.h"

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "genperf/error.h"

namespace genperf {

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

void fft(std::span<std::complex<double>> a, bool inverse) {
  const int64_t n = int64_t(a.size());
  GP_CHECK(is_pow2(n), "[fft] ", n, " points: the transform takes a power of two");
  for (int64_t i = 1, j = 0; i < n; ++i) {  // bit-reversed order
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[size_t(i)], a[size_t(j)]);
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    const double ang = (inverse ? 2 : -2) * std::numbers::pi / double(len);
    for (int64_t i = 0; i < n; i += len)
      for (int64_t k = 0; k < len / 2; ++k) {
        // The twiddle computed directly (not by repeated products) keeps float64 accuracy.
        const std::complex<double> w(std::cos(ang * double(k)), std::sin(ang * double(k)));
        const std::complex<double> u = a[size_t(i + k)], v = a[size_t(i + k + len / 2)] * w;
        a[size_t(i + k)] = u + v;
        a[size_t(i + k + len / 2)] = u - v;
      }
  }
  if (inverse)
    for (auto& v : a) v /= double(n);
}

void fft2(std::span<std::complex<double>> a, int64_t h, int64_t w, bool inverse) {
  GP_CHECK(int64_t(a.size()) == h * w, "[fft2] ", a.size(), " values for a ", h, " x ", w, " array");
  for (int64_t y = 0; y < h; ++y) fft(a.subspan(size_t(y * w), size_t(w)), inverse);
  std::vector<std::complex<double>> col(static_cast<size_t>(h));
  for (int64_t x = 0; x < w; ++x) {
    for (int64_t y = 0; y < h; ++y) col[size_t(y)] = a[size_t(y * w + x)];
    fft(col, inverse);
    for (int64_t y = 0; y < h; ++y) a[size_t(y * w + x)] = col[size_t(y)];
  }
}

}  // namespace genperf

// Helpers of the op harness's cases (op_harness_cases.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/op_harness_cases.h"

namespace genperf::bench::harness {

namespace {
constexpr float kSentinel = -7777.25f;
}

void fill_normal(Tensor& t, Rng& rng, double scale) {
  Tensor f = Tensor::zeros(t.shape());
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = float(rng.normal() * scale);
  t.copy_from(f);
}

Tensor random_tensor(const std::vector<int64_t>& shape, DType dt, Rng& rng, double scale) {
  Tensor f = Tensor::zeros(shape);
  fill_normal(f, rng, scale);
  return dt == DType::F32 ? f : f.to(dt);
}

std::vector<double> randn(Rng& r, size_t n, double scale) {
  std::vector<double> v(n);
  for (auto& x : v) x = r.normal() * scale;
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

Guarded::Guarded(int64_t rows, int64_t cols, int64_t pad)
    : buf_(Tensor::zeros({rows + 2, cols + 2 * pad})),
      view_(buf_.slice(0, 1, rows).slice(1, pad, cols)),
      rows_(rows),
      cols_(cols),
      pad_(pad) {
  float* p = buf_.data<float>();
  for (int64_t i = 0; i < buf_.numel(); ++i) p[i] = kSentinel;
}

int64_t Guarded::guards_overwritten() const {
  const float* p = buf_.data<float>();
  const int64_t w = cols_ + 2 * pad_;
  int64_t bad = 0;
  for (int64_t r = 0; r < rows_ + 2; ++r)
    for (int64_t c = 0; c < w; ++c) {
      const bool inside = r >= 1 && r <= rows_ && c >= pad_ && c < pad_ + cols_;
      if (!inside && std::memcmp(&p[r * w + c], &kSentinel, 4) != 0) ++bad;
    }
  return bad;
}

std::vector<double> values(const Tensor& t) {
  const int64_t rows = t.ndim() == 1 ? 1 : t.size(0), cols = t.size(-1);
  std::vector<double> v;
  v.reserve(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = t.ndim() == 1 ? t.data<float>() : t.row<float>(r);
    for (int64_t c = 0; c < cols; ++c) v.push_back(p[c]);
  }
  return v;
}

double nmse(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? num / den : num;
}

template <typename A, typename B>
double rel_error(const A* got, const B* ref, size_t n, double floor) {
  double diff = 0, scale = floor;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(double(got[i]))) return INFINITY;
    diff = std::max(diff, std::fabs(double(got[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}
template double rel_error(const float*, const double*, size_t, double);
template double rel_error(const double*, const double*, size_t, double);
template double rel_error(const float*, const float*, size_t, double);

double elementwise(const std::vector<double>& got, const std::vector<double>& ref, double atol,
                   double rtol) {
  if (got.size() != ref.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - ref[i]);
    if (!(e == e)) return INFINITY;
    const double tol = atol + rtol * std::fabs(ref[i]);
    worst = std::max(worst, tol > 0 ? e / tol : (e > 0 ? INFINITY : 0.0));
  }
  return worst;
}

std::string cat_shape(const char* key, int64_t v) { return std::string(" ") + key + "=" + std::to_string(v); }

}  // namespace genperf::bench::harness

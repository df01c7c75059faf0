// Helpers of the op tests: seeded random tensors, strided views with guard values around them,
// the ISA levels this CPU supports, and the tolerance checks of STYLE.md (elementwise
// atol + rtol*|ref|; normalized MSE for linear and attention).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/tensor.h"

namespace genperf::testing {

// Fills a tensor (any float type, any strides) with normal values times `scale`.
inline void fill_normal(Tensor& t, Rng& rng, double scale = 1.0) {
  Tensor f = Tensor::zeros(t.shape());
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = float(rng.normal() * scale);
  t.copy_from(f);
}

inline Tensor random_tensor(const std::vector<int64_t>& shape, DType dt, Rng& rng,
                            double scale = 1.0) {
  Tensor t = Tensor::zeros(shape, dt);
  fill_normal(t, rng, scale);
  return t;
}

// An f32 [rows, cols] view into a larger buffer: one guard row above and below and `pad` guard
// columns each side, so the row stride exceeds the row length. Guards hold a sentinel that
// check_guards() verifies is untouched.
class Guarded {
 public:
  static constexpr float kSentinel = -7777.25f;
  Guarded(int64_t rows, int64_t cols, int64_t pad = 3)
      : buf_(Tensor::zeros({rows + 2, cols + 2 * pad})),
        view_(buf_.slice(0, 1, rows).slice(1, pad, cols)),
        rows_(rows),
        cols_(cols),
        pad_(pad) {
    float* p = buf_.data<float>();
    for (int64_t i = 0; i < buf_.numel(); ++i) p[i] = kSentinel;
  }
  Tensor& view() { return view_; }
  // A 1-D view of the single row (rows == 1), for the ops' 1-D form.
  Tensor row_view() const { return view_.view({cols_}); }
  void check_guards(const char* what) const {
    const float* p = buf_.data<float>();
    const int64_t w = cols_ + 2 * pad_;
    int64_t bad = 0;
    for (int64_t r = 0; r < rows_ + 2; ++r)
      for (int64_t c = 0; c < w; ++c) {
        const bool inside = r >= 1 && r <= rows_ && c >= pad_ && c < pad_ + cols_;
        if (!inside && std::memcmp(&p[r * w + c], &kSentinel, 4) != 0) ++bad;
      }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " guard values overwritten";
  }

 private:
  Tensor buf_, view_;
  int64_t rows_, cols_, pad_;
};

// Values of a 2-D (or 1-D) f32 tensor as doubles, row-major, ignoring strides.
inline std::vector<double> values(const Tensor& t) {
  const int64_t rows = t.ndim() == 1 ? 1 : t.size(0), cols = t.size(-1);
  std::vector<double> v;
  v.reserve(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = t.ndim() == 1 ? t.data<float>() : t.row<float>(r);
    for (int64_t c = 0; c < cols; ++c) v.push_back(p[c]);
  }
  return v;
}

// sum (got - ref)^2 / sum ref^2; NaN or Inf in got gives infinity.
inline double nmse(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? num / den : num;
}

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : std::sqrt(s / double(v.size()));
}

// Every element within atol + rtol * |ref|; reports the first few failures.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int reported = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = atol + rtol * std::fabs(ref[i]);
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      ++bad;
      if (reported++ < 5)
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i]
                      << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// The ISA levels this CPU runs, lowest first, up to the level in effect (so GENPERF_ISA=avx2
// limits the tests to generic and AVX2); restores the level on destruction.
class IsaLevels {
 public:
  IsaLevels() : saved_(isa()) {
    for (Isa i : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
      if (int(i) > int(saved_)) break;
      set_isa(i);
      if (isa() == i) levels_.push_back(i);
    }
    set_isa(saved_);
  }
  ~IsaLevels() { set_isa(saved_); }
  const std::vector<Isa>& levels() const { return levels_; }

 private:
  Isa saved_;
  std::vector<Isa> levels_;
};

inline uint64_t announce_seed(uint64_t seed, const char* test) {
  std::printf("[ seed     ] %s: %llu\n", test, static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace genperf::testing

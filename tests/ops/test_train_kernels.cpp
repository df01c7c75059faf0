// The backend kernels of training's layers (backend/cpu/train_kernels.h: exp_sum, exp_scale, the
// SwiGLU row backward, AdamW, sum of squares) at every ISA level against float64 loops, at the
// boundary sizes; exp_sum keeps a NaN. The tile products are checked in tests/train
// (TrainAttention.TileProductPaths).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/train_kernels.h"
#include "ops_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

const int64_t kSizes[] = {1, 7, 31, 32, 33, 4099};

std::vector<float> normal(Rng& rng, int64_t n, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(rng.normal() * scale);
  return v;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::string label(const char* what, int64_t n) {
  return std::string(what) + " " + isa_name(isa()) + " n=" + std::to_string(n);
}

TEST(TrainKernels, RowsMatchFloat64AtEveryLevel) {
  Rng rng(announce_seed(20260406, "TrainKernels.RowsMatchFloat64AtEveryLevel"));
  const IsaLevels isas;
  for (Isa level : isas.levels()) {
    set_isa(level);
    for (int64_t n : kSizes) {
      const std::vector<float> x = normal(rng, n, 4.0), g = normal(rng, n, 3.0),
                               u = normal(rng, n, 1.0), d = normal(rng, n, 1.0);
      // exp_sum and exp_scale, shifted by the maximum as a softmax does.
      float mx = x[0];
      for (float v : x) mx = std::max(mx, v);
      std::vector<double> e(static_cast<size_t>(n));
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += e[size_t(i)] = std::exp(double(x[size_t(i)] - mx));
      std::vector<float> out(static_cast<size_t>(n));
      const float s = cpu::exp_sum(x.data(), out.data(), n, mx);
      EXPECT_NEAR(s, sum, 1e-5 * sum) << label("exp_sum", n);
      expect_close(as_double(out), e, 0, 2e-6, label("exp_sum terms", n));
      EXPECT_EQ(cpu::exp_sum(x.data(), nullptr, n, mx), s) << label("exp_sum without terms", n);
      std::vector<float> scaled = x;  // in place
      cpu::exp_scale(scaled.data(), scaled.data(), n, mx, 0.25f);
      for (double& v : e) v *= 0.25;
      expect_close(as_double(scaled), e, 0, 2e-6, label("exp_scale", n));

      // SwiGLU backward against the float64 overload.
      std::vector<float> dg(static_cast<size_t>(n)), du(static_cast<size_t>(n));
      std::vector<double> dg64(static_cast<size_t>(n)), du64(static_cast<size_t>(n));
      cpu::swiglu_backward_row(g.data(), u.data(), d.data(), dg.data(), du.data(), n);
      const std::vector<double> g64 = as_double(g), u64 = as_double(u), d64 = as_double(d);
      cpu::swiglu_backward_row(g64.data(), u64.data(), d64.data(), dg64.data(), du64.data(), n);
      expect_close(as_double(dg), dg64, 1e-6, 1e-5, label("swiglu_backward_row dg", n));
      expect_close(as_double(du), du64, 1e-6, 1e-5, label("swiglu_backward_row du", n));

      // One AdamW step from nonzero moments.
      const cpu::AdamWStep st{0.999f, 0.9f, 0.95f, 1e-3f, 1.2f, 1e-8f};
      std::vector<float> p = normal(rng, n, 1.0), m = normal(rng, n, 0.1), v = normal(rng, n, 0.1);
      for (float& vi : v) vi = vi * vi;
      std::vector<double> p64 = as_double(p), m64 = as_double(m), v64 = as_double(v);
      for (size_t i = 0; i < size_t(n); ++i) {
        const double gi = g[i];
        m64[i] = 0.9 * m64[i] + double(1.0f - 0.9f) * gi;
        v64[i] = 0.95 * v64[i] + double(1.0f - 0.95f) * gi * gi;
        p64[i] = p64[i] * double(st.keep) -
                 double(st.step_size) * m64[i] / (std::sqrt(v64[i]) * double(st.inv_bc2_sqrt) + 1e-8);
      }
      cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, st);
      expect_close(as_double(p), p64, 1e-7, 1e-5, label("adamw p", n));
      expect_close(as_double(m), m64, 1e-7, 1e-5, label("adamw m", n));
      expect_close(as_double(v), v64, 1e-7, 1e-5, label("adamw v", n));

      double ss = 0;
      for (float xi : x) ss += double(xi) * double(xi);
      EXPECT_NEAR(cpu::sum_squares(x.data(), n), ss, 1e-12 * ss) << label("sum_squares", n);
    }
  }
}

// A NaN among the inputs shows in the sum (a softmax over a NaN logit is NaN, not finite).
TEST(TrainKernels, ExpSumKeepsNaN) {
  const IsaLevels isas;
  for (Isa level : isas.levels()) {
    set_isa(level);
    for (int64_t n : kSizes) {
      std::vector<float> x(static_cast<size_t>(n), -1.0f);
      x[size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(cpu::exp_sum(x.data(), nullptr, n, 0.0f))) << label("exp_sum", n);
    }
  }
}

}  // namespace

// The SR UNet and its diffusion (genperf/unet.h, genperf/diffusion.h): the config's checks and
// JSON round trip, the parameters the architecture declares, whole-network gradients against
// float64 finite differences, float against double, the schedules, the DDIM update's algebra,
// sampling that does not depend on the thread count, and the model files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/sr_metrics.h"
#include "genperf/sr_model.h"
#include "genperf/unet.h"

using namespace genperf;
using namespace genperf::sr;

namespace {

uint64_t seed_of(uint64_t seed, const char* test) {
  std::printf("[ seed ] %s: %llu\n", test, static_cast<unsigned long long>(seed));
  return seed;
}

// Two levels with attention on the second, two heads: every kind of layer, small.
UNetConfig tiny() {
  UNetConfig c;
  c.channels = 1, c.base = 8, c.mults = {1, 2}, c.res_blocks = 1, c.attention_levels = {1};
  c.head_channels = 8, c.groups = 4, c.timesteps = 50;
  return c;
}

template <typename F>
std::vector<F> randn(size_t n, Rng& rng) {
  std::vector<F> v(n);
  for (F& x : v) x = F(rng.normal());
  return v;
}

TEST(UNet, ConfigChecksAndRoundTrip) {
  UNetConfig c = tiny();
  c.attention_levels = {0, 1};
  c.prediction = "eps", c.schedule = "linear", c.transform = "log", c.residual_std = 0.25;
  const UNetConfig r = unet_config_from_json(unet_config_json(c), "round trip");
  EXPECT_EQ(unet_config_json(r).dump(), unet_config_json(c).dump());
  EXPECT_EQ(r.mults, c.mults);
  EXPECT_EQ(r.attention_levels, c.attention_levels);
  EXPECT_EQ(r.residual_std, 0.25);

  auto bad = [](const char* text, const char* says) {
    try {
      unet_config_from_json(Json::parse(text), "cfg.json");
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
    }
  };
  bad(R"({"base": 12, "groups": 8})", "groups");
  bad(R"({"mults": []})", "mults");
  bad(R"({"attention_levels": [5]})", "attention level 5");
  bad(R"({"prediction": "x0"})", "prediction");
  bad(R"({"base": "wide"})", "field base");
  bad(R"({"architectures": ["LlamaForCausalLM"]})", "architectures");
  bad(R"({"base": 16, "head_channels": 24, "groups": 8})", "heads of 24");
}

TEST(UNet, DeclaresItsParameters) {
  const UNet<float> net(tiny());
  // Spot checks of the names and layouts (filters [OC, K, K, IC], linear [OUT, IN]).
  EXPECT_EQ(net.param("conv_in.weight").shape, (std::vector<int64_t>{8, 3, 3, 2}));
  EXPECT_EQ(net.param("time.fc1.weight").shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(net.param("down.0.down.weight").shape, (std::vector<int64_t>{8, 3, 3, 8}));
  EXPECT_EQ(net.param("down.1.res.0.skip.weight").shape, (std::vector<int64_t>{16, 1, 1, 8}));
  EXPECT_EQ(net.param("down.1.attn.0.qkv.weight").shape, (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(net.param("up.1.res.0.conv1.weight").shape, (std::vector<int64_t>{16, 3, 3, 32}));
  EXPECT_EQ(net.param("up.0.res.0.norm1.weight").shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(net.param("out.conv.weight").shape, (std::vector<int64_t>{1, 3, 3, 8}));
  EXPECT_THROW(net.param("down.0.attn.0.qkv.weight"), Error);  // no attention on level 0
  // Offsets tile the buffer without gaps or overlaps.
  size_t next = 0;
  for (const ParamSpec& p : net.params()) {
    EXPECT_EQ(p.offset, next) << p.name;
    next += p.size();
  }
  EXPECT_EQ(next, net.weights().size());
}

TEST(UNet, RefusesSizesThatDoNotDivide) {
  UNet<float> net(tiny());
  std::vector<float> x(2 * 6 * 6), t(1, 3.f);
  EXPECT_THROW(net.forward(x.data(), t.data(), 1, 5, 6, false), Error);
  EXPECT_NO_THROW(net.forward(x.data(), t.data(), 1, 6, 6, false));
}

// Loss = sum(out * R): the analytic gradient of every parameter tensor (a few entries each) and
// of nothing else against central differences in float64.
TEST(UNet, GradientsMatchFiniteDifferences) {
  Rng rng(seed_of(31, "UNet.GradientsMatchFiniteDifferences"));
  UNet<double> net(tiny());
  net.init(7, /*zero_out=*/false);
  const int64_t B = 2, H = 4, W = 6;
  const std::vector<double> x = randn<double>(size_t(B * H * W * 2), rng), R = randn<double>(size_t(B * H * W), rng);
  const std::vector<double> t = {3, 41};
  auto loss = [&] {
    const double* y = net.forward(x.data(), t.data(), B, H, W, false);
    double s = 0;
    for (size_t i = 0; i < R.size(); ++i) s += y[i] * R[i];
    return s;
  };
  net.zero_grad();
  net.forward(x.data(), t.data(), B, H, W, true);
  net.backward(R.data());
  const std::vector<double> g(net.grads().begin(), net.grads().end());
  std::span<double> w = net.weights();
  double worst = 0;
  int checked = 0;
  for (const ParamSpec& p : net.params()) {
    for (size_t k : {size_t(0), p.size() / 2, p.size() - 1}) {
      const size_t i = p.offset + k;
      const double keep = w[i], h = 1e-5;
      w[i] = keep + h;
      const double up = loss();
      w[i] = keep - h;
      const double down = loss();
      w[i] = keep;
      const double fd = (up - down) / (2 * h);
      const double err = std::abs(fd - g[i]) / std::max(1.0, std::abs(fd));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-6) << p.name << "[" << k << "]: analytic " << g[i] << ", finite differences " << fd;
      ++checked;
    }
  }
  std::printf("checked %d gradient entries over %zu tensors, worst relative error %.2e\n", checked,
              net.params().size(), worst);
}

TEST(UNet, FloatAgreesWithDouble) {
  Rng rng(seed_of(32, "UNet.FloatAgreesWithDouble"));
  UNetConfig c = tiny();
  UNet<double> d(c);
  UNet<float> f(c);
  d.init(9, false);
  f.init(9, false);
  const int64_t B = 2, H = 8, W = 8, n = B * H * W;
  const std::vector<double> xd = randn<double>(size_t(2 * n), rng);
  const std::vector<float> xf(xd.begin(), xd.end());
  const std::vector<double> td = {0, 49};
  const std::vector<float> tf(td.begin(), td.end());
  const double* yd = d.forward(xd.data(), td.data(), B, H, W, false);
  const float* yf = f.forward(xf.data(), tf.data(), B, H, W, false);
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) num += (yf[i] - yd[i]) * (yf[i] - yd[i]), den += yd[i] * yd[i];
  EXPECT_LT(std::sqrt(num / den), 1e-5);
  EXPECT_GT(f.last_forward_flops(), 0);
}

// bf16 convolutions (UNet::set_bf16), whose operands the op rounds to bf16 exactly as its float64
// reference does (ImageOps.Conv2dBf16). A whole network is no place for a float64 reference of
// the rounding: where an activation lies within float's error of a rounding boundary, float and
// float64 round it apart by one bf16 step (0.4%), and the small output of a deep network, a
// difference of large activations, turns a few such flips into 1e-3 (measured on this tiny
// network: 2.7e-3; below 1e-7 on configs where no activation fell so near a boundary). So the network is held to bf16's expected error against the unrounded
// float64 one, forward and weight gradients: far above f32's (the rounding took place), within
// a few percent (it took place on operands, not on sums); and the training test below runs in
// bf16 too.
TEST(UNet, Bf16ConvolutionsStayWithinBf16Error) {
  Rng rng(seed_of(36, "UNet.Bf16ConvolutionsStayWithinBf16Error"));
  const UNetConfig c = tiny();
  UNet<double> d(c);
  UNet<float> f(c), f32(c);
  f.init(9, false);
  std::copy(f.weights().begin(), f.weights().end(), d.weights().begin());
  std::copy(f.weights().begin(), f.weights().end(), f32.weights().begin());
  f.set_bf16(true);
  EXPECT_TRUE(f.bf16());
  EXPECT_FALSE(f32.bf16());
  const int64_t B = 2, H = 8, W = 8, n = B * H * W;
  const std::vector<float> xf = randn<float>(size_t(2 * n), rng), gf = randn<float>(size_t(n), rng);
  const std::vector<double> xd(xf.begin(), xf.end()), gd(gf.begin(), gf.end()), td = {3, 41};
  const std::vector<float> tf(td.begin(), td.end());
  auto rel = [](auto a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < b.size(); ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += b[i] * b[i];
    return std::sqrt(num / den);
  };
  const double* yd = d.forward(xd.data(), td.data(), B, H, W, true);
  const std::vector<double> y(yd, yd + n);
  const double fwd = rel(f.forward(xf.data(), tf.data(), B, H, W, true), y);
  const double fwd32 = rel(f32.forward(xf.data(), tf.data(), B, H, W, true), y);
  d.zero_grad(), f.zero_grad(), f32.zero_grad();
  d.backward(gd.data()), f.backward(gf.data()), f32.backward(gf.data());
  const std::vector<double> g(d.grads().begin(), d.grads().end());
  const double bwd = rel(f.grads().data(), g), bwd32 = rel(f32.grads().data(), g);
  std::printf("relative rms against float64: bf16 %.2e / %.2e, f32 %.2e / %.2e (forward / weight gradients)\n", fwd,
              bwd, fwd32, bwd32);
  EXPECT_LT(fwd32, 1e-5);
  EXPECT_LT(bwd32, 1e-4);
  EXPECT_GT(fwd, 100 * fwd32);
  EXPECT_GT(bwd, 10 * bwd32);
  EXPECT_LT(fwd, 0.03);
  EXPECT_LT(bwd, 0.03);
}

TEST(Diffusion, Schedules) {
  for (const char* kind : {"cosine", "linear"}) {
    const Schedule s = Schedule::make(kind, 1000);
    ASSERT_EQ(s.abar.size(), 1000u);
    EXPECT_GT(s.abar.front(), 0.999) << kind;
    EXPECT_LT(s.abar.back(), 1e-4) << kind;
    for (size_t t = 1; t < s.abar.size(); ++t) ASSERT_LT(s.abar[t], s.abar[t - 1]) << kind << " " << t;
  }
  // Cosine: abar(t) = f(t + 1) / f(0) before clipping, f(t) = cos^2((t / T + s) / (1 + s) pi / 2).
  const Schedule s = Schedule::make("cosine", 1000);
  auto f = [](double t) { return std::pow(std::cos((t / 1000 + 0.008) / 1.008 * M_PI / 2), 2); };
  EXPECT_NEAR(s.abar[499], f(500) / f(0), 1e-12);
  EXPECT_THROW(Schedule::make("sigmoid", 10), Error);
  EXPECT_EQ(sampler_steps(1000, 4, "trailing"), (std::vector<int64_t>{999, 749, 499, 249}));
  EXPECT_EQ(sampler_steps(10, 10, "trailing").back(), 0);
  EXPECT_EQ(sampler_steps(1000, 4, "linspace"), (std::vector<int64_t>{999, 666, 333, 0}));
  EXPECT_EQ(sampler_steps(1000, 1, "linspace"), (std::vector<int64_t>{999}));
  EXPECT_THROW(sampler_steps(1000, 1001, "trailing"), Error);
  EXPECT_THROW(sampler_steps(1000, 4, "uniform"), Error);
  std::vector<int64_t> all(1000);
  for (int64_t t = 0; t < 1000; ++t) all[size_t(t)] = 999 - t;
  EXPECT_EQ(sampler_steps(1000, 1000, "linspace"), all);
  EXPECT_EQ(sampler_steps(1000, 1000, "trailing"), all);
}

// From x_t made of a known x0 and eps, a prediction equal to the true v (or eps) takes DDIM
// (eta 0) to sqrt(a') x0 + sqrt(1 - a') eps, and to x0 itself at the last step.
TEST(Diffusion, DdimUpdateFollowsTheAlgebra) {
  Rng rng(seed_of(33, "Diffusion.DdimUpdateFollowsTheAlgebra"));
  const int64_t n = 50;
  const std::vector<double> x0 = randn<double>(n, rng), eps = randn<double>(n, rng);
  const double a = 0.3, ap = 0.8;
  for (bool v_pred : {true, false}) {
    for (double a_prev : {ap, 1.0}) {
      std::vector<double> x(n), pred(n);
      for (int64_t i = 0; i < n; ++i) {
        x[size_t(i)] = std::sqrt(a) * x0[size_t(i)] + std::sqrt(1 - a) * eps[size_t(i)];
        pred[size_t(i)] = v_pred ? std::sqrt(a) * eps[size_t(i)] - std::sqrt(1 - a) * x0[size_t(i)] : eps[size_t(i)];
      }
      ddim_update(x.data(), pred.data(), static_cast<const double*>(nullptr), n, a, a_prev, 0.0, v_pred);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(x[size_t(i)], std::sqrt(a_prev) * x0[size_t(i)] + std::sqrt(1 - a_prev) * eps[size_t(i)], 1e-12);
    }
  }
}

// Gaussian data, x0 ~ N(0, s^2): the exact prediction is E[x0 | x_t] = sqrt(a) s^2 x / (a s^2 + 1 - a),
// and the ODE that DDIM (eta 0) and DPM-Solver++(2M) integrate carries x_t / sqrt(a s^2 + 1 - a)
// unchanged. Over steps even in lambda from abar 0.05 to 0.99, DPM++(2M) is second order (its
// error falls about 4x when 20 steps double) and DDIM first order (2x); the first step is DDIM's.
TEST(Diffusion, Dpm2mSolvesTheGaussianOdeToSecondOrder) {
  const double s2 = 0.25;
  auto abar = [](double lambda) { return 1 / (1 + std::exp(-2 * lambda)); };
  const double l0 = 0.5 * std::log(0.05 / 0.95), l1 = 0.5 * std::log(0.99 / 0.01);
  auto solve = [&](bool dpm, int64_t S, bool v_pred, int64_t stop_after) {
    std::vector<double> x = {1.0}, pred(1), x0_last(1);
    double h_last = 0;
    for (int64_t k = 0; k < S && k < stop_after; ++k) {
      const double a = abar(l0 + double(k) * (l1 - l0) / double(S)), ap = abar(l0 + double(k + 1) * (l1 - l0) / double(S));
      const double sa = std::sqrt(a), sn = std::sqrt(1 - a), x0h = sa * s2 * x[0] / (a * s2 + 1 - a);
      const double eps = (x[0] - sa * x0h) / sn;
      pred[0] = v_pred ? sa * eps - sn * x0h : eps;
      if (dpm)
        h_last = dpm2m_update(x.data(), pred.data(), x0_last.data(), 1, a, ap, h_last, v_pred);
      else
        ddim_update(x.data(), pred.data(), static_cast<const double*>(nullptr), 1, a, ap, 0.0, v_pred);
    }
    return x[0];
  };
  const double a_t = abar(l0), a_0 = abar(l1);
  const double exact = std::sqrt((a_0 * s2 + 1 - a_0) / (a_t * s2 + 1 - a_t));
  for (bool v_pred : {true, false}) {
    EXPECT_NEAR(solve(true, 10, v_pred, 1), solve(false, 10, v_pred, 1), 1e-14);
    const double ddim20 = std::fabs(solve(false, 20, v_pred, 99) - exact), ddim40 = std::fabs(solve(false, 40, v_pred, 99) - exact);
    const double dpm20 = std::fabs(solve(true, 20, v_pred, 99) - exact), dpm40 = std::fabs(solve(true, 40, v_pred, 99) - exact);
    std::printf("%s: relative error at 20 and 40 steps: DDIM %.3g %.3g, DPM++(2M) %.3g %.3g\n", v_pred ? "v" : "eps",
                ddim20 / exact, ddim40 / exact, dpm20 / exact, dpm40 / exact);
    EXPECT_LT(dpm20, 0.1 * ddim20);
    EXPECT_NEAR(ddim20 / ddim40, 2.0, 0.3);
    EXPECT_NEAR(dpm20 / dpm40, 4.0, 0.6);
  }
  // The last step (a_prev = 1) gives x0h.
  std::vector<double> x = {0.7}, pred = {0.2}, x0_last = {5.0};
  const double a = 0.9;
  dpm2m_update(x.data(), pred.data(), x0_last.data(), 1, a, 1.0, 0.3, false);
  EXPECT_NEAR(x[0], (0.7 - std::sqrt(1 - a) * 0.2) / std::sqrt(a), 1e-15);
}

// The SDE form (eta 1) against the same step written as k-diffusion writes it, in the variance-
// exploding variables x / alpha and sigma / alpha: with s = sigma / alpha and h = ln(s / s'),
//   x'/alpha' = (s' / s) e^-h x / alpha + (1 - e^-2h) D + s' sqrt(1 - e^-2h) z.
TEST(Diffusion, Dpm2mSdeStepIsTheVarianceExplodingOne) {
  Rng rng(seed_of(35, "Diffusion.Dpm2mSdeStepIsTheVarianceExplodingOne"));
  const int64_t n = 40;
  const std::vector<double> x_in = randn<double>(n, rng), pred = randn<double>(n, rng), last_in = randn<double>(n, rng),
                            z = randn<double>(n, rng);
  const double a = 0.2, ap = 0.6, h_last = 0.35;
  for (bool v_pred : {true, false}) {
    std::vector<double> x = x_in, x0_last = last_in;
    const double h = dpm2m_update(x.data(), pred.data(), x0_last.data(), n, a, ap, h_last, v_pred, 1.0, z.data());
    const double s = std::sqrt((1 - a) / a), sp = std::sqrt((1 - ap) / ap), hh = std::log(s / sp);
    EXPECT_NEAR(h, hh, 1e-14);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i);
      const double x0h = x0_estimate(x_in[k], pred[k], std::sqrt(a), std::sqrt(1 - a), v_pred);
      EXPECT_NEAR(x0_last[k], x0h, 1e-14);
      const double d = x0h + (x0h - last_in[k]) * hh / (2 * h_last);
      const double ve = sp / s * std::exp(-hh) * x_in[k] / std::sqrt(a) + (1 - std::exp(-2 * hh)) * d +
                        sp * std::sqrt(1 - std::exp(-2 * hh)) * z[k];
      ASSERT_NEAR(x[k], std::sqrt(ap) * ve, 1e-13) << i;
    }
  }
  // eta 0 is the ODE solver, noise or not; noise is required where eta is not 0.
  std::vector<double> x1 = x_in, x2 = x_in, l1 = last_in, l2 = last_in;
  dpm2m_update(x1.data(), pred.data(), l1.data(), n, a, ap, h_last, true);
  dpm2m_update(x2.data(), pred.data(), l2.data(), n, a, ap, h_last, true, 0.0, z.data());
  EXPECT_EQ(x1, x2);
  EXPECT_THROW(dpm2m_update(x1.data(), pred.data(), l1.data(), n, a, ap, h_last, true, 1.0), Error);
}

// Gaussian data again, sampled from pure noise over the cosine schedule's trailing steps with the
// exact prediction x0h = g x. The ODE form ends with the data's variance s^2 within 1% at 25
// steps. The SDE form's variance is computed exactly, as the update is linear: the covariance of
// (x, x0_last) goes through M = [[keep + pull (1 + w) g, -pull w], [g, 0]] and spread^2 is added.
// Its excess over s^2 (the solver's discretization error, +6.3% at 25 steps) falls as the steps
// grow; the samples' variance agrees with it within 4 standard errors, so the noise has its
// scale. Only the SDE's samples from one starting noise spread: the start is forgotten.
TEST(Diffusion, Dpm2mSdeSamplesTheGaussianData) {
  Rng rng(seed_of(36, "Diffusion.Dpm2mSdeSamplesTheGaussianData"));
  const double s2 = 0.25;
  const Schedule sched = Schedule::make("cosine", 1000);
  const int64_t n = 40000;
  auto step_at = [&](const std::vector<int64_t>& steps, size_t k) {
    return std::pair{sched.abar[size_t(steps[k])], k + 1 < steps.size() ? sched.abar[size_t(steps[k + 1])] : 1.0};
  };
  auto run = [&](double eta, const std::vector<double>& start, int64_t S) {
    const std::vector<int64_t> steps = sampler_steps(1000, S, "trailing");
    std::vector<double> x = start, pred(static_cast<size_t>(n)), x0_last(static_cast<size_t>(n)),
                        z(static_cast<size_t>(n));
    double h_last = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto [a, ap] = step_at(steps, k);
      const double sa = std::sqrt(a), sn = std::sqrt(1 - a);
      for (int64_t i = 0; i < n; ++i) {
        const double x0h = sa * s2 * x[size_t(i)] / (a * s2 + 1 - a);
        pred[size_t(i)] = sa * (x[size_t(i)] - sa * x0h) / sn - sn * x0h;  // v
        z[size_t(i)] = rng.normal();
      }
      h_last = dpm2m_update(x.data(), pred.data(), x0_last.data(), n, a, ap, h_last, true, eta, z.data());
    }
    return x;
  };
  auto exact_sde = [&](int64_t S) {  // the variance of the SDE's result from N(0, 1)
    const std::vector<int64_t> steps = sampler_steps(1000, S, "trailing");
    double cxx = 1, cxl = 0, cll = 0, h_last = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto [a, ap] = step_at(steps, k);
      const double g = std::sqrt(a) * s2 / (a * s2 + 1 - a);
      if (ap >= 1) return g * g * cxx;
      const double h = 0.5 * std::log(ap / (1 - ap)) - 0.5 * std::log(a / (1 - a));
      const double keep = std::sqrt((1 - ap) / (1 - a)) * std::exp(-h), pull = -std::sqrt(ap) * std::expm1(-2 * h);
      const double w = h_last > 0 ? 0.5 * h / h_last : 0, m00 = keep + pull * (1 + w) * g, m01 = -pull * w;
      const double xx = m00 * m00 * cxx + 2 * m00 * m01 * cxl + m01 * m01 * cll - (1 - ap) * std::expm1(-2 * h);
      cxl = g * (m00 * cxx + m01 * cxl), cll = g * g * cxx, cxx = xx, h_last = h;
    }
    return cxx;
  };
  auto variance = [](const std::vector<double>& v) {
    double m = 0, q = 0;
    for (double x : v) m += x;
    m /= double(v.size());
    for (double x : v) q += (x - m) * (x - m);
    return q / double(v.size());
  };
  const std::vector<double> noise = randn<double>(size_t(n), rng), one(static_cast<size_t>(n), 1.3);
  EXPECT_NEAR(variance(run(0, noise, 25)), s2, 0.01 * s2);
  const double se = std::sqrt(2.0 / double(n));  // relative standard error of a variance
  for (int64_t S : {25, 100}) {
    const double sampled = variance(run(1, noise, S)) / s2 - 1, exact = exact_sde(S) / s2 - 1;
    std::printf("SDE, %lld steps: variance / the data's - 1: %+.4f sampled (%lld values), %+.4f exact\n",
                (long long)S, sampled, (long long)n, exact);
    EXPECT_NEAR(sampled, exact, 4 * se) << S;
  }
  EXPECT_NEAR(exact_sde(25) / s2 - 1, 0.063, 0.002);
  EXPECT_LT(exact_sde(400) / s2 - 1, 0.05 * (exact_sde(25) / s2 - 1));
  const std::vector<double> ode_one = run(0, one, 25);
  EXPECT_EQ(*std::min_element(ode_one.begin(), ode_one.end()), *std::max_element(ode_one.begin(), ode_one.end()));
  EXPECT_NEAR(variance(run(1, one, 25)) / exact_sde(25), 1, 4 * se);
}

// At 8x8 the network's products are too small for a GEMM to split them among threads; at 32x32
// with 32 channels they are not (oneDNN's threaded sgemm changed the bits at the AVX2 level).
class SamplingThreads : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Diffusion, SamplingThreads, ::testing::Values(8, 32));

TEST_P(SamplingThreads, SamplingIsTheSameForAnyThreadCount) {
  Rng rng(seed_of(34, "Diffusion.SamplingIsTheSameForAnyThreadCount"));
  UNetConfig c = tiny();
  const int64_t H = GetParam(), W = H, B = 2, n = B * H * W;
  if (H > 8) c.base = 32, c.head_channels = 32;
  UNet<float> net(c);
  net.init(11, false);
  const Schedule s = Schedule::of(net.config());
  const std::vector<float> cond = randn<float>(size_t(n), rng);
  const std::vector<uint64_t> seeds = {5, 6};
  const int saved = num_threads();
  std::vector<std::vector<float>> runs;
  for (const char* sampler : {"ddim", "ddpm", "dpm++2m-sde"})
    for (int nt : {1, 2}) {
      set_num_threads(nt);
      std::vector<float> out(static_cast<size_t>(n));
      SamplerOptions o;
      o.sampler = sampler, o.steps = 5;
      sample(net, s, cond.data(), out.data(), B, H, W, o, seeds);
      runs.push_back(out);
    }
  set_num_threads(saved);
  EXPECT_EQ(runs[0], runs[1]) << "ddim";
  EXPECT_EQ(runs[2], runs[3]) << "ddpm";
  EXPECT_EQ(runs[4], runs[5]) << "dpm++2m-sde";
  EXPECT_NE(runs[0], runs[2]);
  EXPECT_NE(runs[2], runs[4]);
  // The two tiles differ (their own noise).
  EXPECT_NE(std::vector<float>(runs[0].begin(), runs[0].begin() + n / 2),
            std::vector<float>(runs[0].begin() + n / 2, runs[0].end()));
}

class LossTrains : public ::testing::TestWithParam<bool> {};

TEST_P(LossTrains, TheNetwork) {
  // A few hundred AdamW-free SGD steps on one fixed batch lower the loss: the gradients point
  // downhill through the whole pipeline (noise, target, network, loss), in f32 and with bf16
  // convolutions.
  Rng data(seed_of(35, "Diffusion.LossTrainsTheNetwork"));
  UNet<float> net(tiny());
  net.init(12);
  net.set_bf16(GetParam());
  const Schedule s = Schedule::of(net.config());
  const int64_t B = 4, H = 8, W = 8, n = B * H * W;
  std::vector<float> cond = randn<float>(size_t(n), data), x0(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x0[size_t(i)] = 0.5f * cond[size_t(i)];  // a target the condition predicts
  auto mean_loss = [&](uint64_t seed) {
    Rng r(seed);
    double l = 0;
    for (int k = 0; k < 8; ++k) l += diffusion_loss(net, s, cond.data(), x0.data(), B, H, W, r, false);
    return l / 8;
  };
  const double before = mean_loss(100);
  Rng r(1);
  for (int step = 0; step < 150; ++step) {
    net.zero_grad();
    diffusion_loss(net, s, cond.data(), x0.data(), B, H, W, r);
    std::span<float> w = net.weights(), g = net.grads();
    for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.05f * g[i];
  }
  const double after = mean_loss(100);
  std::printf("loss %.4f -> %.4f\n", before, after);
  EXPECT_LT(after, 0.8 * before);
}
INSTANTIATE_TEST_SUITE_P(Diffusion, LossTrains, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Bf16" : "F32"; });

// One forward and one DDIM step against tests/models/unet_ref.py, a float64 NumPy reference
// written from the documented architecture: weights from the model files (f32 values), inputs
// and outputs as raw float64.
TEST(UNet, MatchesNumPyReference) {
  Rng rng(seed_of(36, "UNet.MatchesNumPyReference"));
  genperf::testing::TempDir dir("unetref");
  for (const char* prediction : {"v", "eps"}) {
    UNetConfig c = tiny();
    c.prediction = prediction;
    c.res_blocks = 2;
    c.attention_levels = {0, 1};
    UNet<float> f(c);
    f.init(21, false);
    save_sr_model(dir / "m", f);
    UNet<double> net(c);
    std::copy(f.weights().begin(), f.weights().end(), net.weights().begin());
    const int64_t B = 2, H = 8, W = 4, n = B * H * W;
    const std::vector<double> in = randn<double>(size_t(2 * n), rng);
    {
      std::FILE* fp = std::fopen((dir / "in.f64").c_str(), "wb");
      ASSERT_TRUE(fp);
      std::fwrite(in.data(), sizeof(double), in.size(), fp);
      std::fclose(fp);
    }
    const int64_t ti = 30, tp = 20;
    const std::string cmd = std::string(GENPERF_PYTHON) + " " + GENPERF_TEST_DIR + "/models/unet_ref.py " + (dir / "m") +
                            " " + (dir / "in.f64") + " 2 8 4 30 20 " + (dir / "out.f64");
    ASSERT_EQ(genperf::testing::run_command(cmd), 0) << cmd;
    std::vector<double> ref(static_cast<size_t>(2 * n));
    {
      std::FILE* fp = std::fopen((dir / "out.f64").c_str(), "rb");
      ASSERT_TRUE(fp);
      ASSERT_EQ(std::fread(ref.data(), sizeof(double), ref.size(), fp), ref.size());
      std::fclose(fp);
    }
    // genperf: concat(x, cond) channel-wise, the forward, then the DDIM update.
    std::vector<double> xin(static_cast<size_t>(2 * n)), t(static_cast<size_t>(B), double(ti));
    for (int64_t i = 0; i < n; ++i) xin[size_t(2 * i)] = in[size_t(i)], xin[size_t(2 * i + 1)] = in[size_t(n + i)];
    const double* pred = net.forward(xin.data(), t.data(), B, H, W, false);
    std::vector<double> x(in.begin(), in.begin() + n);
    const Schedule s = Schedule::of(c);
    ddim_update(x.data(), pred, static_cast<const double*>(nullptr), n, s.abar[ti], s.abar[tp], 0.0, c.prediction == "v");
    double worst_pred = 0, worst_x = 0, scale = 0;
    for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(ref[size_t(i)]));
    for (int64_t i = 0; i < n; ++i) {
      worst_pred = std::max(worst_pred, std::abs(pred[i] - ref[size_t(i)]));
      worst_x = std::max(worst_x, std::abs(x[size_t(i)] - ref[size_t(n + i)]));
    }
    std::printf("%s: largest difference %.2e in the prediction (scale %.2f), %.2e after the DDIM step\n", prediction,
                worst_pred, scale, worst_x);
    EXPECT_GT(scale, 1e-3);
    EXPECT_LT(worst_pred, 1e-5 * std::max(1.0, scale));
    EXPECT_LT(worst_x, 1e-5 * std::max(1.0, scale));
  }
}

TEST(Diffusion, ModelFilesRoundTrip) {
  genperf::testing::TempDir dir("srmodel");
  UNet<float> net(tiny());
  net.init(13, false);
  save_sr_model(dir / "m", net);
  const UNet<float> back = load_sr_model(dir / "m");
  EXPECT_EQ(unet_config_json(back.config()).dump(), unet_config_json(net.config()).dump());
  EXPECT_TRUE(std::equal(back.weights().begin(), back.weights().end(), net.weights().begin()));
  try {
    load_sr_model(dir / "nothing");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// A map sampled in overlapping tiles is one sample: with a network that predicts zero everywhere
// (so no tile's prediction depends on its context), the tiled sample equals the one-tile sample
// bit for bit (tiles sampled apart and blended would average independent noise in the overlaps).
// With a network that does depend on context, the batch of tiles changes no more than rounding.
TEST(Upscale, TilesShareOneSample) {
  UNetConfig c = tiny();
  c.scale = 2, c.transform = "linear", c.residual_std = 0.7;
  UNet<float> net(c);
  net.init(seed_of(17, "Upscale.TilesShareOneSample"), false);
  Map lr(16, 24);
  Rng rng(18);
  for (double& v : lr.v) v = 2 + rng.normal();
  UpscaleOptions o;
  o.samples = 2, o.seed = 5, o.sampler.steps = 4, o.sampler.sampler = "ddpm";  // noise at every step too
  o.tile = 16, o.overlap = 0.5, o.batch = 3;
  const Upscaled tiled = upscale(net, lr, o, "lr");
  o.batch = 1;
  const Upscaled one_by_one = upscale(net, lr, o, "lr");
  EXPECT_GT(tiled.tiles, 4);
  // oneDNN picks its convolutions' blocking by the batch, so rounding may differ, no more.
  double most = 0;
  for (size_t i = 0; i < tiled.mean.v.size(); ++i)
    most = std::max({most, std::fabs(tiled.mean.v[i] - one_by_one.mean.v[i]), std::fabs(tiled.sd.v[i] - one_by_one.sd.v[i])});
  EXPECT_LT(most, 1e-4);

  std::fill(net.weights().begin(), net.weights().end(), 0.f);
  o.keep_samples = true;
  const Upscaled zero_tiled = upscale(net, lr, o, "lr");
  ASSERT_EQ(zero_tiled.samples.size(), 2u);
  o.tile = 32;
  const Upscaled zero_fewer = upscale(net, lr, o, "lr");
  EXPECT_LT(zero_fewer.tiles, zero_tiled.tiles);
  EXPECT_EQ(zero_tiled.samples[0].v, zero_fewer.first.v);
  EXPECT_EQ(zero_tiled.first.v, zero_tiled.samples[0].v);
  EXPECT_NE(zero_tiled.samples[0].v, zero_tiled.samples[1].v);
  // The residual is the scaled noise: unit variance in network units, the same in every region.
  const Units u = Units::of(lr, "linear", "lr");
  const Map cond = [&] {
    Map y = lr;
    for (double& v : y.v) v = u.to(v);
    return bicubic_up(y, 2);
  }();
  double edge = 0, overlap = 0;
  int64_t n_edge = 0, n_overlap = 0;
  for (int64_t y = 0; y < 32; ++y)
    for (int64_t x = 0; x < 48; ++x) {
      const double r = (u.to(zero_tiled.first.at(y, x)) - cond.at(y, x)) / c.residual_std;
      (x < 8 ? edge : overlap) += r * r;
      ++(x < 8 ? n_edge : n_overlap);
    }
  EXPECT_NEAR(edge / double(n_edge) / (overlap / double(n_overlap)), 1.0, 0.35);
}

// Back-projection: from a map that knows nothing of the input (another field), ten rounds bring
// its degradation onto the input, and the correction is nearly all in the scales the input holds
// (bicubic up-sampling leaks a little above them).
TEST(Upscale, BackProjectionMatchesTheInputAndKeepsTheFineScales) {
  Degradation d;
  d.scale = 4;
  DustFieldSpec f;
  f.size = 64, f.seed = 21;
  const Map hr = dust_field(f);
  const Map lr = degrade(hr, d);
  f.seed = 22;
  const Map before = dust_field(f);
  Map x = before;
  const double start = consistency(x, lr, d);
  const double left = back_project(x, lr, d, 10, 1e-12);
  std::printf("consistency %.4g -> %.4g after 10 rounds\n", start, left);
  EXPECT_GT(start, 0.2);
  EXPECT_NEAR(left, consistency(x, lr, d), 1e-12);
  EXPECT_LT(left, 0.01);
  // The change's power above the input's Nyquist (k > 8) against the map's own there.
  Map change = x;
  for (size_t i = 0; i < x.v.size(); ++i) change.v[i] -= before.v[i];
  const auto p_change = power_spectrum(change), p_map = power_spectrum(before);
  double fine_change = 0, fine_map = 0, coarse_change = 0;
  for (size_t k = 1; k < p_map.size(); ++k) (k > 8 ? fine_change : coarse_change) += p_change[k], fine_map += k > 8 ? p_map[k] : 0;
  std::printf("the change's power above k = 8: %.3g of its power below, %.3g of the map's above\n",
              fine_change / coarse_change, fine_change / fine_map);
  EXPECT_LT(fine_change, 0.01 * coarse_change);  // 99% of the correction is in the input's scales

  // A consistent map is left as it is; a blank input pixel pulls on nothing.
  Map same = hr;
  EXPECT_EQ(back_project(same, lr, d, 10, 0), 0.0);
  EXPECT_EQ(same.v, hr.v);
  Map holed = lr;
  holed.at(3, 5) = std::nan("");
  Map y = before;
  back_project(y, holed, d, 10, 0);
  for (double v : y.v) ASSERT_TRUE(std::isfinite(v));
  EXPECT_THROW(back_project(y, degrade(hr, Degradation{2}), d, 1, 0), Error);
}

// Projected samples: at the end or at every step, the sample's degradation is the input; the
// projection at every step feeds back into the network's later steps.
TEST(Upscale, ProjectedSamplesMatchTheirInput) {
  UNetConfig c = tiny();
  c.scale = 2, c.transform = "log", c.residual_std = 0.5;
  UNet<float> net(c);
  net.init(seed_of(23, "Upscale.ProjectedSamplesMatchTheirInput"), false);
  DustFieldSpec f;
  f.size = 32, f.seed = 24;
  Degradation d;
  d.scale = 2;
  const Map lr = degrade(dust_field(f), d);
  UpscaleOptions o;
  o.samples = 2, o.seed = 3, o.sampler.steps = 4, o.tile = 16, o.overlap = 0.25, o.keep_samples = true;
  o.degradation = d, o.project_iters = 30;
  const Upscaled none = upscale(net, lr, o, "lr");
  o.project = "end";
  const Upscaled end = upscale(net, lr, o, "lr");
  o.project = "every";
  const Upscaled every = upscale(net, lr, o, "lr");
  const double c_none = consistency(none.samples[0], lr, d), c_end = consistency(end.samples[0], lr, d),
               c_every = consistency(every.samples[1], lr, d);
  std::printf("consistency of a sample: none %.3g, end %.3g, every %.3g\n", c_none, c_end, c_every);
  EXPECT_GT(c_none, 0.01);
  EXPECT_LT(c_end, 1e-3);
  EXPECT_LT(c_every, 1e-3);
  double moved = 0;
  for (size_t i = 0; i < end.first.v.size(); ++i) moved = std::max(moved, std::fabs(end.first.v[i] - every.first.v[i]));
  EXPECT_GT(moved, 1e-3);
  // The second-order sampler: another sample of the same noise, as consistent.
  o.project = "end", o.sampler.sampler = "dpm++2m";
  const Upscaled dpm = upscale(net, lr, o, "lr");
  EXPECT_LT(consistency(dpm.samples[0], lr, d), 1e-3);
  EXPECT_NE(dpm.first.v, end.first.v);
  EXPECT_EQ(upscale(net, lr, o, "lr").first.v, dpm.first.v);
  o.sampler.sampler = "ddim";
  o.degradation.scale = 4;
  EXPECT_THROW(upscale(net, lr, o, "lr"), Error);
  o.degradation.scale = 2, o.project = "sometimes";
  EXPECT_THROW(upscale(net, lr, o, "lr"), Error);
}

}  // namespace

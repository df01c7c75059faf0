// AdamW, the learning-rate schedule, gradient norm and clipping (src/train/optim.cpp) against
// hand-computed values in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "genperf/error.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260304;

TEST(TrainOptim, ScheduleWarmupThenCosine) {
  const LrSchedule s{1.0f, 0.1f, 4, 14};
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4), 1.0f);                     // cosine starts at max
  EXPECT_NEAR(s.at(9), 0.1 + 0.5 * 0.9, 1e-6);        // half way
  EXPECT_NEAR(s.at(13), 0.1 + 0.5 * (1 + std::cos(M_PI * 0.9)) * 0.9, 1e-6);
  EXPECT_FLOAT_EQ(s.at(14), 0.1f);
  EXPECT_FLOAT_EQ(s.at(1000), 0.1f);
  const LrSchedule flat{0.5f, 0.5f, 0, 10};
  EXPECT_FLOAT_EQ(flat.at(0), 0.5f);
}

TEST(TrainOptim, AdamWMatchesFormula) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  Rng r(kSeed);
  const size_t n = 40;
  const AdamWOptions o{0.8f, 0.9f, 1e-6f, 0.05f};
  auto p0 = randn(r, n);
  std::vector<float> p = cast<float>(p0);
  std::vector<double> pd = p0, m(n, 0.0), v(n, 0.0);
  const std::vector<ParamSegment> segs = {{0, 25, true}, {25, 15, false}};
  AdamW opt(n, o);
  for (int t = 1; t <= 3; ++t) {
    const auto g = randn(r, n);
    const float lr = 0.01f * float(t);
    opt.step(p, cast<float>(g), segs, lr);
    for (size_t i = 0; i < n; ++i) {
      const double gi = double(float(g[i]));
      if (i < 25) pd[i] *= 1.0 - double(lr) * double(o.weight_decay);
      m[i] = o.beta1 * m[i] + (1 - double(o.beta1)) * gi;
      v[i] = o.beta2 * v[i] + (1 - double(o.beta2)) * gi * gi;
      const double mh = m[i] / (1 - std::pow(double(o.beta1), t)), vh = v[i] / (1 - std::pow(double(o.beta2), t));
      pd[i] -= double(lr) * mh / (std::sqrt(vh) + double(o.eps));
    }
    EXPECT_LT(rel_error(p, pd), 1e-6) << "step " << t;
  }
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_EQ(opt.state_bytes(), 2 * n * sizeof(float));
  std::vector<float> wrong(n + 1);
  EXPECT_THROW(opt.step(wrong, cast<float>(randn(r, n)), segs, 0.1f), Error);
  EXPECT_THROW(AdamW(4, AdamWOptions{1.0f, 0.9f, 1e-8f, 0.0f}), Error);
}

TEST(TrainOptim, ClippingByGlobalNorm) {
  std::vector<float> g = {3, 4, 0, 0};
  EXPECT_DOUBLE_EQ(grad_norm(g), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g, 10.0), 5.0);  // under the limit: untouched
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g, 1.0), 5.0);
  EXPECT_NEAR(grad_norm(g), 1.0, 1e-6);
  EXPECT_NEAR(g[1] / g[0], 4.0 / 3.0, 1e-6);
  std::vector<float> bad = {1, NAN};
  EXPECT_THROW(clip_grad_norm(bad, 1.0), Error);
}

TEST(TrainOptim, NormIndependentOfThreadCount) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  Rng r(kSeed + 1);
  const auto g = cast<float>(randn(r, 300000));
  const int saved = num_threads();
  set_num_threads(1);
  const double one = grad_norm(g);
  set_num_threads(2);
  const double two = grad_norm(g);
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&one, &two, sizeof one), 0);
}

TEST(TrainOptim, StepFlopsCountsMatmulsAndAttention) {
  LlamaConfig c;  // the 110M shape
  const double n_matmul = 12.0 * (768.0 * 768 * 4 + 3.0 * 768 * 2048) + 32000.0 * 768;
  const double attn = 4.0 * 12 * 64 * (512.0 * 513 / 2);
  EXPECT_DOUBLE_EQ(train_step_flops(c, 1, 512), 6 * n_matmul * 512 + 3 * 12 * attn);
}

}  // namespace

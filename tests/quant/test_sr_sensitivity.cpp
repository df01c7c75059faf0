// The sensitivity map and the allocation on the SR UNet (the second model family): its
// calibration scores the reference itself at zero and coarser formats higher; the map is
// measured in its metric; an allocation under a budget is feasible and its achieved error is
// near the predicted sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/model_family.h"
#include "genperf/report.h"
#include "genperf/sensitivity.h"
#include "common/test_util.h"

namespace genperf {
namespace {

sr::UNetConfig small() {
  sr::UNetConfig c;
  c.channels = 1, c.base = 32, c.mults = {1, 2}, c.res_blocks = 1, c.attention_levels = {1};
  c.head_channels = 32, c.groups = 8, c.timesteps = 100, c.transform = "log";
  return c;
}

struct SrSensitivity : ::testing::Test {
  static void SetUpTestSuite() {
    dir = new genperf::testing::TempDir("srsens");
    sr::UNet<float> net(small());
    net.init(11, false);  // every layer drawn, none zero: each tensor matters
    sr::save_sr_model(*dir / "model", net);
    ck = new Checkpoint(load_checkpoint(*dir / "model"));
    CalibrationOptions o;
    o.crops = 4, o.crop = 32, o.seed = 5;
    cal = make_calibration(*ck, "synthetic:2:64:900", o).release();
  }
  static void TearDownTestSuite() {
    delete cal;
    delete ck;
    delete dir;
  }
  static genperf::testing::TempDir* dir;
  static Checkpoint* ck;
  static Calibration* cal;
};
genperf::testing::TempDir* SrSensitivity::dir = nullptr;
Checkpoint* SrSensitivity::ck = nullptr;
Calibration* SrSensitivity::cal = nullptr;

TEST_F(SrSensitivity, ScoresTheReferenceAtZeroAndCoarserFormatsHigher) {
  EXPECT_STREQ(cal->metric(), "rel_mse");
  EXPECT_EQ(cal->tokens(), 4 * 32 * 32);
  const CalibrationScore same = cal->score_with({});
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_EQ(same.dloss, 0.0);
  EXPECT_TRUE(std::isnan(same.top1));
  const std::string n = "down.1.res.0.conv2.weight";
  const Tensor w = ck->tensors.at(n);
  const double q8 = cal->score_with({{n, quantize_matrix(w, DType::Q8_0, {}, n)}}).kl;
  const double q4 = cal->score_with({{n, quantize_matrix(w, DType::Q4_0, {}, n)}}).kl;
  std::printf("%s: rel_mse q8_0 %.3g, q4_0 %.3g\n", n.c_str(), q8, q4);
  EXPECT_GT(q8, 0);
  EXPECT_GT(q4, 4 * q8);
  // The same data from the same seed: the same reference.
  CalibrationOptions o;
  o.crops = 4, o.crop = 32, o.seed = 5;
  EXPECT_EQ(make_calibration(*ck, "synthetic:2:64:900", o)->reference_nll(), cal->reference_nll());
}

TEST_F(SrSensitivity, MapAndAllocation) {
  SensitivityOptions so;
  so.formats = {DType::Q8_0, DType::Q4_0};
  const SensitivityMap m = measure_sensitivity(*ck, *cal, so);
  EXPECT_EQ(m.metric, "rel_mse");
  EXPECT_EQ(m.tensors.size(), family_of(*ck).quantizable(*ck).size());
  for (const SensitivityEntry& e : m.entries) EXPECT_GT(e.kl, 0) << e.tensor << " " << dtype_name(e.format);
  // The JSON map keeps the metric.
  const std::string prefix = *dir / "map";
  write_sensitivity(m, prefix);
  EXPECT_EQ(read_sensitivity_json(prefix + ".json").metric, "rel_mse");
  EXPECT_NE(read_text_file(prefix + ".svg").find("rel_mse"), std::string::npos);

  AllocationReport r;
  const QuantPlan plan = plan_for_budget(m, Budget::bpw(6.0), &r);
  EXPECT_LE(r.bpw, 6.0);
  EXPECT_EQ(r.metric, "rel_mse");
  const CalibrationScore got = cal->score(quantize_checkpoint(*ck, plan, {}));
  std::printf("auto@6: %s; achieved rel_mse %.4g\n", r.summary().c_str(), got.kl);
  // Errors of different tensors add nearly (the additivity assumption), within a factor of 2.
  EXPECT_GT(got.kl, r.predicted / 2);
  EXPECT_LT(got.kl, r.predicted * 2);
}

TEST_F(SrSensitivity, BadCalibrationIsNamed) {
  CalibrationOptions o;
  o.crop = 34;  // a multiple of the network's 2, not of the scale 4
  try {
    make_calibration(*ck, "synthetic:1:64:1", o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--crop 34"), std::string::npos) << e.what();
  }
  o.crop = 128;
  try {
    make_calibration(*ck, "synthetic:1:64:1", o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than one crop of 128"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace genperf

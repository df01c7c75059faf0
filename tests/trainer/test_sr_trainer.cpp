// The SR trainer (genperf/sr_train.h): the loss falls on synthetic dust fields, the run directory
// holds a loadable model, and a run interrupted and resumed ends with the same bits as one that
// was not; a state of other options is refused; fine-tuning starts from the given model's
// weights and keeps its config and units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/test_util.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/sr_train.h"

using namespace genperf;
using namespace genperf::sr;

namespace {

UNetConfig small() {
  UNetConfig c;
  c.base = 8, c.mults = {1, 2}, c.attention_levels = {1}, c.head_channels = 8, c.groups = 4, c.timesteps = 100;
  c.transform = "log";
  return c;
}

std::vector<Map> fields(int n, uint64_t seed) {
  std::vector<Map> maps;
  for (int i = 0; i < n; ++i) {
    DustFieldSpec d;
    d.size = 64, d.seed = seed + uint64_t(i);
    maps.push_back(dust_field(d));
  }
  return maps;
}

TEST(SrTrainer, ResumesBitExactly) {
  genperf::testing::TempDir tmp("srtrain");
  SRTrainOptions o;
  o.steps = 8, o.batch = 2, o.crop = 32, o.warmup = 2, o.log_every = 2, o.save_every = 100, o.seed = 9;
  o.degradation.scale = 4;
  const std::vector<Map> train = fields(3, 1), val = fields(1, 50);
  std::vector<SRTrainLog> logs;
  train_sr(small(), train, val, o, tmp / "full", false, [&](const SRTrainLog& l) { logs.push_back(l); });
  ASSERT_EQ(logs.size(), 4u);
  EXPECT_GT(logs.back().val_loss, 0);
  for (const SRTrainLog& l : logs) EXPECT_TRUE(std::isfinite(l.loss));

  SRTrainOptions cut = o;
  cut.stop_at = 3;
  train_sr(small(), train, val, cut, tmp / "cut", false);
  train_sr(small(), train, val, o, tmp / "cut", true);
  EXPECT_EQ(genperf::testing::read_bytes(tmp / "full/state.safetensors"),
            genperf::testing::read_bytes(tmp / "cut/state.safetensors"));
  EXPECT_EQ(genperf::testing::read_bytes(tmp / "full/model/model.safetensors"),
            genperf::testing::read_bytes(tmp / "cut/model/model.safetensors"));
  EXPECT_EQ(read_text_file(tmp / "full/log.jsonl").size() > 0, true);
  const UNet<float> m = load_sr_model(tmp / "full/model");
  EXPECT_GT(m.config().residual_std, 0);
  EXPECT_NE(m.config().residual_std, 1.0);

  SRTrainOptions other = o;
  other.lr = 1e-3f;
  EXPECT_THROW(train_sr(small(), train, val, other, tmp / "cut", true), Error);
}

TEST(SrTrainer, FineTunesFromAModel) {
  genperf::testing::TempDir tmp("srtune");
  SRTrainOptions o;
  o.steps = 4, o.batch = 2, o.crop = 32, o.warmup = 1, o.log_every = 2, o.save_every = 100, o.seed = 3;
  o.degradation.scale = 4;
  train_sr(small(), fields(2, 1), {}, o, tmp / "base", false);
  const UNet<float> base = load_sr_model(tmp / "base/model");

  // At learning rate 0 the weights stay the model's, and so does their EMA (to its rounding).
  SRTrainOptions tune = o;
  tune.init = tmp / "base/model";
  tune.lr = tune.min_lr = 0;
  tune.steps = 2, tune.seed = 8;
  UNetConfig other = small();
  other.base = 16;  // ignored: the base model's config is kept
  train_sr(other, fields(2, 20), {}, tune, tmp / "frozen", false);
  const UNet<float> frozen = load_sr_model(tmp / "frozen/model");
  EXPECT_EQ(unet_config_json(frozen.config()).dump(), unet_config_json(base.config()).dump());
  ASSERT_EQ(frozen.weights().size(), base.weights().size());
  double most = 0;
  for (size_t i = 0; i < base.weights().size(); ++i)
    most = std::max(most, double(std::fabs(frozen.weights()[i] - base.weights()[i])) /
                              (1e-30 + std::fabs(double(base.weights()[i]))));
  EXPECT_LT(most, 1e-6);

  // Training moves them, from the base's (residual_std kept: the network's units).
  tune.lr = 1e-3f, tune.min_lr = 1e-4f;
  train_sr(other, fields(2, 20), {}, tune, tmp / "tuned", false);
  const UNet<float> tuned = load_sr_model(tmp / "tuned/model");
  EXPECT_EQ(tuned.config().residual_std, base.config().residual_std);
  EXPECT_FALSE(std::equal(base.weights().begin(), base.weights().end(), tuned.weights().begin()));

  tune.init = tmp / "missing";
  EXPECT_THROW(train_sr(small(), fields(1, 1), {}, tune, tmp / "e", false), Error);
  EXPECT_FALSE(std::filesystem::exists(tmp / "e"));  // refused before the run directory is made
  tune.init = tmp / "base/model";
  tune.degradation.scale = 2;
  EXPECT_THROW(train_sr(small(), fields(1, 1), {}, tune, tmp / "f", false), Error);  // the model's scale is 4
}

TEST(SrTrainer, RefusesBadInput) {
  genperf::testing::TempDir tmp("srtrainbad");
  SRTrainOptions o;
  o.steps = 1, o.batch = 1, o.crop = 128;
  o.degradation.scale = 4;
  EXPECT_THROW(train_sr(small(), fields(1, 1), {}, o, tmp / "a", false), Error);  // crop larger than the maps
  o.crop = 30;
  EXPECT_THROW(train_sr(small(), fields(1, 1), {}, o, tmp / "b", false), Error);  // crop not aligned
  o.crop = 32;
  o.degradation.scale = 2;
  EXPECT_THROW(train_sr(small(), fields(1, 1), {}, o, tmp / "c", false), Error);  // scale mismatch
  Map flat(64, 64, -1.0);
  o.degradation.scale = 4;
  EXPECT_THROW(train_sr(small(), {flat}, {}, o, tmp / "d", false), Error);  // log of a negative map
}

}  // namespace

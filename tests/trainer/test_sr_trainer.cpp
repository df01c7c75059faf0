// The SR trainer (genperf/sr_train.h): the loss falls on synthetic dust fields, the run directory
// holds a loadable model, and a run interrupted and resumed ends with the same bits as one that
// was not; a state of other options or of another precision is refused.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
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
  // Each log line says the precision that ran.
  const std::string log = read_text_file(tmp / "full/log.jsonl");
  const std::string first = log.substr(0, log.find('\n'));
  EXPECT_EQ(Json::parse(first, "log.jsonl").at("precision").as_string(), "f32") << first;
}

// Mixed precision where it runs: a bf16 run resumed in bf16 ends with the bits of the
// uninterrupted bf16 run; resuming it in f32 is refused (bit-exact resume holds within one
// precision), as is resuming an f32 run in bf16.
TEST(SrTrainer, Bf16ResumesInItsOwnPrecision) {
  if (effective_precision(Precision::Bf16) != Precision::Bf16)
    GTEST_SKIP() << "bf16 does not run here (no AVX512-BF16 at the AVX-512 level)";
  genperf::testing::TempDir tmp("srtrainbf16");
  SRTrainOptions o;
  o.steps = 4, o.batch = 2, o.crop = 32, o.warmup = 1, o.log_every = 2, o.save_every = 100, o.seed = 3;
  o.degradation.scale = 4;
  o.precision = Precision::Bf16;
  const std::vector<Map> train = fields(2, 1);
  train_sr(small(), train, {}, o, tmp / "full", false);
  SRTrainOptions cut = o;
  cut.stop_at = 2;
  train_sr(small(), train, {}, cut, tmp / "cut", false);
  SRTrainOptions f32 = o;
  f32.precision = Precision::F32;
  EXPECT_THROW(train_sr(small(), train, {}, f32, tmp / "cut", true), Error);
  train_sr(small(), train, {}, o, tmp / "cut", true);
  EXPECT_EQ(genperf::testing::read_bytes(tmp / "full/state.safetensors"),
            genperf::testing::read_bytes(tmp / "cut/state.safetensors"));
  SRTrainOptions f32_cut = f32;
  f32_cut.stop_at = 2;
  train_sr(small(), train, {}, f32_cut, tmp / "f32", false);
  EXPECT_THROW(train_sr(small(), train, {}, o, tmp / "f32", true), Error);
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

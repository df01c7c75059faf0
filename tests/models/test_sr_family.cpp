// The SR UNet's side of the model-family seam: an SR model directory loads through
// load_checkpoint with its filters as matrices, its quantizable tensors come in forward order,
// and a quantized model is written, refused as GGUF, and loaded back (its matrices decoded).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/model_family.h"
#include "genperf/quantize.h"
#include "io/safetensors.h"
#include "common/test_util.h"

namespace genperf {
namespace {

using sr::ParamSpec;
using sr::UNet;
using sr::UNetConfig;

// Rows of 32-multiples where the quantizers' blocks fit: base 32.
UNetConfig small() {
  UNetConfig c;
  c.channels = 1, c.base = 32, c.mults = {1, 2}, c.res_blocks = 1, c.attention_levels = {1};
  c.head_channels = 32, c.groups = 8, c.timesteps = 100;
  return c;
}

std::string saved_model(const genperf::testing::TempDir& dir) {
  UNet<float> net(small());
  net.init(7, false);
  const std::string path = dir / "model";
  sr::save_sr_model(path, net);
  return path;
}

TEST(SrFamily, LoadsAsACheckpointWithMatrices) {
  genperf::testing::TempDir dir("srfamily");
  const Checkpoint ck = load_checkpoint(saved_model(dir));
  const ModelFamily& f = family_of(ck);
  EXPECT_STREQ(f.name(), "sr-unet");
  EXPECT_EQ(ck.arch(), sr::kUNetArchitecture);
  EXPECT_FALSE(f.has_gguf());
  // A 3x3 filter [OC, 3, 3, IC] is held as [OC, 9 IC]; 1-D tensors as they are.
  EXPECT_EQ(ck.tensors.at("down.0.res.0.conv1.weight").shape(), (std::vector<int64_t>{32, 9 * 32}));
  EXPECT_EQ(ck.tensors.at("down.1.res.0.skip.weight").shape(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(ck.tensors.at("down.0.res.0.norm1.weight").ndim(), 1);

  const auto roles = f.quantizable(ck);
  const UNet<float> net(small());
  std::vector<std::string> order;  // the network's matrices in parameter (forward) order
  for (const ParamSpec& p : net.params())
    if (p.shape.size() >= 2) order.push_back(p.name);
  ASSERT_EQ(roles.size(), order.size());
  std::set<std::pair<int, std::string>> cells;
  for (size_t i = 0; i < roles.size(); ++i) {
    EXPECT_EQ(roles[i].name, order[i]);
    EXPECT_FALSE(roles[i].lookup);
    EXPECT_EQ(roles[i].output, roles[i].name == "out.conv.weight");
    EXPECT_EQ(f.role_of(roles[i].name)->kind, roles[i].kind);
    if (roles[i].layer >= 0) {
      EXPECT_TRUE(cells.insert({roles[i].layer, roles[i].kind}).second) << roles[i].name;
    }
  }
  EXPECT_EQ(roles.front().kind, "time.fc1");
  EXPECT_EQ(roles.back().kind, "out.conv");
  // Blocks in forward order: down.0.res.0 (0), down.0 (its down-sampling, 1), down.1.res.0 (2),
  // down.1.attn.0 (3), mid.res.0 (4), mid.attn (5), mid.res.1 (6), up.1.res.0 (7), ...
  const std::map<std::string, int> rows = {{"down.0.res.0.conv2.weight", 0}, {"down.0.down.weight", 1},
                                           {"mid.attn.qkv.weight", 5},       {"mid.res.1.conv1.weight", 6},
                                           {"up.1.res.0.conv1.weight", 7},   {"time.fc2.weight", -1}};
  for (const TensorRole& r : roles) {
    const auto it = rows.find(r.name);
    EXPECT_EQ(r.layer, it == rows.end() ? r.layer : it->second) << r.name;
  }
  EXPECT_FALSE(f.role_of("down.0.res.0.norm1.weight"));
  EXPECT_FALSE(f.role_of("mid.attn.conv.weight"));
}

TEST(SrFamily, QuantizedModelRoundTrip) {
  genperf::testing::TempDir dir("srquant");
  const std::string src = saved_model(dir);
  const Checkpoint ck = load_checkpoint(src);
  std::vector<std::string> notes;
  const QuantPlan plan = recipe_plan(ck, "uniform:q8_0", &notes);
  const Checkpoint q = quantize_checkpoint(ck, plan, {});
  try {  // llama.cpp's LLM mix, quantize's default recipe, names what to use instead
    recipe_plan(ck, "q4_k_m");
    ADD_FAILURE() << "q4_k_m on an SR model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use uniform:<format> or auto"), std::string::npos) << e.what();
  }
  EXPECT_EQ(q.tensors.at("down.0.res.0.conv1.weight").dtype(), DType::Q8_0);
  EXPECT_EQ(q.tensors.at("time.fc1.weight").dtype(), DType::Q8_0);  // rows of 32
  try {
    save_quantized(dir / "q.gguf", q);
    ADD_FAILURE() << "an SR model written as GGUF";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no GGUF form"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "q.gguf"));
  save_quantized(dir / "q", q);
  EXPECT_LT(std::filesystem::file_size(dir / "q/model.safetensors"),
            std::filesystem::file_size(src + "/model.safetensors") / 2);

  // Loaded back: the quantized matrices decoded, everything else bit-exact.
  const UNet<float> a = sr::load_sr_model(src), b = sr::load_sr_model(dir / "q");
  const Checkpoint back = load_checkpoint(dir / "q");
  for (const ParamSpec& p : a.params()) {
    const float* wa = a.weights().data() + p.offset;
    const float* wb = b.weights().data() + p.offset;
    const Tensor& t = back.tensors.at(p.name);
    if (t.dtype() == DType::F32) {
      EXPECT_TRUE(std::equal(wa, wa + p.size(), wb)) << p.name;
      continue;
    }
    const Tensor d = t.to(DType::F32);
    double err = 0, mag = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_EQ(wb[i], d.data<float>()[i]) << p.name;
      err = std::max(err, double(std::abs(wa[i] - wb[i])));
      mag = std::max(mag, double(std::abs(wa[i])));
    }
    EXPECT_LT(err, mag / 100) << p.name;  // 8-bit blocks, or f16 where rows do not fit them
  }
}

TEST(SrFamily, BadTensorIsNamed) {
  genperf::testing::TempDir dir("srbad");
  const std::string src = saved_model(dir);
  // The same files, one tensor a column short.
  SafetensorsFile f = read_safetensors(src + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [n, t] : f.tensors) tensors.emplace_back(n, n == "mid.attn.proj.weight" ? Tensor::zeros({64, 63}) : t);
  write_safetensors(src + "/model.safetensors.new", tensors);
  f = {};
  std::filesystem::rename(src + "/model.safetensors.new", src + "/model.safetensors");
  try {
    load_checkpoint(src);
    ADD_FAILURE() << "loaded a wrong shape";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mid.attn.proj.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("[64, 64]"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace genperf

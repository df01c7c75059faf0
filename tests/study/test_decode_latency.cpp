// Decode latency per tensor and format (genperf/decode_latency.h): which tensors and formats are
// timed, that the two calibration steps are predicted as measured, and that a catalogue device is
// a roofline. Times themselves are not asserted (BENCHMARKING.md: no timed unit tests).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "genperf/decode_latency.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/model_family.h"

namespace genperf {
namespace {

// The tiny preset: rows of 64 (q4_0 and q8_0 fit, q4_k's 256-blocks do not) and down_proj rows of
// 176, which no candidate fits.
Checkpoint tiny(bool tied) {
  LlamaConfig c = preset_config("tiny");
  c.tie_word_embeddings = tied;
  return random_checkpoint(c, DType::BF16, 7);
}

DecodeLatencyOptions quick(const std::string& device = "cpu") {
  DecodeLatencyOptions o;
  o.device = device;
  o.context = 16;
  o.tokens = 4;
  o.reps = 3;
  return o;
}

const DType kFormats[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K};

TEST(DecodeLatency, TimesEveryTensorInEveryFormatThatFits) {
  for (bool tied : {false, true}) {
    const Checkpoint ck = tiny(tied);
    const DecodeLatency d = decode_latency(ck, kFormats, quick());
    EXPECT_EQ(d.kind, FigureKind::Measured);
    EXPECT_EQ(d.device, "cpu");
    const std::vector<TensorRole> roles = family_of(ck).quantizable(ck);
    ASSERT_EQ(d.table.seconds.size(), roles.size());
    for (const TensorRole& r : roles) {
      const Tensor& t = ck.tensors.at(r.name);
      const auto& fs = d.table.seconds.at(r.name);
      EXPECT_TRUE(fs.count(DType::BF16)) << r.name;
      for (DType f : kFormats) EXPECT_EQ(fs.count(f) == 1, format_fits(f, t.size(1))) << r.name << " " << dtype_name(f);
      for (const auto& [f, s] : fs) {
        // An untied embedding is only looked up: its format costs the step nothing.
        if (r.lookup) EXPECT_EQ(s, 0.0) << r.name;
        else EXPECT_GT(s, 0.0) << r.name << " " << dtype_name(f);
      }
    }
    EXPECT_EQ(d.table.seconds.at("model.layers.0.mlp.down_proj.weight").size(), 1u);  // rows of 176: bf16 only
    // The calibration steps are predicted as measured: the source model, and the uniform model of
    // the second format where one was timed.
    EXPECT_NEAR(d.predict(ck, {}), d.source.median, 1e-12 * d.source.median);
    EXPECT_EQ(d.source_s, d.source.median);
    EXPECT_EQ(d.source.samples.size(), 3u);
    if (d.fitted) {
      ASSERT_FALSE(d.second.samples.empty());
      QuantPlan u;
      for (const TensorRole& r : roles)
        if (format_fits(d.second_format, ck.tensors.at(r.name).size(1))) u[r.name] = d.second_format;
      EXPECT_NEAR(d.predict(ck, u), d.second.median, 1e-9 * d.second.median);
      EXPECT_GT(d.scale, 0.0);
    } else {
      EXPECT_EQ(d.scale, 1.0);
    }
    const Json j = d.to_json();
    EXPECT_EQ(j.at("kind").as_string(), "measured");
    EXPECT_EQ(j.at("tensor_s").as_object().size(), roles.size());
  }
}

TEST(DecodeLatency, CatalogueDeviceIsARooflineOfTheBytes) {
  const Checkpoint ck = tiny(false);
  const DecodeLatency d = decode_latency(ck, kFormats, quick("h100"));
  EXPECT_EQ(d.kind, FigureKind::Modeled);
  EXPECT_EQ(d.device, "h100");
  EXPECT_GT(d.efficiency, 0.0);
  EXPECT_LE(d.efficiency, 1.0);
  EXPECT_GT(d.table.fixed, 0.0);
  // Decode products are bound by their weights' bytes on an H100: fewer bytes, less time.
  const auto& q = d.table.seconds.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_LT(q.at(DType::Q4_0), q.at(DType::Q8_0));
  EXPECT_LT(q.at(DType::Q8_0), q.at(DType::BF16));
  EXPECT_NEAR(q.at(DType::BF16) / q.at(DType::Q8_0), double(bytes_for(DType::BF16, 64 * 64)) / double(bytes_for(DType::Q8_0, 64 * 64)),
              0.2);  // the input and output rows add a little
  EXPECT_NEAR(d.predict(ck, {}), d.source_s, 1e-12 * d.source_s);
  EXPECT_EQ(d.to_json().at("kind").as_string(), "modeled");
  EXPECT_THROW(decode_latency(ck, kFormats, quick("tpu9")), Error);
}

TEST(DecodeLatency, InterleavedStepsOfSeveralModels) {
  const Checkpoint a = tiny(false);
  const Checkpoint b = quantize_checkpoint(a, {{"model.layers.0.self_attn.q_proj.weight", DType::Q8_0}}, {});
  const Checkpoint* both[] = {&a, &b};
  const std::vector<Stats> st = measure_decode_steps(both, quick());
  ASSERT_EQ(st.size(), 2u);
  for (const Stats& s : st) {
    EXPECT_EQ(s.samples.size(), 3u);
    EXPECT_GT(s.min, 0.0);
  }
  DecodeLatencyOptions bad = quick();
  bad.context = 300;  // more than the preset's 256 positions
  EXPECT_THROW(measure_decode_steps(both, bad), Error);
}

}  // namespace
}  // namespace genperf

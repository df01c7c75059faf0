// The hardware model (genperf/hw_model.h): the per-op roofline against a float64 reference written
// out here from the op layer's documented formulas, calibration on synthetic measured figures of
// known efficiency, the error table without the calibration figure, predictions stored as modeled
// and labelled so in the report, and the error for a store with nothing measured.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "genperf/error.h"
#include "genperf/hw_model.h"
#include "genperf/llama.h"
#include "genperf/study_report.h"
#include "genperf/study_store.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;

RooflineDevice made_up_device() {
  RooflineDevice d;
  d.id = "madeup", d.name = "a made-up device";
  d.fp32_tflops = 1, d.bf16_tflops = 2, d.memory_gbs = 100;
  return d;
}

TEST(HwModel, RooflineIsPerOpNotOneGlobalMax) {
  WorkloadCost w;
  w.ops.push_back({"compute-bound", 4e12, 1e9, ComputeType::Bf16});  // max(2 s, 0.01 s)
  w.ops.push_back({"memory-bound", 1e9, 5e10, ComputeType::F32});    // max(0.001 s, 0.5 s)
  EXPECT_DOUBLE_EQ(roofline_seconds(w, made_up_device()), 2.5);
  EXPECT_DOUBLE_EQ(roofline_seconds(w, made_up_device(), 0.5), 5.0);
  RooflineDevice no_bf16 = made_up_device();
  no_bf16.bf16_tflops = 0;
  EXPECT_FALSE(can_time(w, no_bf16));
  try {
    roofline_seconds(w, no_bf16);
    FAIL() << "no bf16 peak accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("publishes no bf16 peak"), std::string::npos) << e.what();
  }
}

// Decode of one token of the tiny preset at position P, written out op by op in float64: linear
// 2TKN FLOPs and the weight at 2 bytes (bf16) plus f32 activations; the rest as ops_cost.h counts.
double reference_decode_seconds(const LlamaConfig& c, int64_t P, const RooflineDevice& dev) {
  const double T = 1, d = double(c.hidden_size), H = double(c.num_attention_heads),
               Hkv = double(c.num_key_value_heads), D = double(c.head_dim), FF = double(c.intermediate_size),
               V = double(c.vocab_size), qd = H * D, kvd = Hkv * D, S = double(P) + T;
  const double f32 = dev.fp32_tflops * 1e12, bf16 = dev.bf16_tflops * 1e12, bw = dev.memory_gbs * 1e9;
  auto op = [&](double flops, double bytes, double peak) { return std::max(flops / peak, bytes / bw); };
  auto linear = [&](double K, double N) { return op(2 * T * K * N, 2 * N * K + 4 * (T * K + T * N), bf16); };
  double t = op(0, 2 * T * d + 4 * T * d, f32);  // embedding: a bf16 row read, an f32 row written
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    t += op(4 * T * d, 4 * (2 * T * d + d), f32);  // rms_norm
    t += linear(d, qd) + linear(d, kvd) + linear(d, kvd);
    t += op(3 * T * H * D + 2 * T * (D / 2), 4 * 2 * T * H * D, f32);      // rope q
    t += op(3 * T * Hkv * D + 2 * T * (D / 2), 4 * 2 * T * Hkv * D, f32);  // rope k
    t += 2 * op(0, 4 * T * kvd + 4 * T * kvd, f32);                         // store k, v (f32 cache)
    t += op((4 * D + 3) * H * S, 2 * 4 * S * Hkv * D + 4 * 2 * T * H * D, bf16);  // attention over S keys
    t += linear(qd, d);
    t += op(T * d, 4 * 3 * T * d, f32);            // residual add
    t += op(4 * T * d, 4 * (2 * T * d + d), f32);  // rms_norm
    t += linear(d, FF) + linear(d, FF);
    t += op(5 * T * FF, 4 * 3 * T * FF, f32);  // silu * mul
    t += linear(FF, d);
    t += op(T * d, 4 * 3 * T * d, f32);
  }
  t += op(4 * T * d, 4 * (2 * T * d + d), f32);
  t += linear(d, V);
  return t;
}

TEST(HwModel, DecodeOfATinyConfigMatchesTheReference) {
  const LlamaConfig c = preset_config("tiny");
  const RooflineDevice dev = made_up_device();
  const WorkloadCost w = inference_cost(c, Phase::Decode, 1, 1, 20, DType::BF16, DType::F32, ComputeType::Bf16);
  const double ref = reference_decode_seconds(c, 20, dev);
  EXPECT_NEAR(roofline_seconds(w, dev), ref, 1e-12 * ref);
  EXPECT_NEAR(roofline_seconds(w, dev, 0.25), ref / 0.25, 1e-12 * ref);
}

TEST(HwModel, PublishedRatiosArePredictedFromTheCatalogue) {
  // Decode of a 70B model at batch 64 is bound by memory: the ratio tracks bandwidth (4.8 / 3.35 TB/s).
  const PublishedRatio& h200 = published_ratios().front();
  EXPECT_NEAR(predicted_ratio(h200), 4800.0 / 3350.0, 0.02);
  for (const PublishedRatio& p : published_ratios()) {
    EXPECT_GT(p.published, 0) << p.what;
    EXPECT_NE(p.source.find("https://"), std::string::npos) << p.what;
    EXPECT_GT(predicted_ratio(p), 0) << p.what;
  }
}

// A store of one machine with synthetic measured figures of known efficiency: decode at avx512
// (efficiency 0.25, the calibration) and generic (0.125), a training step (0.5).
class HwModelStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(GENPERF_BINARY_DIR) / "test-output" / "hw_model";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "study.db").string();
    cpu_ = made_up_device();
    cpu_.id = "cpu", cpu_.kind = FigureKind::Measured;
  }

  MachineRecord machine() const {
    MachineRecord m;
    m.fingerprint = "f00d", m.hostname = "node1", m.cpu = "Test CPU", m.cores = 2;
    return m;
  }

  void add_run(ResultsStore& s, const std::string& isa, const Workload& w, const std::string& metric, double seconds,
               const std::string& started) {
    RunRecord r;
    r.suite = "quick", r.command = "test", r.commit = "abc", r.build_type = "Release", r.threads = 2;
    r.started = r.finished = started;
    const int64_t id = s.begin_run(machine(), r);
    s.add_metric(id, w, DeviceRecord{"cpu", "Test CPU", isa}, metric, "s", Stats::of({seconds, seconds, seconds}));
  }

  Workload infer_workload() const {
    Workload w;
    w.name = "bench infer";
    w.params = Json::Object{{"model", "random:tiny"}, {"weight_types", "bf16"}, {"kv_type", "f32"},
                            {"decode.prompt_tokens", 16}, {"decode.tokens_per_rep", 8}};
    return w;
  }
  Workload train_workload() const {
    Workload w;
    w.name = "bench train";
    w.params = Json::Object{{"model", "random:tiny"}, {"batch", 2},        {"seq", 16},   {"attention", "flash"},
                            {"precision", "f32"},     {"ranks", 1},        {"lora", Json()}, {"checkpoint_layers", false}};
    return w;
  }

  double decode_roofline() const {
    return roofline_seconds(
        inference_cost(preset_config("tiny"), Phase::Decode, 1, 1, 16 + 4, DType::BF16, DType::F32, ComputeType::Bf16),
        cpu_);
  }
  double train_roofline() const {
    return roofline_seconds(train_step_cost(preset_config("tiny"), 2, 16, true, Precision::F32), cpu_);
  }

  void fill(ResultsStore& s) {
    add_run(s, "generic", infer_workload(), "decode.seconds_per_token", decode_roofline() / 0.125, "2026-01-01T00:00:00Z");
    add_run(s, "avx512", infer_workload(), "decode.seconds_per_token", decode_roofline() / 0.25, "2026-01-01T00:01:00Z");
    add_run(s, "avx512", train_workload(), "step_seconds", train_roofline() / 0.5, "2026-01-01T00:02:00Z");
  }

  fs::path dir_;
  std::string db_;
  RooflineDevice cpu_;
};

TEST_F(HwModelStore, CalibrationRecoversTheEfficiencyAndTheErrorTableExcludesIt) {
  ResultsStore s(db_);
  fill(s);
  const std::vector<MetricRow> rows = s.metrics();
  HwModelOptions o;
  o.cpu = cpu_;
  o.devices = {"h100", "gaudi2"};
  const HwModelResult r = run_hw_model(rows, o, db_);
  ASSERT_EQ(r.calibration.size(), 2u);
  for (const PhaseCalibration& c : r.calibration) {
    EXPECT_EQ(c.row->device.isa_path, "avx512");
    EXPECT_NEAR(c.efficiency, c.phase == Phase::Train ? 0.5 : 0.25, 1e-9) << phase_name(c.phase);
  }
  // Only the generic decode is left to check the model on: predicted at 0.25, measured at 0.125.
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].row->device.isa_path, "generic");
  EXPECT_NEAR(r.errors[0].error(), -0.5, 1e-9);
  EXPECT_NEAR(r.median_abs_error, 0.5, 1e-9);
  EXPECT_NEAR(r.worst_abs_error, 0.5, 1e-9);
  // Decode on both devices; the f32 training step on H100 only (Gaudi 2 publishes no fp32 peak).
  int h100 = 0, gaudi2 = 0;
  for (const Prediction& p : r.predictions) (p.device.id == "h100" ? h100 : gaudi2)++;
  EXPECT_EQ(h100, 2);
  EXPECT_EQ(gaudi2, 1);
  bool noted = false;
  for (const std::string& n : r.notes) noted |= n.find("gaudi2 publishes no peak") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(HwModelStore, PredictionsAreStoredModeledAndTheReportLabelsThem) {
  {
    ResultsStore s(db_);
    fill(s);
    HwModelOptions o;
    o.cpu = cpu_;
    o.devices = {"v100", "a100", "h100"};
    const std::vector<MetricRow> measured = s.metrics();  // the result points into them
    const HwModelResult r = run_hw_model(measured, o, db_);
    store_predictions(s, r, "genperf study model --db study.db");
  }
  const ResultsStore s(db_, ResultsStore::Mode::Existing);
  const std::vector<MetricRow> rows = s.metrics();
  int modeled = 0;
  for (const MetricRow& m : rows) {
    if (m.kind != MetricKind::Modeled) continue;
    ++modeled;
    EXPECT_TRUE(m.samples.empty());
    EXPECT_EQ(m.device.kind, "model");
    EXPECT_EQ(m.run.suite, "model");
    EXPECT_GT(m.median, 0);
  }
  EXPECT_EQ(modeled, 6);  // decode and the training step on each of three devices
  const StudyReport rep = study_report(rows, ReportAssets{"/*vega*/", "/*vega-lite*/", "/*vega-embed*/"}, "study.db");
  // The ISA table's H100 row: a modeled tokens/s, never a ratio to the measured generic figure.
  bool h100_row = false;
  size_t at = 0;
  while ((at = rep.markdown.find("| h100 |", at)) != std::string::npos) {
    const std::string line = rep.markdown.substr(at, rep.markdown.find('\n', at) - at);
    h100_row = true;
    EXPECT_NE(line.find("*modeled*"), std::string::npos) << line;
    EXPECT_EQ(line.find("×"), std::string::npos) << line;
    ++at;
  }
  EXPECT_TRUE(h100_row) << rep.markdown;
}

TEST_F(HwModelStore, AStoreWithoutMeasuredRunsIsRefusedByName) {
  ResultsStore s(db_);
  HwModelOptions o;
  o.cpu = cpu_;
  try {
    run_hw_model(s.metrics(), o, db_);
    FAIL() << "an empty store accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[hw model]"), std::string::npos) << m;
    EXPECT_NE(m.find(db_), std::string::npos) << m;
    EXPECT_NE(m.find("no measured"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace genperf

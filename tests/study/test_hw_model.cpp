// The hardware model (genperf/hw_model.h): the per-op roofline against a float64 reference written
// out here from the op layer's documented formulas, calibration on synthetic measured figures of
// known efficiency, the error table without the calibration figure, each ISA level's figures
// costed with that level's peaks from its record (and the best level's, noted, where a level has
// none), predictions stored as modeled and labelled so in the report, and the error for a store
// with nothing measured.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "genperf/error.h"
#include "genperf/fileio.h"
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

// A forward of T tokens of the tiny preset after P cached ones (decode: T = 1; prefill: P = 0),
// written out op by op in float64: linear 2TKN FLOPs and the weight at 2 bytes (bf16) plus f32
// activations; causal attention over P + 1 ... P + T keys; the final norm and head on the last
// token; the rest as ops_cost.h counts. Matmuls and attention at dev's bf16 peak.
double reference_forward_seconds(const LlamaConfig& c, int64_t tokens, int64_t P, const RooflineDevice& dev) {
  const double T = double(tokens), d = double(c.hidden_size), H = double(c.num_attention_heads),
               Hkv = double(c.num_key_value_heads), D = double(c.head_dim), FF = double(c.intermediate_size),
               V = double(c.vocab_size), qd = H * D, kvd = Hkv * D, S = double(P) + T;
  const double pairs = T * double(P) + T * (T + 1) / 2;  // query i attends P + i + 1 keys
  const double f32 = dev.fp32_tflops * 1e12, bf16 = dev.bf16_tflops * 1e12, bw = dev.memory_gbs * 1e9;
  auto op = [&](double flops, double bytes, double peak) { return std::max(flops / peak, bytes / bw); };
  auto linear_of = [&](double rows, double K, double N) {
    return op(2 * rows * K * N, 2 * N * K + 4 * (rows * K + rows * N), bf16);
  };
  auto linear = [&](double K, double N) { return linear_of(T, K, N); };
  double t = op(0, 2 * T * d + 4 * T * d, f32);  // embedding: a bf16 row read, an f32 row written
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    t += op(4 * T * d, 4 * (2 * T * d + d), f32);  // rms_norm
    t += linear(d, qd) + linear(d, kvd) + linear(d, kvd);
    t += op(3 * T * H * D + 2 * T * (D / 2), 4 * 2 * T * H * D, f32);      // rope q
    t += op(3 * T * Hkv * D + 2 * T * (D / 2), 4 * 2 * T * Hkv * D, f32);  // rope k
    t += 2 * op(0, 4 * T * kvd + 4 * T * kvd, f32);                         // store k, v (f32 cache)
    t += op((4 * D + 3) * H * pairs, 2 * 4 * S * Hkv * D + 4 * 2 * T * H * D, bf16);  // attention
    t += linear(qd, d);
    t += op(T * d, 4 * 3 * T * d, f32);            // residual add
    t += op(4 * T * d, 4 * (2 * T * d + d), f32);  // rms_norm
    t += linear(d, FF) + linear(d, FF);
    t += op(5 * T * FF, 4 * 3 * T * FF, f32);  // silu * mul
    t += linear(FF, d);
    t += op(T * d, 4 * 3 * T * d, f32);
  }
  t += op(4 * d, 4 * (2 * d + d), f32);  // the last token's norm and head
  t += linear_of(1, d, V);
  return t;
}

double reference_decode_seconds(const LlamaConfig& c, int64_t P, const RooflineDevice& dev) {
  return reference_forward_seconds(c, 1, P, dev);
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
    cpu_.id = "cpu", cpu_.kind = FigureKind::Measured, cpu_.isa_path = "avx512";
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

  // The options `study model` builds from a records directory: the best level's roofline and every
  // level's. The f32 peak at the best level is given (1000 GFLOP/s): a test measures nothing.
  static HwModelOptions options_of(const fs::path& records) {
    CpuFigures g;
    g.fp32_gflops = 1000, g.records_dir = records.string(), g.measure_missing = false;
    HwModelOptions o;
    o.cpu = this_machine_roofline(g);
    o.cpu_levels = isa_level_rooflines(g.records_dir);
    o.devices = {"h100"};
    return o;
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

// A bench infer record of one ISA level under records/: its provenance and, where `gflops` > 0,
// the machine block `bench infer` writes without --no-peaks (the GEMM peak of `type`, the bandwidth).
void write_level_record(const fs::path& dir, const std::string& file, const std::string& isa, const std::string& type,
                        double gflops, double gbs) {
  fs::create_directories(dir);
  Json j = Json::Object{{"provenance", Json::Object{{"isa_path", isa}, {"isa_flags", "avx2 fma avx512f avx512_bf16"}}}};
  if (gflops > 0)
    j["machine"] = Json::Object{{"gemm_peak", Json::Object{{"type", type}}}, {"gemm_peak_gflops", gflops},
                                {"bandwidth_gbs", gbs}};
  write_file_atomic((dir / file).string(), j.dump());
}

// The levels as the roofline must see them: each with its record's peak and bandwidth; below
// AVX-512 the bf16 matmuls run at the f32 peak. generic's peak (10 GFLOP/s) is below its bandwidth
// (20 GB/s), so its matmuls are compute-bound where the other levels' are not.
RooflineDevice level_device(double f32_gflops, double bf16_gflops, double gbs) {
  RooflineDevice d;
  d.fp32_tflops = f32_gflops / 1e3, d.bf16_tflops = bf16_gflops / 1e3, d.memory_gbs = gbs;
  return d;
}

TEST_F(HwModelStore, EachIsaLevelIsCostedWithItsOwnPeaks) {
  const fs::path records = dir_ / "records";
  write_level_record(records, "infer.generic.json", "generic", "f32", 10, 20);
  write_level_record(records, "infer.avx2.json", "avx2", "f32", 500, 50);
  write_level_record(records, "infer.avx512.json", "avx512", "bf16", 2000, 100);
  write_level_record(records, "train.flash.seq128.json", "avx512", "", 0, 0);  // --no-peaks: no machine block

  const std::vector<RooflineDevice> levels = isa_level_rooflines(records.string());
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0].isa_path, "generic");
  EXPECT_DOUBLE_EQ(levels[0].fp32_tflops, 0.01);
  EXPECT_TRUE(levels[0].bf16_as_f32);
  EXPECT_NE(levels[0].source.find("infer.generic.json"), std::string::npos) << levels[0].source;
  EXPECT_EQ(levels[1].isa_path, "avx2");
  EXPECT_DOUBLE_EQ(levels[1].memory_gbs, 50);
  EXPECT_EQ(levels[2].isa_path, "avx512");
  EXPECT_DOUBLE_EQ(levels[2].bf16_tflops, 2);
  EXPECT_FALSE(levels[2].bf16_as_f32);

  // The calibration level: the avx512 record's bf16 peak and bandwidth, the f32 peak given.
  const HwModelOptions o = options_of(records);
  EXPECT_EQ(o.cpu_levels.size(), 3u);
  EXPECT_EQ(o.cpu.isa_path, "avx512");
  EXPECT_DOUBLE_EQ(o.cpu.bf16_tflops, 2);
  EXPECT_DOUBLE_EQ(o.cpu.memory_gbs, 100);

  // Every level measured at the same efficiencies (decode 0.25, prefill 0.5) of its own roofline:
  // with per-level peaks the model must predict every level exactly.
  const LlamaConfig c = preset_config("tiny");
  const std::map<std::string, RooflineDevice> own = {{"generic", level_device(10, 10, 20)},
                                                     {"avx2", level_device(500, 500, 50)},
                                                     {"avx512", level_device(1000, 2000, 100)}};
  std::map<std::string, double> decode_s, prefill_s;
  for (const auto& [isa, dev] : own) {
    decode_s[isa] = reference_forward_seconds(c, 1, 16 + 4, dev) / 0.25;
    prefill_s[isa] = reference_forward_seconds(c, 32, 0, dev) / 0.5;
  }
  // The levels differ enough that the best level's peaks would miss the others by far.
  EXPECT_GT(decode_s["generic"], 3 * decode_s["avx512"]);
  EXPECT_GT(prefill_s["generic"], 10 * prefill_s["avx2"]);
  {
    ResultsStore s(db_);
    int minute = 0;
    for (const char* isa : {"generic", "avx2", "avx512"}) {
      add_run(s, isa, infer_workload(), "decode.seconds_per_token", decode_s[isa], cat("2026-01-01T00:0", minute++, ":00Z"));
      add_run(s, isa, infer_workload(), "prefill[tokens=32].seconds", prefill_s[isa], cat("2026-01-01T00:0", minute++, ":00Z"));
    }
  }
  const ResultsStore s(db_, ResultsStore::Mode::Existing);
  const std::vector<MetricRow> rows = s.metrics();
  const HwModelResult r = run_hw_model(rows, o, db_);
  ASSERT_EQ(r.calibration.size(), 2u);
  for (const PhaseCalibration& cal : r.calibration) {
    EXPECT_EQ(cal.row->device.isa_path, "avx512");
    EXPECT_NEAR(cal.efficiency, cal.phase == Phase::Decode ? 0.25 : 0.5, 1e-9) << phase_name(cal.phase);
  }
  ASSERT_EQ(r.errors.size(), 4u);  // decode and prefill at generic and avx2
  for (const ErrorRow& e : r.errors) {
    const std::string& isa = e.row->device.isa_path;
    EXPECT_EQ(e.peaks_of, isa);
    const double want = e.phase == Phase::Decode ? decode_s[isa] : prefill_s[isa];
    EXPECT_NEAR(e.predicted_s, want, 1e-9 * want) << isa << " " << phase_name(e.phase);
    EXPECT_NEAR(e.error(), 0, 1e-9) << isa << " " << phase_name(e.phase);
  }
  for (const std::string& n : r.notes) EXPECT_EQ(n.find("are costed with the"), std::string::npos) << n;
}

TEST_F(HwModelStore, ALevelWithoutAMachineBlockTakesTheBestLevelsPeaksAndSaysSo) {
  const fs::path records = dir_ / "records";
  write_level_record(records, "infer.avx2.json", "avx2", "", 0, 0);  // an older store: --no-peaks below the best
  write_level_record(records, "infer.avx512.json", "avx512", "bf16", 2000, 100);
  write_level_record(records, "quant.q4_0.infer.json", "avx2", "int8", 3000, 60);  // bounds no f32 or bf16 op
  const std::vector<RooflineDevice> levels = isa_level_rooflines(records.string());
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_EQ(levels[0].isa_path, "avx512");

  const HwModelOptions o = options_of(records);
  const double roofline = reference_decode_seconds(preset_config("tiny"), 16 + 4, level_device(1000, 2000, 100));
  {
    ResultsStore s(db_);
    add_run(s, "avx2", infer_workload(), "decode.seconds_per_token", roofline / 0.125, "2026-01-01T00:00:00Z");
    add_run(s, "avx512", infer_workload(), "decode.seconds_per_token", roofline / 0.25, "2026-01-01T00:01:00Z");
  }
  const ResultsStore s(db_, ResultsStore::Mode::Existing);
  const std::vector<MetricRow> rows = s.metrics();
  const HwModelResult r = run_hw_model(rows, o, db_);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].row->device.isa_path, "avx2");
  EXPECT_EQ(r.errors[0].peaks_of, "avx512");
  EXPECT_NEAR(r.errors[0].predicted_s, roofline / 0.25, 1e-9 * roofline);
  EXPECT_NEAR(r.errors[0].error(), -0.5, 1e-9);
  bool noted = false;
  for (const std::string& n : r.notes)
    noted |= n.find("the avx2 figures are costed with the avx512 level's peaks") != std::string::npos &&
             n.find("machine block") != std::string::npos;
  EXPECT_TRUE(noted) << ::testing::PrintToString(r.notes);
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

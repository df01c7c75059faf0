// The study's report (genperf/study_report.h): a store of two machines built here, with figures
// whose medians give known throughputs, ratios, efficiencies and overheads, a modeled figure and
// a workload measured by two runs; the Markdown tables must show those numbers, the HTML must
// embed specs and data for every section that has data, and the CLI must refuse bad input by
// name, leaving no file. The browser test opens the page in headless chromium (tools/report/
// check_report.mjs): every chart has marks, the console has no error, a screenshot is kept.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "genperf/bench.h"
#include "genperf/json.h"
#include "genperf/study_report.h"
#include "genperf/study_store.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::read_bytes;
using testing::run_genperf;
using testing::TempDir;
using testing::write_bytes;

const std::string kRoot = std::string(GENPERF_TEST_DIR) + "/..";

MachineRecord machine(const std::string& host, const std::string& cpu) {
  Provenance p;
  p.hostname = host, p.cpu = cpu, p.cores = 8, p.memory_bytes = int64_t(16) << 30, p.isa_flags = "avx2 avx512f";
  return machine_record(p);
}

// One run of one workload on one kernel path; each metric's samples (a modeled one: its value).
struct Figures {
  std::string metric;
  std::vector<double> samples;
  bool modeled = false;
};
void add_run(ResultsStore& s, const MachineRecord& m, const std::string& isa, const std::string& workload,
             const Json& params, const std::vector<Figures>& figures, int threads = 4) {
  RunRecord r;
  r.suite = "test", r.command = "genperf " + workload, r.commit = "abc1234", r.build_type = "Release";
  r.threads = threads, r.started = r.finished = "2026-01-02T03:04:05Z";
  const int64_t run = s.begin_run(m, r);
  const Workload w{workload, params};
  const DeviceRecord d{"cpu", m.cpu, isa};
  for (const Figures& f : figures) {
    if (f.modeled) s.add_modeled_metric(run, w, d, f.metric, "s", f.samples.at(0));
    else s.add_metric(run, w, d, f.metric, "s", Stats::of(f.samples));
  }
}

Json train(const std::string& attention, int ranks, const std::string& shard) {
  return Json::Object{{"model", "random:default"}, {"batch", 2},   {"seq", 256},       {"attention", attention},
                      {"ranks", ranks},            {"shard", shard}, {"precision", "f32"}};
}
Json sr(int batch, int ranks) {
  return Json::Object{{"model", "models/sr-default"}, {"batch", batch}, {"size", 64}, {"ranks", ranks}, {"shard", "none"}};
}
Json quant(const std::string& recipe, double size) { return Json::Object{{"recipe", recipe}, {"size_bytes", size}}; }

// The store the tests read. Medians: decode 5, 2.5 and 2 ms a token on alpha (200, 400, 500
// tokens/s), prefill of 128 tokens 1 and 0.5 s (128, 256 tokens/s); on beta 10 ms measured on the
// generic path and 4 ms modeled on avx2; training steps of 1 s naive and 0.5 s flash (512 and 1024
// tokens/s), 0.625 s on two ranks (80% weak-scaling efficiency), 0.75 s fully sharded (+20%); SR
// steps of 0.1 s (batch 4, 40 images/s) and 0.16 s on two ranks (batch 8, 50 images/s, 62.5%).
void build_store(const std::string& path) {
  ResultsStore s(path);
  const MachineRecord alpha = machine("alpha", "Test CPU A"), beta = machine("beta", "Test CPU B");
  const Json infer = Json::Object{{"model", "models/default"}, {"weight_types", "bf16"}, {"kv_type", "f32"}};
  add_run(s, alpha, "generic", "bench infer", infer,
          {{"decode.seconds_per_token", {0.004, 0.005, 0.006}}, {"prefill[tokens=128].seconds", {0.9, 1.0, 1.1}}});
  add_run(s, alpha, "avx2", "bench infer", infer,
          {{"decode.seconds_per_token", {0.0024, 0.0025, 0.003}}, {"prefill[tokens=128].seconds", {0.45, 0.5, 0.6}}});
  add_run(s, alpha, "avx512", "bench infer", infer, {{"decode.seconds_per_token", {0.002, 0.002, 0.0021}}});
  add_run(s, beta, "generic", "bench infer", infer, {{"decode.seconds_per_token", {0.008, 0.01, 0.012}}});
  add_run(s, beta, "avx2", "bench infer", infer, {{"decode.seconds_per_token", {0.004}, true}});

  add_run(s, alpha, "avx512", "bench train", train("naive", 1, "none"), {{"step_seconds", {0.9, 1.0, 1.2}}});
  add_run(s, alpha, "avx512", "bench train", train("flash", 1, "none"), {{"step_seconds", {0.45, 0.5, 0.55}}});
  add_run(s, alpha, "avx512", "bench train", train("flash", 2, "none"), {{"step_seconds", {0.6, 0.625, 0.7}}});
  add_run(s, alpha, "avx512", "bench train", train("flash", 2, "full"), {{"step_seconds", {0.7, 0.75, 0.8}}});

  add_run(s, alpha, "avx512", "bench sr", sr(4, 1),
          {{"train_step_seconds", {0.09, 0.1, 0.11}}, {"sample_step_seconds", {0.04, 0.05, 0.06}}});
  add_run(s, alpha, "avx512", "bench sr", sr(8, 2),
          {{"train_step_seconds", {0.15, 0.16, 0.2}}, {"sample_step_seconds", {0.08, 0.1, 0.12}}});
  // A second run of the same: its samples join the first's (median still 0.16, fastest 0.14).
  add_run(s, alpha, "avx512", "bench sr", sr(8, 2), {{"train_step_seconds", {0.14, 0.16, 0.16}}});

  // SR quality: two runs of one sr eval workload, their figures one sample each (medians: PSNR
  // 30.5 dB against bicubic's 28, coverage 0.65); the seconds per map of both runs pooled (1.15).
  const Json sr_eval = Json::Object{{"model", "models/sr-default"}, {"weight_types", "f32"}, {"weights_bytes", 3.2e6},
                                    {"data", "synthetic:2:128:2001:mixed"}, {"sampler", "ddim"}, {"steps", 10},
                                    {"samples", 2}, {"seed", 0}, {"tile", 128}};
  add_run(s, alpha, "avx512", "sr eval", sr_eval,
          {{"psnr_mean", {30}}, {"psnr_bicubic", {28}}, {"coverage", {0.6}}, {"minkowski", {0.8}},
           {"seconds_per_map", {1.0, 1.2}}});
  add_run(s, alpha, "avx512", "sr eval", sr_eval,
          {{"psnr_mean", {31}}, {"psnr_bicubic", {28}}, {"coverage", {0.7}}, {"minkowski", {0.8}},
           {"seconds_per_map", {1.1, 1.3}}});

  // Quality against size: q6_k is larger than q8_0 and worse, so it is off the front.
  for (const auto& [recipe, size, kl] : std::vector<std::tuple<std::string, double, double>>{
           {"q2_k", 2e6, 0.3}, {"q4_k_m", 4e6, 0.05}, {"q8_0", 7e6, 0.01}, {"q6_k", 8e6, 0.02}})
    add_run(s, alpha, "avx512", "eval kl", quant(recipe, size), {{"kl", {kl, kl, kl}}});
}

// The specs the page embeds (the JSON between "const specs = " and the statement's end).
Json embedded_specs(const std::string& html) {
  const std::string start = "const specs = ";
  const size_t a = html.find(start);
  EXPECT_NE(a, std::string::npos);
  const size_t b = html.find(";\nwindow.genperfReport", a);
  EXPECT_NE(b, std::string::npos);
  return Json::parse(html.substr(a + start.size(), b - a - start.size()), "report.html");
}

class StudyReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    build_store(tmp_ / "study.db");
    rows_ = ResultsStore(tmp_ / "study.db", ResultsStore::Mode::Existing).metrics();
  }
  TempDir tmp_{"study-report"};
  std::vector<MetricRow> rows_;
  const ReportAssets stub_{"/*vega*/", "/*vega-lite*/", "/*vega-embed*/"};
};

TEST_F(StudyReportTest, MarkdownTablesShowTheFiguresOfTheMedians) {
  const StudyReport r = study_report(rows_, stub_, "study.db");
  const std::string& md = r.markdown;
  // Tokens/s from the medians, the range from the slowest and fastest repetitions, × generic.
  EXPECT_NE(md.find("| decode tokens/s | generic | 200 (166.7–250) | 1.00× |"), std::string::npos) << md;
  EXPECT_NE(md.find("| decode tokens/s | avx2 | 400 (333.3–416.7) | 2.00× |"), std::string::npos) << md;
  EXPECT_NE(md.find("| decode tokens/s | avx512 | 500 (476.2–500) | 2.50× |"), std::string::npos) << md;
  EXPECT_NE(md.find("| prefill 128 tokens/s | avx2 | 256 (213.3–284.4) | 2.00× |"), std::string::npos) << md;
  // beta's avx2 figure is modeled: labelled, and no ratio to a measured generic.
  EXPECT_NE(md.find("| beta | "), std::string::npos) << md;
  EXPECT_NE(md.find("| avx2 | 250 *modeled* | – |"), std::string::npos) << md;
  // Flash against naive: 1 s / 0.5 s.
  EXPECT_NE(md.find("| 512 (426.7–568.9) | 1024 (930.9–1138) | 2.00× |"), std::string::npos) << md;
  // Scaling: 2 x 2 x 256 tokens / 0.625 s against 2 x 512 / 0.5 s; full sharding 0.75 / 0.625.
  EXPECT_NE(md.find("| 2 | none | 4 | 0.625 (0.6–0.7) | 1638 (1463–1707) tokens | 80% | – |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | full | 4 | 0.75 (0.7–0.8) | 1365 (1280–1463) tokens | – | +20% |"), std::string::npos) << md;
  // SR: the two runs of 2 ranks pooled (fastest 0.14 s: 57.14 images/s); 50 / (2 x 40).
  EXPECT_NE(md.find("| 2 | none | 4 | 0.16 (0.14–0.2) | 50 (40–57.14) images | 62.5% | – |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 64 | 4 | 1 | 4 | 40 (36.36–44.44) | 80 (66.67–100) |\n| alpha | models/sr-default | 64 | 8 | 2 |"),
            std::string::npos)
      << md;
  // SR quality: the model beside bicubic, medians of the two runs; a figure not recorded is "–".
  EXPECT_NE(md.find("models/sr-default (f32, 3.2 MB) on synthetic:2:128:2001:mixed: ddim, 10 steps, 2 samples, seed "
                    "0, tiles of 128\n\n| machine | figure | model | bicubic | better |\n|---|---|--:|--:|--:|\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| alpha, 4 threads | PSNR of the samples' mean (dB) | 30.5 (30–31) | 28 (28–28) | higher |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| alpha, 4 threads | SSIM of the mean | – | – | higher |"), std::string::npos) << md;
  EXPECT_NE(md.find("| alpha, 4 threads | coverage of the truth by mean ± sd | 0.65 (0.6–0.7) |  | below 0.68 for few samples |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| Minkowski functionals' distance, over bicubic's | 0.8 (0.8–0.8) |  | below 1 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| alpha, 4 threads | seconds per map | 1.15 (1–1.3) |  | lower |"), std::string::npos) << md;
  // The Pareto front of KL against size.
  EXPECT_NE(md.find("| q4_k_m | 4 | 0.05 (0.05–0.05) | yes |"), std::string::npos) << md;
  EXPECT_NE(md.find("| q6_k | 8 | 0.02 (0.02–0.02) |  |"), std::string::npos) << md;
  // BENCHMARKING.md: spreads over 10% are called noisy (avx512 decode, 5%, is not).
  EXPECT_NE(md.find("5 of these 6 measured figures spread more than 10%"), std::string::npos) << md;
  // Provenance under every table.
  EXPECT_NE(md.find("Measured on machines alpha (Test CPU A, 8 cores), beta (Test CPU B, 8 cores); commit abc1234 "
                    "(Release); 2026-01-02."),
            std::string::npos)
      << md;
}

TEST_F(StudyReportTest, HtmlEmbedsTheSpecsDataAndLibrary) {
  const StudyReport r = study_report(rows_, stub_, "study.db");
  EXPECT_EQ(r.charts, 5);
  for (const char* lib : {"<script>/*vega*/</script>", "<script>/*vega-lite*/</script>", "<script>/*vega-embed*/</script>"})
    EXPECT_NE(r.html.find(lib), std::string::npos) << lib;
  EXPECT_EQ(r.html.find("src=\"http"), std::string::npos);
  const Json specs = embedded_specs(r.html);
  ASSERT_EQ(specs.as_array().size(), 5u);
  for (const Json& spec : specs.as_array()) {
    EXPECT_NE(spec.at("title").at("subtitle").as_string().find("commit abc1234"), std::string::npos);
    EXPECT_FALSE(spec.at("data").at("values").as_array().empty());
  }
  // The ISA chart: both machines, the modeled figure marked as such, the ratio as a label.
  const Json& isa = specs.as_array()[0].at("data").at("values");
  int modeled = 0, hosts_beta = 0, label_250 = 0;
  for (const Json& v : isa.as_array()) {
    modeled += v.at("kind").as_string() == "modeled";
    hosts_beta += v.at("series").as_string() == "beta";
    label_250 += v.at("label").as_string() == "2.50×";
  }
  EXPECT_EQ(modeled, 1);
  EXPECT_EQ(hosts_beta, 2);
  EXPECT_EQ(label_250, 1);
  // Modeled marks are hollow and dashed: the kind scales map modeled to no fill and a dash.
  EXPECT_NE(specs.as_array()[0].dump().find("\"strokeDash\":{\"field\":\"kind\""), std::string::npos);
  EXPECT_NE(r.html.find("<em class=\"modeled\">modeled</em>"), std::string::npos);
  // The SR quality section: tables alone, each with its workload as the caption.
  EXPECT_NE(r.html.find("<h2>Super-resolution quality</h2>"), std::string::npos);
  EXPECT_NE(r.html.find("<caption>models/sr-default (f32, 3.2 MB) on synthetic:2:128:2001:mixed"), std::string::npos);
  EXPECT_NE(r.html.find("<td>30.5 (30–31)</td><td>28 (28–28)</td><td>higher</td>"), std::string::npos);
}

TEST_F(StudyReportTest, SectionsWithoutDataSaySoInOneLine) {
  std::vector<MetricRow> infer;
  for (const MetricRow& row : rows_)
    if (row.workload.name == "bench infer") infer.push_back(row);
  const StudyReport r = study_report(infer, stub_, "infer.db");
  EXPECT_EQ(r.charts, 1);
  EXPECT_EQ(embedded_specs(r.html).as_array().size(), 1u);
  for (const std::string& s : {r.markdown, r.html}) {
    EXPECT_NE(s.find("No quantization metrics in this store"), std::string::npos);
    EXPECT_NE(s.find("No bench sr figures in this store."), std::string::npos);
    EXPECT_NE(s.find("No sr eval figures in this store."), std::string::npos);
    EXPECT_NE(s.find("No pair of bench train figures"), std::string::npos);
  }
}

TEST_F(StudyReportTest, DataCannotCloseTheScriptElement) {
  for (MetricRow& row : rows_) row.machine.hostname = "</script><b>x";
  const StudyReport r = study_report(rows_, stub_, "study.db");
  EXPECT_EQ(r.html.find("</script><b>"), std::string::npos);
  EXPECT_EQ(embedded_specs(r.html).as_array()[0].at("data").at("values").as_array()[0].at("series").as_string(),
            "</script><b>x");
}

// The CLI: the report from a store (the assets named), and bad input refused by name, no file left.
TEST_F(StudyReportTest, CliWritesBothFilesAndRefusesBadInput) {
  const std::string assets = tmp_ / "node_modules";
  for (const char* f : {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js", "vega-embed/build/vega-embed.min.js"}) {
    fs::create_directories(fs::path(assets + "/" + f).parent_path());
    write_bytes(assets + "/" + f, "/*stub*/");
  }
  const std::string out = tmp_ / "r.html";
  CliResult r = run_genperf("report --db " + (tmp_ / "study.db") + " --out " + out + " --assets " + assets, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("5 charts"), std::string::npos) << r.out;
  EXPECT_NE(read_bytes(tmp_ / "r.md").find("## Flash against naive attention"), std::string::npos);
  EXPECT_NE(read_bytes(out).find("<script>/*stub*/</script>"), std::string::npos);

  const std::string bad_out = tmp_ / "bad.html", bad_md = tmp_ / "bad.md";
  write_bytes(tmp_ / "text.db", "not a database at all, just text that is long enough to be read as a header\n");
  fs::remove_all(assets + "/vega-lite");
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"--db " + (tmp_ / "missing.db") + " --assets " + assets, tmp_ / "missing.db"},
           {"--db " + (tmp_ / "text.db") + " --assets " + assets, tmp_ / "text.db"},
           {"--db " + (tmp_ / "study.db") + " --assets " + assets, "vega-lite.min.js"}}) {
    r = run_genperf("report " + args + " --out " + bad_out, tmp_);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(bad_out)) << args;
    EXPECT_FALSE(fs::exists(bad_md)) << args;
  }
  EXPECT_NE(r.err.find("scripts/deps.sh"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "missing.db"));  // a missing store is not created
}

// Why the page cannot be opened in a browser here, or "" when it can.
std::string browser_missing() {
  std::string v;
  if (testing::run_command("node --version 2>/dev/null", &v) != 0 || v.size() < 2 || std::atoi(v.c_str() + 1) < 20)
    return "the browser check needs Node.js >= 20; found '" + v + "'";
  if (!fs::exists("/usr/bin/chromium"))
    return "no /usr/bin/chromium: scripts/deps.sh installs Debian's chromium package";
  for (const char* p : {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js",
                        "vega-embed/build/vega-embed.min.js", "puppeteer-core/package.json"})
    if (!fs::exists(kRoot + "/tools/report/node_modules/" + p))
      return std::string("tools/report/node_modules/") + p + " is missing: scripts/deps.sh installs it with npm";
  return "";
}

// The page in a real browser: rendered, every chart with data marks and whiskers, no console or
// page error, no network request. The page and its screenshot are kept under the build's
// test-output/report/.
TEST_F(StudyReportTest, RendersInHeadlessChromium) {
  const std::string missing = browser_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  const std::string out = std::string(GENPERF_BINARY_DIR) + "/test-output/report";
  fs::create_directories(out);
  CliResult r = run_genperf("report --db " + (tmp_ / "study.db") + " --out " + out + "/report.html", tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string report;
  const int code = testing::run_command("node " + kRoot + "/tools/report/check_report.mjs " + out + "/report.html " +
                                            out + "/report.png 5 2>&1",
                                        &report);
  std::printf("screenshot: %s/report.png\n", out.c_str());
  ASSERT_EQ(code, 0) << report;
  const Json j = Json::parse(report.substr(report.find('{')), "check_report.mjs");
  ASSERT_EQ(j.at("charts").as_array().size(), 5u) << report;
  for (const Json& c : j.at("charts").as_array()) {
    EXPECT_GT(c.at("bars").as_number() + c.at("points").as_number(), 0) << c.dump();
    EXPECT_GT(c.at("whiskers").as_number(), 0) << c.dump();
  }
  EXPECT_TRUE(j.at("errors").as_array().empty()) << report;
  EXPECT_TRUE(j.at("requests").as_array().empty()) << report;
  EXPECT_TRUE(fs::file_size(out + "/report.png") > 10000) << report;
}

}  // namespace
}  // namespace genperf

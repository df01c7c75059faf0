// `genperf study` end to end: real records of `genperf bench infer`, `train`, `sr` and `sr eval` imported,
// stores merged in either form, exported and shown; bad input gives an error naming the file, a
// non-zero exit and no file left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "common/test_util.h"
#include "genperf/fileio.h"
#include "genperf/json.h"

using namespace genperf;
using genperf::testing::CliResult;
using genperf::testing::run_genperf;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kModels = std::string(GENPERF_TEST_DIR) + "/../models";

// One record of each benchmark, on the smallest shapes, and of sr eval on one small held-out
// map of the committed SR model, made once for the suite.
class StudyCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("study-cli");
    for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{
             {"infer", "bench infer --model random:tiny --reps 2 --prefill 16 --decode-prompt 8 --decode-tokens 2 --no-peaks"},
             {"train", "bench train --model random:tiny --seq 16 --reps 2 --no-peaks"},
             {"sr", "bench sr --batch 1 --size 16 --reps 2 --no-peaks"},
             {"sreval", "sr eval --model " + kModels + "/sr-default --data synthetic:2:64:2001 --steps 2 --samples 2 --tile 64"}}) {
      const CliResult r = run_genperf(args + " --threads 2 --json --out " + record(name), *dir_);
      ASSERT_EQ(r.code, 0) << args << ": " << r.err;
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string record(const std::string& name) { return *dir_ / (name + ".json"); }
  static TempDir* dir_;
  TempDir tmp_{"study-cli-case"};
};
TempDir* StudyCli::dir_ = nullptr;

int64_t count_of(const std::string& show, const std::string& what) {
  const size_t at = show.find(" " + what);
  EXPECT_NE(at, std::string::npos) << what << " in " << show;
  size_t start = show.rfind(' ', at - 1);
  start = start == std::string::npos ? 0 : start + 1;
  return std::stoll(show.substr(start, at - start));
}

}  // namespace

TEST_F(StudyCli, ImportMergeExportShow) {
  const std::string a = tmp_ / "a.db", b = tmp_ / "b.db", c = tmp_ / "c.db";
  CliResult r = run_genperf("study import --db " + a + " " + record("infer") + " " + record("train"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench infer run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bench train run"), std::string::npos) << r.out;
  r = run_genperf("study import " + record("infer") + " --db " + a, tmp_);  // the same record again
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(already stored)"), std::string::npos) << r.out;
  ASSERT_EQ(run_genperf("study import --db " + b + " " + record("sr"), tmp_).code, 0);

  r = run_genperf("study merge --db " + c + " " + a + " " + b, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  CliResult show = run_genperf("study show --db " + c, tmp_);
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(count_of(show.out, "runs"), 3);
  EXPECT_EQ(count_of(show.out, "machines"), 1);
  EXPECT_NE(show.out.find("train_step_seconds"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("prefill[tokens=16].seconds"), std::string::npos) << show.out;
  const int64_t metrics = count_of(show.out, "metrics"), samples = count_of(show.out, "samples");
  EXPECT_EQ(samples, 2 * metrics);  // every metric of these records has its two repetitions

  // The form: into the first store named; again, and the other way round: no duplicates.
  for (const std::string& args : {a + " " + b, a + " " + b + " " + c, b + " " + a}) {
    r = run_genperf("study merge " + args, tmp_);
    ASSERT_EQ(r.code, 0) << args << ": " << r.err;
  }
  for (const std::string& db : {a, b}) {
    show = run_genperf("study show --db " + db, tmp_);
    EXPECT_EQ(count_of(show.out, "runs"), 3) << db;
    EXPECT_EQ(count_of(show.out, "samples"), samples) << db;
  }

  r = run_genperf("study export --db " + a + " --csv " + (tmp_ / "a.csv") + " --json " + (tmp_ / "a.json"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse_file(tmp_ / "a.json");
  ASSERT_EQ(j.as_array().size(), size_t(metrics));
  std::set<std::string> kinds;
  for (const Json& m : j.as_array()) {
    kinds.insert(m.at("workload").as_string());
    EXPECT_EQ(m.at("samples").as_array().size(), 2u);
    EXPECT_EQ(m.at("threads").as_int(), 2);
    EXPECT_FALSE(m.at("commit").as_string().empty());
    EXPECT_NE(m.at("command").as_string().find("--out"), std::string::npos);
    if (m.at("workload").as_string() == "bench sr") {  // the 3 x 3 convolutions' algorithm is part of it
      EXPECT_NE(m.at("params").dump().find("conv3x3"), std::string::npos) << m.at("params").dump();
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"bench infer", "bench sr", "bench train"}));
  const std::string csv = read_text_file(tmp_ / "a.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), metrics + 1);
}

// sr eval's record: stored as a run of kind "sr eval" with its workload and figures (PSNR in dB,
// the seconds per map as samples), once however often it is imported; the report's SR quality
// table shows its figures beside bicubic's.
TEST_F(StudyCli, SrEvalRecordIsStoredOnceAndReported) {
  const std::string db = tmp_ / "sr.db";
  const Json rec = Json::parse_file(record("sreval"));
  CliResult r = run_genperf("study import --db " + db + " " + record("sreval"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(": sr eval run "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", 21 metrics"), std::string::npos) << r.out;  // 20 figures and the seconds per map
  const std::string before = run_genperf("study show --db " + db, tmp_).out;
  r = run_genperf("study import --db " + db + " " + record("sreval") + " " + record("sreval"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(already stored)"), std::string::npos) << r.out;
  const std::string after = run_genperf("study show --db " + db, tmp_).out;
  EXPECT_EQ(count_of(after, "runs"), 1) << after;
  EXPECT_EQ(count_of(after, "samples"), count_of(before, "samples")) << after;
  EXPECT_EQ(count_of(after, "samples"), 20 + 2);  // a sample per figure, one per map timed
  // A record written before the wide-band spectrum figures existed is stored without them.
  {
    Json::Object kept;
    for (const auto& [key, value] : rec.as_object())
      if (key.find("_wide") == std::string::npos) kept.emplace_back(key, value);
    write_file_atomic(tmp_ / "sreval-old.json", Json(std::move(kept)).dump());
    r = run_genperf("study import --db " + (tmp_ / "old.db") + " " + (tmp_ / "sreval-old.json"), tmp_);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(", 19 metrics"), std::string::npos) << r.out;
  }

  r = run_genperf("study export --db " + db + " --json " + (tmp_ / "sr.json"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> names;
  const Json metrics = Json::parse_file(tmp_ / "sr.json");
  for (const Json& m : metrics.as_array()) {
    const std::string name = m.at("metric").as_string();
    names.insert(name);
    EXPECT_EQ(m.at("workload").as_string(), "sr eval");
    EXPECT_EQ(m.at("params").at("data").as_string(), "synthetic:2:64:2001");
    EXPECT_EQ(m.at("params").at("weight_types").as_string(), "f32");
    EXPECT_EQ(m.at("params").at("steps").as_int(), 2);
    EXPECT_EQ(m.at("unit").as_string(), name.rfind("psnr", 0) == 0 ? "dB" : name == "seconds_per_map" ? "s" : "") << name;
    if (name == "seconds_per_map") {
      EXPECT_EQ(m.at("samples").as_array().size(), 2u);
    } else {
      EXPECT_EQ(m.at("median").as_number(), rec.at(name).as_number()) << name;
    }
  }
  for (const char* name : {"psnr_mean", "psnr_bicubic", "ssim_bicubic", "w1", "coverage", "coverage_predictive", "minkowski", "seconds_per_map"})
    EXPECT_TRUE(names.count(name)) << name;

  const std::string assets = tmp_ / "node_modules";
  for (const char* f : {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js", "vega-embed/build/vega-embed.min.js"}) {
    fs::create_directories(fs::path(assets + "/" + f).parent_path());
    write_file_atomic(assets + "/" + f, "/*stub*/");
  }
  r = run_genperf("report --db " + db + " --out " + (tmp_ / "r.html") + " --assets " + assets, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  auto fig = [&](const char* key) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", rec.at(key).as_number());
    return std::string(b);
  };
  const std::string md = read_text_file(tmp_ / "r.md"), html = read_text_file(tmp_ / "r.html");
  EXPECT_NE(md.find("## Super-resolution quality"), std::string::npos) << md;
  EXPECT_NE(md.find(kModels + "/sr-default (f32, "), std::string::npos) << md;
  EXPECT_NE(md.find(" threads | PSNR of the samples' mean (dB) | " + fig("psnr_mean") + " | " + fig("psnr_bicubic") +
                    " | higher |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find(" threads | SSIM of the mean | " + fig("ssim_mean") + " | " + fig("ssim_bicubic") + " |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find(" threads | Minkowski functionals' distance, over bicubic's | " + fig("minkowski") + " |  |"),
            std::string::npos)
      << md;
  EXPECT_NE(html.find("<h2>Super-resolution quality</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>" + fig("w1") + "</td><td>" + fig("w1_bicubic") + "</td>"), std::string::npos);
}

// The hardware model on real records: given peaks (nothing measured), predictions stored as
// modeled; a store with nothing it can cost is refused by name.
TEST_F(StudyCli, ModelPredictsAndStoresModeledFigures) {
  const std::string db = tmp_ / "m.db", empty = tmp_ / "sr.db";
  CliResult r = run_genperf("study import --db " + db + " " + record("infer") + " " + record("train"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string given = " --peak-f32-gflops 100 --peak-bf16-gflops 200 --bandwidth-gbs 20";
  r = run_genperf("study model --db " + db + " --devices h100,gaudi2" + given, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"calibration", "decode", "prefill", "train", "*modeled*", "stored", "miss", "https://"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " in " << r.out;
  r = run_genperf("study show --db " + db, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("h100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[modeled]"), std::string::npos) << r.out;
  r = run_genperf("study import --db " + empty + " " + record("sr"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_genperf("study model --db " + empty + given, tmp_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("[hw model] " + empty), std::string::npos) << r.err;
}

TEST_F(StudyCli, BadInputNamesTheFileAndLeavesNothing) {
  const std::string fresh = tmp_ / "fresh.db", bad = tmp_ / "bad.json";
  write_file_atomic(bad, "{\"loss\": 1.5}\n");
  CliResult r = run_genperf("study import --db " + fresh + " " + record("infer") + " " + bad, tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh));  // not created half-written

  r = run_genperf("study import --db " + fresh + " " + (tmp_ / "missing.json"), tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh));

  const std::string junk = tmp_ / "junk.db", out = tmp_ / "out.csv";
  write_file_atomic(junk, std::string(2048, 'j'));
  r = run_genperf("study export --db " + junk + " --csv " + out, tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(junk + ": not an SQLite database"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));

  ASSERT_EQ(run_genperf("study import --db " + fresh + " " + record("sr"), tmp_).code, 0);
  r = run_genperf("study merge --db " + (tmp_ / "merged.db") + " " + fresh + " " + junk, tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "merged.db"));
  r = run_genperf("study merge " + (tmp_ / "typo.db") + " " + fresh, tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("typo.db: no such results store"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "typo.db"));

  // The quick suite without the default models (named, so that the test does not depend on the
  // directory it runs in).
  r = run_genperf("study --models " + (tmp_ / "no-models") + " --out " + (tmp_ / "study"), tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no-models/default/config.json is missing"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "study/study.db"));
  EXPECT_EQ(run_genperf("study no-such-step --db " + fresh, tmp_).code, 2);
  EXPECT_EQ(run_genperf("study --help", tmp_).code, 0);
  EXPECT_EQ(run_genperf("study export --db " + fresh, tmp_).code, 1);  // no output named
  for (const char* sub : {"import", "merge", "export", "show"}) {
    r = run_genperf(std::string("study ") + sub + " --help", tmp_);
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("usage: genperf study"), std::string::npos) << sub;
  }
}

// `genperf study --suite quick`: every workload of the suite on this machine (its ISA levels; 2
// ranks where mpirun is present), each record kept and stored once under the suite; a study
// missing a record (interrupted) runs that workload alone when started again.
TEST_F(StudyCli, TheQuickSuiteRunsStoresAndResumes) {
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // OpenMPI's own allocations, in the sanitizer build
  setenv("OMPI_MCA_orte_tmpdir_base", tmp_.path().c_str(), 1);  // OpenMPI's session directory: test_dist.cpp
  const std::string& models = kModels;
  const std::string out = tmp_ / "study";
  CliResult r = run_genperf("study --suite quick --out " + out + " --models " + models, tmp_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(out + "/records")) n += e.path().extension() == ".json";
  EXPECT_GE(n, 10) << r.out;  // 1+ ISA levels, 4 attention runs, 1+ rank runs, 1+ SR runs, SR quality
  EXPECT_NE(r.out.find("/" + std::to_string(n) + "] infer.generic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train.flash.seq512"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] sr.eval "), std::string::npos) << r.out;
  EXPECT_EQ(Json::parse_file(out + "/records/sr.eval.json").at("maps").as_array().size(), 2u);
  CliResult show = run_genperf("study show --db " + out + "/study.db", tmp_);
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(count_of(show.out, "runs"), n) << show.out;

  fs::remove(out + "/records/train.flash.seq128.json");
  r = run_genperf("study --suite quick --out " + out + " --models " + models, tmp_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  int64_t kept = 0;
  for (size_t at = 0; (at = r.out.find("kept from an earlier run", at)) != std::string::npos; ++at) ++kept;
  EXPECT_EQ(kept, n - 1) << r.out;
  EXPECT_TRUE(fs::exists(out + "/records/train.flash.seq128.json"));

  r = run_genperf("study --out " + std::string(tmp_ / "other") + " --models " + std::string(tmp_ / "nowhere"), tmp_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(std::string(tmp_ / "nowhere") + "/default/config.json is missing"), std::string::npos) << r.err;
}

// The results store (docs/STUDY.md): runs with metrics and samples read back, machines told apart
// by fingerprint, merges that give the union without duplicates whatever their order, CSV and JSON
// export read back, files that are not stores refused by name, bench records imported, and the
// file read by another SQLite client (Python's). Nothing here is timed.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/llama.h"
#include "genperf/runtime.h"
#include "genperf/study_store.h"

using namespace genperf;
using genperf::testing::run_command;
using genperf::testing::TempDir;
using genperf::testing::write_bytes;

namespace {

// A machine as provenance() would describe it, with the fields a test varies.
MachineRecord machine(const std::string& host, int64_t memory_bytes = int64_t(16) << 30) {
  Provenance p;
  p.cpu = "Test CPU 9000";
  p.isa_flags = "avx2 fma f16c";
  p.hostname = host;
  p.os = "Linux 6.1";
  p.cores = 8;
  p.memory_bytes = memory_bytes;
  return machine_record(p);
}

RunRecord run(const std::string& started, const std::string& command = "genperf bench infer") {
  RunRecord r;
  r.suite = "quick";
  r.command = command;
  r.commit = "abc1234";
  r.build_type = "Release";
  r.threads = 4;
  r.libraries = Json::Object{{"onednn", "3.0.0"}, {"compiler", "gcc 12.2.0"}};
  r.started = started;
  return r;
}

const Workload kGemm{"gemm", Json::Object{{"n", 256}, {"dtype", "f32"}}};
const Workload kOdd{"odd, \"quoted\" workload", Json::Object{{"note", "a, \"b\"\nc"}, {"k", 3}}};
const DeviceRecord kCpu{"cpu", "Test CPU 9000", "avx2"};

// One run on `host` with a measured and a modeled metric; returns its uuid.
std::string add_run(ResultsStore& s, const std::string& host, const std::string& started, double base) {
  RunRecord r = run(started);
  const int64_t id = s.begin_run(machine(host), r);
  s.add_metric(id, kGemm, kCpu, "seconds", "s", Stats::of({base + 0.3, base + 0.1, base + 0.2}));
  s.add_metric(id, kOdd, kCpu, "seconds", "s", Stats::of({base, base + 0.5}));
  s.add_modeled_metric(id, kGemm, kCpu, "predicted_seconds", "s", base * 0.9);
  s.finish_run(id, started + "+1");
  return r.uuid;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

void sql(const std::string& path, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, statements.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// RFC 4180: fields separated by commas, records by CRLF, quoted fields with doubled quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::string& field = rows.back().back();
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += text[++i];
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      rows.emplace_back(1);
    } else {
      field += c;
    }
  }
  if (rows.back() == std::vector<std::string>(1)) rows.pop_back();
  return rows;
}

}  // namespace

TEST(Store, RunWithMetricsAndSamplesReadsBack) {
  TempDir tmp("study");
  const std::string path = tmp / "r.db";
  std::string uuid;
  {
    ResultsStore s(path);
    uuid = add_run(s, "alpha", "2024-05-01T10:00:00Z", 1.0);
  }
  const ResultsStore s(path, ResultsStore::Mode::Existing);
  const StoreCounts c = s.counts();
  EXPECT_EQ(c.runs, 1);
  EXPECT_EQ(c.machines, 1);
  EXPECT_EQ(c.devices, 1);
  EXPECT_EQ(c.workloads, 2);
  EXPECT_EQ(c.metrics, 3);
  EXPECT_EQ(c.samples, 5);  // the modeled metric has none
  const std::vector<MetricRow> rows = s.metrics({uuid, "gemm", "seconds"});
  ASSERT_EQ(rows.size(), 1u);
  const MetricRow& r = rows[0];
  EXPECT_EQ(r.samples, (std::vector<double>{1.3, 1.1, 1.2}));  // repetition order kept
  EXPECT_DOUBLE_EQ(r.median, 1.2);
  EXPECT_DOUBLE_EQ(r.min, 1.1);
  EXPECT_DOUBLE_EQ(r.max, 1.3);
  EXPECT_EQ(r.kind, MetricKind::Measured);
  EXPECT_EQ(r.unit, "s");
  EXPECT_EQ(r.run.uuid, uuid);
  EXPECT_EQ(r.run.command, "genperf bench infer");
  EXPECT_EQ(r.run.commit, "abc1234");
  EXPECT_EQ(r.run.threads, 4);
  EXPECT_EQ(r.run.libraries.at("onednn").as_string(), "3.0.0");
  EXPECT_EQ(r.run.started, "2024-05-01T10:00:00Z");
  EXPECT_EQ(r.run.finished, "2024-05-01T10:00:00Z+1");
  EXPECT_EQ(r.machine.hostname, "alpha");
  EXPECT_EQ(r.machine.cores, 8);
  EXPECT_EQ(r.machine.fingerprint, machine("alpha").fingerprint);
  EXPECT_EQ(r.device.isa_path, "avx2");
  EXPECT_EQ(canonical_json(r.workload.params), "{\"dtype\":\"f32\",\"n\":256}");
  const std::vector<MetricRow> modeled = s.metrics({"", "", "predicted_seconds"});
  ASSERT_EQ(modeled.size(), 1u);
  EXPECT_EQ(modeled[0].kind, MetricKind::Modeled);
  EXPECT_TRUE(modeled[0].samples.empty());
  EXPECT_DOUBLE_EQ(modeled[0].median, 0.9);
  EXPECT_EQ(s.metrics().size(), 3u);
  EXPECT_TRUE(s.has_run(uuid));
  EXPECT_FALSE(s.has_run(random_uuid()));
}

TEST(Store, MachinesAreKnownByFingerprint) {
  EXPECT_EQ(machine("alpha").fingerprint, machine("alpha").fingerprint);
  EXPECT_NE(machine("alpha").fingerprint, machine("beta").fingerprint);
  // A kernel that reserves a few MB more is the same machine; another memory size is not.
  EXPECT_EQ(machine("alpha").fingerprint, machine("alpha", (int64_t(16) << 30) - (int64_t(40) << 20)).fingerprint);
  EXPECT_NE(machine("alpha").fingerprint, machine("alpha", int64_t(32) << 30).fingerprint);
  const MachineRecord here = this_machine();
  EXPECT_EQ(here.fingerprint, this_machine().fingerprint);
  EXPECT_EQ(here.fingerprint.size(), 16u);
  EXPECT_FALSE(here.hostname.empty());
  EXPECT_GT(here.cores, 0);
  EXPECT_GT(here.memory_bytes, 0);

  TempDir tmp("study");
  ResultsStore s(tmp / "m.db");
  add_run(s, "alpha", "2024-05-01T10:00:00Z", 1.0);
  add_run(s, "alpha", "2024-05-02T10:00:00Z", 2.0);
  EXPECT_EQ(s.counts().machines, 1);
  EXPECT_EQ(s.counts().devices, 1);
  EXPECT_EQ(s.counts().workloads, 2);
  add_run(s, "beta", "2024-05-03T10:00:00Z", 3.0);
  EXPECT_EQ(s.counts().machines, 2);
  EXPECT_EQ(s.counts().devices, 2);  // the same CPU model on another machine is another device
  EXPECT_EQ(s.counts().runs, 3);
}

TEST(Store, ATransactionNotCommittedLeavesNothing) {
  TempDir tmp("study");
  ResultsStore s(tmp / "t.db");
  try {
    ResultsStore::Transaction t(s);
    add_run(s, "alpha", "2024-05-01T10:00:00Z", 1.0);
    throw Error("stop");
  } catch (const Error&) {
  }
  EXPECT_EQ(s.counts().runs, 0);
  EXPECT_EQ(s.counts().machines, 0);
  // A metric stored twice is refused, and the run's other writes stay.
  RunRecord r = run("2024-05-01T10:00:00Z");
  const int64_t id = s.begin_run(machine("alpha"), r);
  s.add_metric(id, kGemm, kCpu, "seconds", "s", Stats::of({1.0}));
  EXPECT_THROW(s.add_metric(id, kGemm, kCpu, "seconds", "s", Stats::of({2.0})), Error);
  EXPECT_THROW(s.add_metric(id, kGemm, kCpu, "empty", "s", Stats{}), Error);
  EXPECT_EQ(s.counts().metrics, 1);
  EXPECT_EQ(s.counts().samples, 1);
}

TEST(Store, MergeGivesTheUnionWithoutDuplicates) {
  TempDir tmp("study");
  const std::string a = tmp / "a.db", b = tmp / "b.db", c = tmp / "c.db";
  {
    ResultsStore sa(a), sb(b);
    add_run(sa, "alpha", "2024-05-01T10:00:00Z", 1.0);
    add_run(sa, "alpha", "2024-05-02T10:00:00Z", 2.0);
    add_run(sb, "gpu-box", "2024-05-01T11:00:00Z", 0.1);
  }
  ResultsStore sc(c);
  MergeResult m = sc.merge(a);
  EXPECT_EQ(m.runs_added, 2);
  m = sc.merge(b);
  EXPECT_EQ(m.runs_added, 1);
  const StoreCounts u = sc.counts();
  EXPECT_EQ(u.runs, 3);
  EXPECT_EQ(u.machines, 2);
  EXPECT_EQ(u.devices, 2);
  EXPECT_EQ(u.workloads, 2);  // the same workloads on both machines
  EXPECT_EQ(u.metrics, 9);
  EXPECT_EQ(u.samples, 15);
  // The same stores again, or the store into itself: nothing new.
  m = sc.merge(a);
  EXPECT_EQ(m.runs_added, 0);
  EXPECT_EQ(m.runs_skipped, 2);
  EXPECT_EQ(sc.merge(c).runs_added, 0);
  EXPECT_EQ(sc.counts().metrics, u.metrics);
  EXPECT_EQ(sc.counts().samples, u.samples);

  // A into B and B into A give the same store: the same rows, in the same order.
  {
    ResultsStore sa(a), sb(b);
    sa.merge(b);
    sb.merge(a);
    sa.merge(b);
    EXPECT_EQ(sa.counts().runs, 3);
    EXPECT_EQ(sb.counts().samples, u.samples);
    EXPECT_EQ(metrics_csv(sa.metrics()), metrics_csv(sb.metrics()));
    EXPECT_EQ(metrics_csv(sa.metrics()), metrics_csv(sc.metrics()));
  }
  const std::vector<MetricRow> gpu = sc.metrics({"", "gemm", "seconds"});
  ASSERT_EQ(gpu.size(), 3u);
  EXPECT_EQ(gpu[1].machine.hostname, "gpu-box");  // ordered by start time
  EXPECT_EQ(gpu[1].samples, (std::vector<double>{0.1 + 0.3, 0.1 + 0.1, 0.1 + 0.2}));
}

TEST(Store, ExportCsvAndJsonReadBack) {
  TempDir tmp("study");
  ResultsStore s(tmp / "e.db");
  RunRecord r = run("2024-05-01T10:00:00Z", "genperf bench infer --prefill 16,48 --note \"x\"");
  const int64_t id = s.begin_run(machine("alpha"), r);
  s.add_metric(id, kOdd, kCpu, "prefill[tokens=16].seconds", "s", Stats::of({0.125, 1.0 / 3, 2e-9}));
  s.add_modeled_metric(id, kGemm, kCpu, "predicted", "s", 0.5);
  export_csv(s, tmp / "m.csv");
  export_json(s, tmp / "m.json");

  const auto rows = parse_csv(read_text_file(tmp / "m.csv"));
  ASSERT_EQ(rows.size(), 3u);
  const std::vector<std::string>& head = rows[0];
  auto col = [&](const std::vector<std::string>& row, const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    EXPECT_NE(it, head.end()) << name;
    return row.at(size_t(it - head.begin()));
  };
  for (const auto& row : rows) EXPECT_EQ(row.size(), head.size());
  // Ordered by workload name: "gemm" before "odd, ...".
  const std::vector<std::string>& odd = rows[2];
  EXPECT_EQ(col(odd, "workload"), kOdd.name);
  EXPECT_EQ(Json::parse(col(odd, "params")).at("note").as_string(), "a, \"b\"\nc");
  EXPECT_EQ(col(odd, "command"), r.command);
  EXPECT_EQ(col(odd, "metric"), "prefill[tokens=16].seconds");
  EXPECT_EQ(col(odd, "n"), "3");
  EXPECT_EQ(col(odd, "run"), r.uuid);
  EXPECT_EQ(col(odd, "hostname"), "alpha");
  EXPECT_EQ(Json::parse(col(odd, "libraries")).at("compiler").as_string(), "gcc 12.2.0");
  EXPECT_EQ(col(odd, "samples"), "0.125;0.3333333333333333;2e-09");
  EXPECT_EQ(std::stod("0.3333333333333333"), 1.0 / 3);  // read back exactly
  EXPECT_EQ(std::stod(col(odd, "median")), 0.125);
  EXPECT_EQ(col(rows[1], "kind"), "modeled");
  EXPECT_EQ(col(rows[1], "samples"), "");

  const Json j = Json::parse_file(tmp / "m.json");
  ASSERT_EQ(j.as_array().size(), 2u);
  const Json& o = j.as_array()[1];
  EXPECT_EQ(o.at("params").at("note").as_string(), "a, \"b\"\nc");
  ASSERT_EQ(o.at("samples").as_array().size(), 3u);
  EXPECT_EQ(o.at("samples").as_array()[1].as_number(), 1.0 / 3);
  EXPECT_EQ(o.at("n").as_int(), 3);
  EXPECT_EQ(o.at("cores").as_int(), 8);
  EXPECT_TRUE(j.as_array()[0].at("samples").as_array().empty());
}

TEST(Store, FilesThatAreNotStoresAreRefusedByName) {
  TempDir tmp("study");
  const std::string missing = tmp / "missing.db";
  expect_error([&] { ResultsStore s(missing, ResultsStore::Mode::Existing); }, {missing, "no such results store"});
  EXPECT_FALSE(std::filesystem::exists(missing));

  const std::string junk = tmp / "junk.db";
  write_bytes(junk, std::string(4096, 'x'));
  expect_error([&] { ResultsStore s(junk); }, {junk, "not an SQLite database"});
  EXPECT_EQ(genperf::testing::read_bytes(junk), std::string(4096, 'x'));  // untouched

  const std::string other = tmp / "other.db";
  sql(other, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);");
  expect_error([&] { ResultsStore s(other); }, {other, "not a genperf results store"});

  const std::string empty = tmp / "empty.db";
  write_bytes(empty, "");
  expect_error([&] { ResultsStore s(empty, ResultsStore::Mode::Existing); }, {empty, "not a genperf results store"});
  { ResultsStore s(empty); }  // Create makes an empty file a store
  { ResultsStore s(empty, ResultsStore::Mode::Existing); }

  const std::string newer = tmp / "newer.db";
  { ResultsStore s(newer); }
  sql(newer, "PRAGMA user_version = 2;");
  expect_error([&] { ResultsStore s(newer); }, {newer, "schema version 2", "reads version 1"});
  ResultsStore dest(tmp / "dest.db");
  expect_error([&] { dest.merge(newer); }, {newer, "schema version 2"});
  expect_error([&] { dest.merge(junk); }, {junk, "not an SQLite database"});
  EXPECT_EQ(dest.counts().runs, 0);
}

namespace {

// A real record of `genperf bench infer`, as its --out writes it, on a tiny random model.
Json infer_record() {
  LlamaModel m(random_checkpoint(preset_config("tiny"), DType::BF16, 1));
  InferBenchOptions o;
  o.prefill_lengths = {8, 16};
  o.decode_prompt = 8;
  o.decode_tokens = 2;
  o.reps = 3;
  o.measure_peaks = false;
  Json r = bench_infer(m, o);
  r["model"] = "random:tiny";
  r["weight_types"] = m.weight_types();
  r["provenance"] = provenance("genperf bench infer --model random:tiny").to_json();
  return r;
}

}  // namespace

TEST(Store, BenchRecordImportsOnce) {
  TempDir tmp("study");
  ResultsStore s(tmp / "i.db");
  const Json rec = infer_record();
  const ImportResult r = import_bench_record(s, rec, "r.json");
  EXPECT_EQ(r.kind, "bench infer");
  EXPECT_FALSE(r.already_stored);
  EXPECT_EQ(r.metrics, 4);  // prefill at 8 and 16, decode, time to first token
  const std::vector<MetricRow> rows = s.metrics();
  ASSERT_EQ(rows.size(), 4u);
  std::vector<std::string> names;
  for (const MetricRow& m : rows) {
    names.push_back(m.name);
    EXPECT_EQ(m.samples.size(), 3u) << m.name;
    EXPECT_EQ(m.unit, "s") << m.name;
    EXPECT_EQ(m.workload.name, "bench infer");
    EXPECT_EQ(m.device.isa_path, isa_path());
    EXPECT_EQ(m.machine.fingerprint, this_machine().fingerprint);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"decode.seconds_per_token", "prefill[tokens=16].seconds",
                                             "prefill[tokens=8].seconds", "time_to_first_token_s"}));
  const Json& params = rows[0].workload.params;
  EXPECT_EQ(params.at("model").as_string(), "random:tiny");
  EXPECT_EQ(params.at("decode.prompt_tokens").as_int(), 8);
  EXPECT_EQ(params.at("kv_type").as_string(), "f32");
  EXPECT_EQ(rows[0].samples, [&] {
    std::vector<double> v;
    for (const Json& x : rec.at("decode").at("seconds_per_token").at("samples").as_array()) v.push_back(x.as_number());
    return v;
  }());
  EXPECT_EQ(rows[0].run.command, "genperf bench infer --model random:tiny");
  EXPECT_FALSE(rows[0].run.libraries.at("onednn").as_string().empty());

  const StoreCounts before = s.counts();
  EXPECT_TRUE(import_bench_record(s, rec, "again.json").already_stored);
  const Json::Object reversed(rec.as_object().rbegin(), rec.as_object().rend());  // as another tool may write it
  EXPECT_TRUE(import_bench_record(s, Json(reversed), "reordered.json").already_stored);
  EXPECT_EQ(s.counts().samples, before.samples);

  // Not records, or records that contradict themselves: refused, naming the file and the field.
  expect_error([&] { import_bench_record(s, Json::parse("[1, 2]"), "a.json"); }, {"a.json", "not a genperf bench record"});
  expect_error([&] { import_bench_record(s, Json::parse("{\"decode\": {}}"), "b.json"); }, {"b.json", "no provenance"});
  const Json other = Json::Object{{"provenance", rec.at("provenance")}, {"loss", 1.5}};
  expect_error([&] { import_bench_record(s, other, "c.json"); }, {"c.json", "not a record of bench infer, bench train, bench sr, eval kl, eval mc, eval ppl, sr eval",
                                                              "psnr_bicubic"});
  Json lying = rec;
  lying["time_to_first_token_s"]["median"] = 12345.0;
  expect_error([&] { import_bench_record(s, lying, "d.json"); }, {"d.json", "time_to_first_token_s.median", "12345"});
  Json miscounted = rec;
  miscounted["time_to_first_token_s"]["n"] = 7;
  expect_error([&] { import_bench_record(s, miscounted, "e.json"); }, {"e.json", "time_to_first_token_s", "n 7"});
  Json no_commit = rec;
  no_commit["provenance"]["commit"] = 3;
  expect_error([&] { import_bench_record(s, no_commit, "f.json"); }, {"f.json", "provenance.commit"});
  EXPECT_EQ(s.counts().runs, before.runs);
  EXPECT_EQ(s.counts().metrics, before.metrics);
}

// Another SQLite client reads the schema: Python's sqlite3 module joins the tables on their keys.
TEST(Store, PythonReadsTheStore) {
  if (run_command(std::string(GENPERF_PYTHON) + " -c 'import sqlite3' 2>/dev/null") != 0)
    GTEST_SKIP() << GENPERF_PYTHON << " with its sqlite3 module is missing";
  TempDir tmp("study");
  const std::string path = tmp / "p.db";
  {
    ResultsStore s(path);
    add_run(s, "alpha", "2024-05-01T10:00:00Z", 1.0);
    add_run(s, "beta", "2024-05-02T10:00:00Z", 2.0);
  }
  const std::string script = tmp / "read.py";
  write_file_atomic(script, R"py(import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("PRAGMA user_version").fetchone()[0] == 1
rows = db.execute("""SELECT m.hostname, w.name, w.params, x.name, x.median, group_concat(s.value, ';')
  FROM metrics x JOIN runs r ON r.id = x.run_id JOIN machines m ON m.id = r.machine_id
  JOIN workloads w ON w.id = x.workload_id LEFT JOIN samples s ON s.metric_id = x.id
  WHERE x.kind = 'measured' GROUP BY x.id ORDER BY m.hostname, w.name""").fetchall()
for host, workload, params, metric, median, samples in rows:
  values = sorted(float(v) for v in samples.split(';'))
  assert abs(values[len(values) // 2] - median) < 1e-12 or len(values) % 2 == 0, (metric, values, median)
  print(host, workload, json.loads(params).get('n', '-'), metric, len(values))
)py");
  std::string out;
  ASSERT_EQ(run_command(std::string(GENPERF_PYTHON) + " " + script + " " + path, &out), 0) << out;
  EXPECT_EQ(out,
            "alpha gemm 256 seconds 3\n"
            "alpha odd, \"quoted\" workload - seconds 2\n"
            "beta gemm 256 seconds 3\n"
            "beta odd, \"quoted\" workload - seconds 2\n");
}

// An evaluation's record (`genperf eval kl --out`): its figures are metrics of one sample each, and
// the model's weights' bytes are a parameter of its workload (the size accuracy is set against).
TEST(Store, EvalRecordsImportTheirFiguresAndSize) {
  TempDir tmp("study");
  ResultsStore s(tmp / "e.db");
  Json rec = Json::Object{{"model", "q4.gguf"}, {"eval", "kl"}, {"ref", "models/default"}, {"weight_types", "q4_0"},
                          {"weights_bytes", int64_t(3847000)}, {"parameters", int64_t(6800000)}, {"kl_mean", 0.026},
                          {"kl_p99", 0.1}, {"kl_max", 0.6}, {"top1_agreement", 0.87}, {"ppl", 76.8}, {"ppl_ref", 75.8},
                          {"ppl_delta", 1.0}, {"tokens", int64_t(6000)}, {"max_bytes", int64_t(24000)}};
  rec["provenance"] = provenance("genperf eval kl --model q4.gguf").to_json();
  const ImportResult r = import_bench_record(s, rec, "kl.json", "quick");
  EXPECT_EQ(r.kind, "eval kl");
  EXPECT_EQ(r.metrics, 5);  // kl_mean, kl_p99, top1_agreement, ppl, ppl_delta
  const std::vector<MetricRow> rows = s.metrics();
  ASSERT_EQ(rows.size(), 5u);
  for (const MetricRow& m : rows) {
    EXPECT_EQ(m.samples.size(), 1u) << m.name;
    EXPECT_EQ(m.run.suite, "quick");
    EXPECT_EQ(m.workload.params.at("weights_bytes").as_int(), 3847000);
    EXPECT_EQ(m.workload.params.at("max_bytes").as_int(), 24000);
    if (m.name == "kl_mean") {
      EXPECT_EQ(m.median, 0.026);
    }
  }
  Json bad = Json::Object{};
  for (const auto& [k, v] : rec.as_object())
    if (k != "ppl_delta") bad[k] = v;
  expect_error([&] { import_bench_record(s, bad, "bad.json"); }, {"bad.json", "without a number at ppl_delta"});
}

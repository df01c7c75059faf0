// genperf study: the results store of the comparative study (docs/STUDY.md): bench records in,
// stores of several machines merged, CSV and JSON out, a summary.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common.h"
#include "genperf/error.h"
#include "genperf/hw_model.h"
#include "genperf/study.h"
#include "genperf/study_store.h"

namespace genperf::cli {
namespace {

namespace fs = std::filesystem;

// The files named on the command line and the options around them: Args sees the options only.
struct Split {
  std::vector<std::string> files;
  std::vector<char*> options;
};

Split split_files(int argc, char** argv, const std::vector<std::string>& value_options) {
  Split s;
  s.options.assign(argv, argv + 3);
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0 && a != "-h") {
      s.files.push_back(a);
      continue;
    }
    s.options.push_back(argv[i]);
    for (const std::string& o : value_options)
      if (a == "--" + o && i + 1 < argc) s.options.push_back(argv[++i]);
  }
  return s;
}

// Runs fn on the store at `path`; a store this command created is removed again when fn fails,
// so that a failed command leaves no file behind.
template <typename F>
void with_store(const std::string& path, ResultsStore::Mode mode, F fn) {
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  try {
    ResultsStore s(path, mode);
    fn(s);
  } catch (...) {
    if (!existed) {
      fs::remove(path, ec);
      fs::remove(path + "-journal", ec);
    }
    throw;
  }
}

const OptionSpec kDb{"db", "the results store (an SQLite file)"};

int cmd_study_import(int argc, char** argv) {
  Split sp = split_files(argc, argv, {"db"});
  Args a("study import --db FILE RECORD.json...", {{"db", "the results store; created when missing"}},
         int(sp.options.size()), sp.options.data(), 3);
  if (run_help(a)) return 0;
  GP_CHECK(!sp.files.empty(), "[study import] name the records: genperf study import --db FILE RECORD.json...");
  // Every record is read and checked before the store is touched, and stored in one transaction:
  // one bad record leaves the store as it was.
  std::vector<Json> records;
  for (const std::string& f : sp.files) records.push_back(Json::parse_file(f));
  with_store(a.str("db"), ResultsStore::Mode::Create, [&](ResultsStore& s) {
    ResultsStore::Transaction t(s);
    std::vector<ImportResult> results;
    for (size_t i = 0; i < records.size(); ++i) results.push_back(import_bench_record(s, records[i], sp.files[i]));
    t.commit();
    for (size_t i = 0; i < results.size(); ++i) {
      const ImportResult& r = results[i];
      std::printf("%s: %s run %s, %lld metrics%s\n", sp.files[i].c_str(), r.kind.c_str(), r.uuid.c_str(),
                  (long long)r.metrics, r.already_stored ? " (already stored)" : "");
    }
  });
  return 0;
}

int cmd_study_merge(int argc, char** argv) {
  Split sp = split_files(argc, argv, {"db"});
  Args a("study merge [--db OUT.db] A.db B.db...",
         {{"db", "the store to merge into, created when missing (default: the first store named)", "", false, true}},
         int(sp.options.size()), sp.options.data(), 3);
  if (run_help(a)) return 0;
  std::vector<std::string> sources = sp.files;
  const bool into_first = !a.has("db");
  GP_CHECK(!sources.empty(), "[study merge] name the stores: genperf study merge [--db OUT.db] A.db B.db...");
  const std::string dest = into_first ? sources.front() : a.str("db");
  if (into_first) sources.erase(sources.begin());
  GP_CHECK(!sources.empty(), "[study merge] name at least one store to merge into ", dest);
  // Merging into the first store named needs it to exist: a misspelt name must not become a store.
  with_store(dest, into_first ? ResultsStore::Mode::Existing : ResultsStore::Mode::Create, [&](ResultsStore& s) {
    for (const std::string& src : sources) {
      const MergeResult r = s.merge(src);
      std::printf("%s: %lld runs added to %s, %lld already there\n", src.c_str(), (long long)r.runs_added,
                  dest.c_str(), (long long)r.runs_skipped);
    }
  });
  return 0;
}

int cmd_study_export(int argc, char** argv) {
  Args a("study export",
         {kDb, {"csv", "write a CSV file: one row per metric, samples joined by ';'", "", false, true},
          {"json", "write a JSON file: an array of one object per metric", "", false, true}},
         argc, argv, 3);
  if (run_help(a)) return 0;
  GP_CHECK(a.has("csv") || a.has("json"), "[study export] name an output: --csv FILE or --json FILE");
  const ResultsStore s(a.str("db"), ResultsStore::Mode::Existing);
  if (a.has("csv")) export_csv(s, a.str("csv"));
  if (a.has("json")) export_json(s, a.str("json"));
  std::printf("exported %lld metrics of %s\n", (long long)s.counts().metrics, s.path().c_str());
  return 0;
}

int cmd_study_show(int argc, char** argv) {
  Args a("study show", {kDb}, argc, argv, 3);
  if (run_help(a)) return 0;
  const ResultsStore s(a.str("db"), ResultsStore::Mode::Existing);
  const StoreCounts c = s.counts();
  std::printf("%s: %lld runs on %lld machines (%lld devices), %lld workloads, %lld metrics, %lld samples\n",
              s.path().c_str(), (long long)c.runs, (long long)c.machines, (long long)c.devices, (long long)c.workloads,
              (long long)c.metrics, (long long)c.samples);
  // Workloads are numbered as they first appear; their parameters are printed once.
  const std::vector<MetricRow> rows = s.metrics();
  std::map<std::string, int> workloads;
  for (const MetricRow& r : rows) {
    const std::string key = r.workload.name + " " + canonical_json(r.workload.params);
    if (workloads.emplace(key, int(workloads.size()) + 1).second)
      std::printf("workload %d  %s\n", int(workloads.size()), key.c_str());
  }
  std::printf("%-8s %-16s %-12s %-3s %-36s %12s %12s %12s %4s %s\n", "run", "host", "isa", "wl", "metric", "median",
              "min", "max", "n", "unit");
  for (const MetricRow& r : rows)
    std::printf("%-8.8s %-16.16s %-12s %-3d %-36s %12.6g %12.6g %12.6g %4zu %s%s\n", r.run.uuid.c_str(),
                r.machine.hostname.c_str(), r.device.isa_path.c_str(),
                workloads.at(r.workload.name + " " + canonical_json(r.workload.params)), r.name.c_str(), r.median,
                r.min, r.max, r.samples.size(), r.unit.c_str(), r.kind == MetricKind::Modeled ? " [modeled]" : "");
  return 0;
}

std::string pct(double e) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.0f%%", 100 * e);
  return b;
}

void split_list(const std::string& s, std::vector<std::string>& out) {
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
}

// The figure's workload in a few words: "bench infer models/default bf16" and its metric.
std::string workload_text(const MetricRow& r) {
  const Json& p = r.workload.params;
  auto text = [&](const char* k) {
    const Json* v = p.find(k);
    return !v ? std::string() : v->is_string() ? v->as_string() : v->dump();
  };
  std::string w = r.workload.name + " " + text("model");
  if (r.workload.name == "bench infer") w += cat(" ", text("weight_types"));
  else w += cat(" ", text("attention"), " b", text("batch"), "x", text("seq"), " ", text("precision"), " ranks ", text("ranks"));
  return w;
}

int cmd_study_model(int argc, char** argv) {
  Args a("study model",
         {kDb,
          {"devices", "catalogue devices to predict (genperf plan's ids)", "h100,h200,a100,v100,gaudi2,gaudi3"},
          {"records", "bench records with a machine block (each ISA level's GEMM peak and bandwidth); default: "
           "records/ beside the store", "", false, true},
          {"peak-f32-gflops", "this machine's f32 GEMM peak at its best level (otherwise measured now)", "", false, true},
          {"peak-bf16-gflops", "this machine's bf16 GEMM peak at its best level (otherwise from the records or measured now)",
           "", false, true},
          {"bandwidth-gbs", "this machine's memory bandwidth at its best level (otherwise from the records or measured now)",
           "", false, true},
          {"dry-run", "print the model's tables without storing the predictions", "", true}},
         argc, argv, 3);
  if (run_help(a)) return 0;
  const std::string db = a.str("db");
  std::vector<MetricRow> rows;
  {
    const ResultsStore s(db, ResultsStore::Mode::Existing);
    rows = s.metrics();
  }
  HwModelOptions o;
  o.devices.clear();
  split_list(a.str("devices"), o.devices);
  for (const std::string& d : o.devices) catalog_device(d);  // an unknown id fails before any measuring
  CpuFigures g;
  g.records_dir = a.has("records") ? a.str("records") : (fs::path(db).parent_path() / "records").string();
  if (a.has("peak-f32-gflops")) g.fp32_gflops = a.number("peak-f32-gflops");
  if (a.has("peak-bf16-gflops")) g.bf16_gflops = a.number("peak-bf16-gflops");
  if (a.has("bandwidth-gbs")) g.memory_gbs = a.number("bandwidth-gbs");
  o.cpu = this_machine_roofline(g);
  o.cpu_levels = isa_level_rooflines(g.records_dir);
  const HwModelResult r = run_hw_model(rows, o, db);

  std::printf("hardware model (per-op roofline over the op layer's costs; docs/STUDY.md, \"Hardware model\")\n");
  std::printf("this machine by ISA level (each level's figures are costed with its own peaks; the first calibrates):\n");
  auto print_level = [](const RooflineDevice& d) {
    char bf16[32] = "runs in f32";
    if (!d.bf16_as_f32) std::snprintf(bf16, sizeof bf16, "%.4g GFLOP/s", d.bf16_tflops * 1e3);
    std::printf("  %-12s f32 %.4g GFLOP/s, bf16 %s, memory %.4g GB/s (%s)\n", d.isa_path.c_str(), d.fp32_tflops * 1e3, bf16,
                d.memory_gbs, d.source.c_str());
  };
  print_level(o.cpu);
  for (auto it = o.cpu_levels.rbegin(); it != o.cpu_levels.rend(); ++it)
    if (it->isa_path != o.cpu.isa_path) print_level(*it);
  std::printf("\n");
  std::printf("calibration: efficiency = roofline seconds at the peaks / measured median seconds\n");
  std::printf("%-8s %-12s %-52s %-28s %12s %12s %10s\n", "phase", "ISA path", "workload", "metric", "roofline s",
              "measured s", "efficiency");
  for (const PhaseCalibration& c : r.calibration)
    std::printf("%-8s %-12s %-52s %-28s %12.4g %12.4g %10.3g\n", phase_name(c.phase), c.row->device.isa_path.c_str(),
                workload_text(*c.row).c_str(), c.row->name.c_str(), c.roofline_s, c.measured_s, c.efficiency);
  std::printf("\nerror on measured hardware (this machine; the calibration figures excluded): *modeled* against measured\n");
  std::printf("%-8s %-12s %-12s %-52s %-28s %12s %12s %8s\n", "phase", "ISA path", "peaks of", "workload", "metric",
              "measured s", "modeled s", "error");
  for (const ErrorRow& e : r.errors)
    std::printf("%-8s %-12s %-12s %-52s %-28s %12.4g %12.4g %8s\n", phase_name(e.phase), e.row->device.isa_path.c_str(),
                e.peaks_of.c_str(), workload_text(*e.row).c_str(), e.row->name.c_str(), e.measured_s, e.predicted_s,
                pct(e.error()).c_str());
  if (r.errors.empty())
    std::printf("no measured figure besides the calibration ones: the model's error is not known here\n\n");
  else
    std::printf("|error| over %zu figures: median %.0f%%, worst %.0f%%\n\n", r.errors.size(), 100 * r.median_abs_error,
                100 * r.worst_abs_error);
  std::printf("predictions (*modeled*: catalogue peaks x this machine's efficiency of the phase; no device-specific "
              "efficiency is published that the model uses)\n");
  std::printf("%-8s %-52s %-28s %-8s %14s\n", "device", "workload", "metric", "phase", "seconds");
  for (const Prediction& p : r.predictions)
    std::printf("%-8s %-52s %-28s %-8s %14.4g *modeled*\n", p.device.id.c_str(), workload_text(*p.row).c_str(),
                p.row->name.c_str(), phase_name(p.phase), p.seconds);
  std::printf("\npublished cross-hardware ratios against the model's (*modeled*, equal efficiencies on both devices)\n");
  for (const PublishedRatio& p : published_ratios()) {
    const double m = predicted_ratio(p);
    std::printf("%s\n  modeled %.2fx *modeled* (%s), published %.2fx, miss %s\n  source: %s\n", p.what.c_str(), m,
                p.modeled_as.c_str(), p.published, pct(m / p.published - 1).c_str(), p.source.c_str());
  }
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
  if (a.flag("dry-run")) return 0;
  ResultsStore s(db, ResultsStore::Mode::Existing);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += cat(i ? " " : "", argv[i]);
  const std::string uuid = store_predictions(s, r, cmd);
  std::printf("stored %zu *modeled* figures in run %s (suite model) of %s\n", r.predictions.size(), uuid.c_str(),
              db.c_str());
  return 0;
}

}  // namespace

// genperf study [--suite quick|full] [--out DIR]: the study's workloads on this machine.
int cmd_study_run(int argc, char** argv) {
  Args a("study",
         {{"suite", "quick (the embedded default models, minutes) or full (the whole study)", "quick"},
          {"out", "the study directory: records/, logs/, study.db (an interrupted study resumes there)", "study"},
          {"db", "the results store (default: <out>/study.db)", "", false, true},
          {"models", "the directory of the embedded default models", "models"},
          {"no-mpi", "skip the workloads of several ranks", "", true},
          {"text", "held-out text: the quantized models' KL and perplexity against the default model", "", false, true},
          {"tasks", "multiple-choice tasks (JSONL): the quantized models' accuracy", "", false, true}},
         argc, argv, 2);
  if (run_help(a)) return 0;
  StudyOptions o;
  o.suite = a.str("suite"), o.dir = a.str("out"), o.models = a.str("models"), o.mpi = !a.flag("no-mpi");
  if (a.has("db")) o.db = a.str("db");
  if (a.has("text")) o.text = a.str("text");
  if (a.has("tasks")) o.tasks = a.str("tasks");
  GP_CHECK(!o.tasks.empty() <= !o.text.empty(), "[study] --tasks needs --text (the held-out text of the same source)");
  o.genperf = fs::read_symlink("/proc/self/exe").string();
  const size_t n = study_workloads(o).size();
  std::printf("study: the %s suite, %zu workloads, into %s\n", o.suite.c_str(), n, o.dir.c_str());
  std::fflush(stdout);
  run_study(o, [](const StudyProgress& p) {
    if (p.resumed)
      std::printf("[%2d/%d] %-24s kept from an earlier run\n", p.index, p.total, p.workload->id.c_str());
    else
      std::printf("[%2d/%d] %-24s %6.1f s\n", p.index, p.total, p.workload->id.c_str(), p.seconds);
    std::fflush(stdout);
  });
  const ResultsStore s(o.db.empty() ? o.dir + "/study.db" : o.db, ResultsStore::Mode::Existing);
  const StoreCounts c = s.counts();
  std::printf("study: %lld runs, %lld metrics, %lld samples in %s\n", (long long)c.runs, (long long)c.metrics,
              (long long)c.samples, s.path().c_str());
  return 0;
}

int cmd_study(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub.empty() || (sub.rfind("--", 0) == 0 && sub != "--help")) return cmd_study_run(argc, argv);
  if (sub == "import") return cmd_study_import(argc, argv);
  if (sub == "merge") return cmd_study_merge(argc, argv);
  if (sub == "export") return cmd_study_export(argc, argv);
  if (sub == "show") return cmd_study_show(argc, argv);
  if (sub == "model") return cmd_study_model(argc, argv);
  const bool help = sub == "--help" || sub == "-h";
  std::fputs("usage: genperf study [--suite quick|full --out DIR]   run the study's workloads here\n"
             "       genperf study import|merge|export|show [options]   (each takes --help)\n"
             "  import --db FILE RECORD.json...        store records of genperf bench infer|train|sr\n"
             "  merge [--db OUT.db] A.db B.db...       join stores of several machines (into the first without --db)\n"
             "  export --db FILE --csv OUT | --json OUT  one row per metric, with every sample\n"
             "  show --db FILE                         counts and a table of the metrics\n"
             "  model --db FILE [--devices h100,...]   predict the workloads on catalogue hardware (*modeled*)\n",
             help ? stdout : stderr);
  return help ? 0 : 2;
}

}  // namespace genperf::cli

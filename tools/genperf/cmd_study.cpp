// genperf study: the results store of the comparative study (docs/STUDY.md): bench records in,
// stores of several machines merged, CSV and JSON out, a summary.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common.h"
#include "genperf/error.h"
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
  const bool help = sub == "--help" || sub == "-h";
  std::fputs("usage: genperf study [--suite quick|full --out DIR]   run the study's workloads here\n"
             "       genperf study import|merge|export|show [options]   (each takes --help)\n"
             "  import --db FILE RECORD.json...        store records of genperf bench infer|train|sr\n"
             "  merge [--db OUT.db] A.db B.db...       join stores of several machines (into the first without --db)\n"
             "  export --db FILE --csv OUT | --json OUT  one row per metric, with every sample\n"
             "  show --db FILE                         counts and a table of the metrics\n",
             help ? stdout : stderr);
  return help ? 0 : 2;
}

}  // namespace genperf::cli

// The results store of the comparative study (docs/STUDY.md): runs, machines, devices, workloads
// and metrics with every repetition, with their provenance, in one SQLite file that other tools
// read as well (sqlite3, Python). Stores gathered on several machines merge without duplicates:
// a run is known by its uuid, a machine by its fingerprint, a workload by its name and params.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "genperf/bench.h"
#include "genperf/json.h"

struct sqlite3;

namespace genperf {

// PRAGMA user_version of the stores this genperf writes; another version is refused by name.
inline constexpr int kStoreSchemaVersion = 1;

struct MachineRecord {
  std::string fingerprint;  // hex digest of cpu, isa_flags, cores, memory (GiB) and hostname
  std::string hostname, cpu, isa_flags, os;
  int64_t cores = 0, memory_bytes = 0;
};
// The machine a record's provenance names (older records lack the hostname, cores, memory and
// OS: those stay empty or 0 and the fingerprint covers what is there).
MachineRecord machine_record(const Provenance& p);
MachineRecord this_machine();

struct DeviceRecord {
  std::string kind = "cpu";  // "cpu", "cuda", ...
  std::string name;          // the CPU's brand string or the GPU's name
  std::string isa_path;      // the kernel path that ran ("avx512", "avx2+avxvnni", ...)
};

struct RunRecord {
  std::string uuid;  // empty: begin_run draws a random one
  std::string suite, command, commit, build_type;
  int64_t threads = 0;
  Json libraries = Json::Object{};  // name -> version
  std::string started, finished;    // ISO 8601 UTC; finished is empty while the run goes on
};
// A run's fields from a provenance; started and finished are its date (a record carries one time).
RunRecord run_record(const Provenance& p, const std::string& suite);

struct Workload {
  std::string name;
  Json params = Json::Object{};  // stored canonically (object keys sorted), so equal params match
};

enum class MetricKind { Measured, Modeled };
const char* metric_kind_name(MetricKind k);

// One metric joined with its run, machine, device and workload: what export and reports read.
struct MetricRow {
  RunRecord run;
  MachineRecord machine;
  DeviceRecord device;
  Workload workload;
  std::string name, unit;
  MetricKind kind = MetricKind::Measured;
  double median = 0, min = 0, max = 0;
  std::vector<double> samples;  // in repetition order; empty for a modeled metric
};

// Empty fields match everything.
struct MetricFilter {
  std::string run_uuid, workload, metric;
};

struct StoreCounts {
  int64_t machines = 0, devices = 0, runs = 0, workloads = 0, metrics = 0, samples = 0;
};

struct MergeResult {
  int64_t runs_added = 0, runs_skipped = 0;  // skipped: the destination had the run's uuid
};

class ResultsStore {
 public:
  enum class Mode { Create, Existing };  // Create makes the file and its schema when missing
  // Opens a store; throws genperf::Error naming the file when it is missing (Existing), not
  // SQLite, an SQLite database of something else, or a genperf store of another schema version.
  explicit ResultsStore(const std::string& path, Mode mode = Mode::Create);
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;
  const std::string& path() const { return path_; }

  // A write that spans several calls: everything between construction and commit() is kept or,
  // when the transaction is destroyed uncommitted (an exception), none of it. Nests (savepoints);
  // every write of the store runs in one of its own.
  class Transaction {
   public:
    explicit Transaction(ResultsStore& s);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

   private:
    ResultsStore& s_;
    bool done_ = false;
  };

  bool has_run(const std::string& uuid) const;
  // Stores the run (its machine once per fingerprint) and returns its id; r.uuid is filled.
  int64_t begin_run(const MachineRecord& m, RunRecord& r);
  void finish_run(int64_t run, const std::string& finished);
  // A measured metric with every sample of s; a modeled one is a single value without samples.
  void add_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                  const std::string& unit, const Stats& s);
  void add_modeled_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                          const std::string& unit, double value);

  StoreCounts counts() const;
  // Ordered by run start, run uuid, workload, device and metric name: the same rows give the
  // same order in every store, whatever the order they were merged in.
  std::vector<MetricRow> metrics(const MetricFilter& f = {}) const;

  // Copies every run of the store at `source` that this one lacks (by uuid), with its machine,
  // devices, workloads, metrics and samples, in one transaction.
  MergeResult merge(const std::string& source);

 private:
  int64_t machine_id(const MachineRecord& m);
  int64_t device_id(int64_t machine, const DeviceRecord& d);
  int64_t workload_id(const Workload& w);
  int64_t insert_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                        const std::string& unit, MetricKind kind, const Stats& s);
  void exec(const char* sql);
  std::string path_;
  sqlite3* db_ = nullptr;
  int depth_ = 0;  // open transactions (savepoint names)
};

// The uuid of a run: random (version 4), or derived from content (version 8), so that importing
// the same record twice stores it once.
std::string random_uuid();
std::string content_uuid(const std::string& content);

// Object keys sorted at every level, compact: equal values give equal text.
std::string canonical_json(const Json& j);

struct ImportResult {
  std::string uuid, kind;  // kind: "bench infer", "bench train", "bench sr"
  int64_t metrics = 0;
  bool already_stored = false;
};
// Stores a record written by `genperf bench infer|train|sr --out` or `genperf eval kl|mc|ppl
// --out` (or --json) as a run: every Stats-valued field (median, min, max, samples) is a measured
// metric of the record's workload, and an evaluation's figures (KL, accuracy, perplexity, the
// weights' bytes) metrics of one sample, on the CPU its provenance names. `source` (a file name)
// goes into errors, which also name the field at fault; a JSON that is not such a record is
// refused.
// suite: the study suite that ran it ("quick", "full"; empty for a record imported by hand).
ImportResult import_bench_record(ResultsStore& s, const Json& record, const std::string& source,
                                 const std::string& suite = "");

// Export of rows (ResultsStore::metrics): one CSV line (RFC 4180) or JSON object per metric, with
// its run, machine, device and workload; samples joined by ';' in CSV, an array in JSON. Written
// through a temporary file, so a failure leaves no partial output.
std::string metrics_csv(const std::vector<MetricRow>& rows);
Json metrics_json(const std::vector<MetricRow>& rows);
void export_csv(const ResultsStore& s, const std::string& path);
void export_json(const ResultsStore& s, const std::string& path);

}  // namespace genperf

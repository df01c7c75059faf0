// The results store: the schema, opening and checking a file, writes in savepoints, the joined
// metric rows, and merging stores (docs/STUDY.md).
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "genperf/error.h"
#include "genperf/study_store.h"
#include "study/sqlite.h"

namespace genperf {

using study::Statement;

namespace {

// PRAGMA application_id of a genperf store ("GPRS"): tells it from other SQLite files.
constexpr int kApplicationId = 0x47505253;

// Every table keys its rows by a local integer id and names them by a global key (machines by
// fingerprint, devices by machine and name, runs by uuid, workloads by name and canonical params,
// metrics by run, workload, device and name), which is what merge matches on. `commit` is an
// SQL keyword, so the column is git_commit. A modeled metric has n = 0 and no samples.
constexpr const char* kSchema = R"sql(
CREATE TABLE machines (
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  hostname TEXT NOT NULL,
  cpu TEXT NOT NULL,
  cores INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  isa_flags TEXT NOT NULL,
  os TEXT NOT NULL);
CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  kind TEXT NOT NULL CHECK (kind <> ''),
  name TEXT NOT NULL,
  isa_path TEXT NOT NULL,
  UNIQUE (machine_id, kind, name, isa_path));
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  suite TEXT NOT NULL,
  command TEXT NOT NULL,
  git_commit TEXT NOT NULL,
  build_type TEXT NOT NULL,
  threads INTEGER NOT NULL,
  libraries TEXT NOT NULL CHECK (json_valid(libraries)),
  started TEXT,
  finished TEXT);
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  params TEXT NOT NULL CHECK (json_valid(params)),
  UNIQUE (name, params));
CREATE TABLE metrics (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  device_id INTEGER NOT NULL REFERENCES devices(id),
  name TEXT NOT NULL,
  unit TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('measured', 'modeled')),
  median REAL NOT NULL,
  min REAL NOT NULL,
  max REAL NOT NULL,
  n INTEGER NOT NULL CHECK ((kind = 'modeled') = (n = 0)),
  UNIQUE (run_id, workload_id, device_id, name));
CREATE TABLE samples (
  metric_id INTEGER NOT NULL REFERENCES metrics(id),
  rep INTEGER NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (metric_id, rep)) WITHOUT ROWID;
CREATE INDEX metrics_by_workload ON metrics(workload_id, name);
)sql";

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string hex(uint64_t v, int digits) {
  std::string s(size_t(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[size_t(i)] = "0123456789abcdef"[v & 15];
  return s;
}

// 128 bits as 8-4-4-4-12 hex digits, with the version nibble and the RFC 9562 variant set.
std::string format_uuid(uint64_t hi, uint64_t lo, int version) {
  hi = (hi & ~0xf000ull) | (uint64_t(version) << 12);
  lo = (lo & ~(3ull << 62)) | (2ull << 62);
  const std::string h = hex(hi, 16), l = hex(lo, 16);
  return cat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-", l.substr(0, 4), "-", l.substr(4));
}

Json sorted(const Json& j) {
  if (j.is_array()) {
    Json::Array a;
    for (const Json& x : j.as_array()) a.push_back(sorted(x));
    return Json(std::move(a));
  }
  if (!j.is_object()) return j;
  Json::Object o;
  for (const auto& [k, v] : j.as_object()) o.emplace_back(k, sorted(v));
  std::sort(o.begin(), o.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return Json(std::move(o));
}

// The id a statement's first row holds (a SELECT of one key).
int64_t id_of(Statement& q, const std::string& file, const std::string& what) {
  GP_CHECK(q.step(), "[study] ", file, ": ", what, " was not stored");
  return q.integer(0);
}

}  // namespace

std::string random_uuid() {
  std::random_device rd;
  auto word = [&] { return (uint64_t(rd()) << 32) | rd(); };
  const uint64_t hi = word();
  return format_uuid(hi, word(), 4);
}

// Not a cryptographic digest: it tells records apart, it does not guard against forgery.
std::string content_uuid(const std::string& content) {
  return format_uuid(fnv1a(content), fnv1a(content, 0x84222325cbf29ce4ull), 8);
}

std::string canonical_json(const Json& j) { return sorted(j).dump(); }

const char* metric_kind_name(MetricKind k) { return k == MetricKind::Modeled ? "modeled" : "measured"; }

MachineRecord machine_record(const Provenance& p) {
  MachineRecord m;
  m.hostname = p.hostname;
  m.cpu = p.cpu;
  m.isa_flags = p.isa_flags;
  m.os = p.os;
  m.cores = p.cores;
  m.memory_bytes = p.memory_bytes;
  // Memory in whole GiB: the kernel's reserve, and so the total it reports, moves between
  // kernel versions, which should not make the machine a new one. The OS is left out likewise.
  const int64_t gib = (p.memory_bytes + (int64_t(1) << 29)) >> 30;
  m.fingerprint = hex(fnv1a(cat(p.cpu, "\n", p.isa_flags, "\n", p.cores, "\n", gib, "\n", p.hostname)), 16);
  return m;
}

MachineRecord this_machine() { return machine_record(provenance("")); }

RunRecord run_record(const Provenance& p, const std::string& suite) {
  RunRecord r;
  r.suite = suite;
  r.command = p.command;
  r.commit = p.commit;
  r.build_type = p.build_type;
  r.threads = p.threads;
  for (const auto& [name, version] : p.libraries) r.libraries[name] = version;
  r.started = r.finished = p.date;
  return r;
}

ResultsStore::ResultsStore(const std::string& path, Mode mode) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  GP_CHECK(exists || mode == Mode::Create, "[study] ", path, ": no such results store");
  GP_CHECK(!exists || fs::is_regular_file(path, ec), "[study] ", path, ": not a file");
  const int flags = SQLITE_OPEN_READWRITE | (mode == Mode::Create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    fail("[study] ", path, ": cannot open: ", why);
  }
  try {
    sqlite3_busy_timeout(db_, 10000);  // another process writing the same store
    // The first read of the file is where SQLite finds it is not a database.
    if (sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) == SQLITE_NOTADB)
      fail("[study] ", path, ": not an SQLite database, so not a genperf results store");
    auto number = [&](const char* sql) { return study::query_integer(db_, sql, path_); };
    const int64_t app = number("PRAGMA application_id"), version = number("PRAGMA user_version");
    const int64_t tables = number("SELECT count(*) FROM sqlite_master");
    if (app == kApplicationId) {
      GP_CHECK(version == kStoreSchemaVersion, "[study] ", path, ": a genperf results store of schema version ",
               version, "; this genperf reads version ", kStoreSchemaVersion);
    } else {
      GP_CHECK(tables == 0 && app == 0 && version == 0, "[study] ", path,
               ": an SQLite database, but not a genperf results store (application_id ", app, ", ", tables,
               " schema objects)");
      GP_CHECK(mode == Mode::Create, "[study] ", path, ": an empty database, not a genperf results store");
      Transaction t(*this);
      exec(kSchema);
      exec(cat("PRAGMA application_id = ", kApplicationId, "; PRAGMA user_version = ", kStoreSchemaVersion).c_str());
      t.commit();
    }
    exec("PRAGMA foreign_keys = ON");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

ResultsStore::~ResultsStore() { sqlite3_close(db_); }

void ResultsStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail("[study] ", path_, ": ", why);
  }
}

ResultsStore::Transaction::Transaction(ResultsStore& s) : s_(s) {
  s_.exec(cat("SAVEPOINT w", s_.depth_).c_str());
  ++s_.depth_;
}

void ResultsStore::Transaction::commit() {
  s_.exec(cat("RELEASE w", s_.depth_ - 1).c_str());
  --s_.depth_;
  done_ = true;
}

ResultsStore::Transaction::~Transaction() {
  if (done_) return;
  --s_.depth_;
  const std::string sp = cat("w", s_.depth_);
  // Undo, then end the savepoint; errors here cannot be reported from a destructor.
  sqlite3_exec(s_.db_, cat("ROLLBACK TO ", sp, "; RELEASE ", sp).c_str(), nullptr, nullptr, nullptr);
}

bool ResultsStore::has_run(const std::string& uuid) const {
  Statement q(db_, "SELECT 1 FROM runs WHERE uuid = ?", path_);
  return q.bind(uuid).step();
}

int64_t ResultsStore::machine_id(const MachineRecord& m) {
  GP_CHECK(!m.fingerprint.empty(), "[study] ", path_, ": a machine needs a fingerprint (machine_record)");
  Statement(db_,
            "INSERT INTO machines (fingerprint, hostname, cpu, cores, memory_bytes, isa_flags, os) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO NOTHING",
            path_)
      .bind(m.fingerprint, m.hostname, m.cpu, m.cores, m.memory_bytes, m.isa_flags, m.os)
      .run();
  Statement q(db_, "SELECT id FROM machines WHERE fingerprint = ?", path_);
  return id_of(q.bind(m.fingerprint), path_, "the machine " + m.fingerprint);
}

int64_t ResultsStore::device_id(int64_t machine, const DeviceRecord& d) {
  Statement(db_,
            "INSERT INTO devices (machine_id, kind, name, isa_path) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (machine_id, kind, name, isa_path) DO NOTHING",
            path_)
      .bind(machine, d.kind, d.name, d.isa_path)
      .run();
  Statement q(db_, "SELECT id FROM devices WHERE machine_id = ? AND kind = ? AND name = ? AND isa_path = ?", path_);
  return id_of(q.bind(machine, d.kind, d.name, d.isa_path), path_, "the device " + d.name);
}

int64_t ResultsStore::workload_id(const Workload& w) {
  const std::string params = canonical_json(w.params);
  Statement(db_, "INSERT INTO workloads (name, params) VALUES (?, ?) ON CONFLICT (name, params) DO NOTHING", path_)
      .bind(w.name, params)
      .run();
  Statement q(db_, "SELECT id FROM workloads WHERE name = ? AND params = ?", path_);
  return id_of(q.bind(w.name, params), path_, "the workload " + w.name);
}

int64_t ResultsStore::begin_run(const MachineRecord& m, RunRecord& r) {
  if (r.uuid.empty()) r.uuid = random_uuid();
  Transaction t(*this);
  const int64_t machine = machine_id(m);
  Statement(db_,
            "INSERT INTO runs (uuid, machine_id, suite, command, git_commit, build_type, threads, libraries, started, "
            "finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))",
            path_)
      .bind(r.uuid, machine, r.suite, r.command, r.commit, r.build_type, r.threads, canonical_json(r.libraries),
            r.started, r.finished)
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  t.commit();
  return id;
}

void ResultsStore::finish_run(int64_t run, const std::string& finished) {
  Transaction t(*this);
  Statement(db_, "UPDATE runs SET finished = ? WHERE id = ?", path_).bind(finished, run).run();
  GP_CHECK(sqlite3_changes(db_) == 1, "[study] ", path_, ": no run ", run, " to finish");
  t.commit();
}

int64_t ResultsStore::insert_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                                    const std::string& unit, MetricKind kind, const Stats& s) {
  Transaction t(*this);
  Statement machine(db_, "SELECT machine_id FROM runs WHERE id = ?", path_);
  const int64_t device = device_id(id_of(machine.bind(run), path_, cat("run ", run)), d);
  const int64_t workload = workload_id(w);
  Statement(db_,
            "INSERT INTO metrics (run_id, workload_id, device_id, name, unit, kind, median, min, max, n) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            path_)
      .bind(run, workload, device, name, unit, metric_kind_name(kind), s.median, s.min, s.max,
            int64_t(s.samples.size()))
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  Statement sample(db_, "INSERT INTO samples (metric_id, rep, value) VALUES (?, ?, ?)", path_);
  for (size_t i = 0; i < s.samples.size(); ++i) sample.bind(id, int64_t(i), s.samples[i]).run();
  t.commit();
  return id;
}

void ResultsStore::add_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                              const std::string& unit, const Stats& s) {
  GP_CHECK(!s.samples.empty(), "[study] ", path_, ": the measured metric ", name, " has no samples");
  insert_metric(run, w, d, name, unit, MetricKind::Measured, s);
}

void ResultsStore::add_modeled_metric(int64_t run, const Workload& w, const DeviceRecord& d, const std::string& name,
                                      const std::string& unit, double value) {
  Stats s;
  s.median = s.min = s.max = value;
  insert_metric(run, w, d, name, unit, MetricKind::Modeled, s);
}

StoreCounts ResultsStore::counts() const {
  Statement q(db_,
              "SELECT (SELECT count(*) FROM machines), (SELECT count(*) FROM devices), (SELECT count(*) FROM runs), "
              "(SELECT count(*) FROM workloads), (SELECT count(*) FROM metrics), (SELECT count(*) FROM samples)",
              path_);
  q.step();
  return {q.integer(0), q.integer(1), q.integer(2), q.integer(3), q.integer(4), q.integer(5)};
}

std::vector<MetricRow> ResultsStore::metrics(const MetricFilter& f) const {
  Statement q(db_,
              "SELECT r.uuid, r.suite, r.command, r.git_commit, r.build_type, r.threads, r.libraries, "
              "coalesce(r.started, ''), coalesce(r.finished, ''), "
              "m.fingerprint, m.hostname, m.cpu, m.isa_flags, m.os, m.cores, m.memory_bytes, "
              "d.kind, d.name, d.isa_path, w.name, w.params, "
              "x.id, x.name, x.unit, x.kind, x.median, x.min, x.max "
              "FROM metrics x JOIN runs r ON r.id = x.run_id JOIN machines m ON m.id = r.machine_id "
              "JOIN devices d ON d.id = x.device_id JOIN workloads w ON w.id = x.workload_id "
              "WHERE (?1 = '' OR r.uuid = ?1) AND (?2 = '' OR w.name = ?2) AND (?3 = '' OR x.name = ?3) "
              "ORDER BY r.started, r.uuid, w.name, w.params, d.kind, d.name, d.isa_path, x.name",
              path_);
  Statement samples(db_, "SELECT value FROM samples WHERE metric_id = ? ORDER BY rep", path_);
  q.bind(f.run_uuid, f.workload, f.metric);
  std::vector<MetricRow> rows;
  while (q.step()) {
    MetricRow r;
    r.run = {q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.integer(5),
             Json::parse(q.text(6), path_), q.text(7), q.text(8)};
    r.machine = {q.text(9), q.text(10), q.text(11), q.text(12), q.text(13), q.integer(14), q.integer(15)};
    r.device = {q.text(16), q.text(17), q.text(18)};
    r.workload = {q.text(19), Json::parse(q.text(20), path_)};
    r.name = q.text(22);
    r.unit = q.text(23);
    r.kind = q.text(24) == "modeled" ? MetricKind::Modeled : MetricKind::Measured;
    r.median = q.real(25);
    r.min = q.real(26);
    r.max = q.real(27);
    samples.bind(q.integer(21));
    while (samples.step()) r.samples.push_back(samples.real(0));
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {

// The merge, as SQL over the attached source `src`: rows are matched by their global keys, ids
// mapped through temporary tables. Only runs the destination lacks are copied.
constexpr const char* kMerge = R"sql(
INSERT INTO main.machines (fingerprint, hostname, cpu, cores, memory_bytes, isa_flags, os)
  SELECT fingerprint, hostname, cpu, cores, memory_bytes, isa_flags, os FROM src.machines WHERE true
  ON CONFLICT (fingerprint) DO NOTHING;
CREATE TEMP TABLE machine_map AS
  SELECT s.id AS src_id, m.id AS dst_id FROM src.machines s JOIN main.machines m ON m.fingerprint = s.fingerprint;
INSERT INTO main.devices (machine_id, kind, name, isa_path)
  SELECT mm.dst_id, d.kind, d.name, d.isa_path FROM src.devices d JOIN machine_map mm ON mm.src_id = d.machine_id
  WHERE true ON CONFLICT (machine_id, kind, name, isa_path) DO NOTHING;
CREATE TEMP TABLE device_map AS
  SELECT d.id AS src_id, e.id AS dst_id FROM src.devices d JOIN machine_map mm ON mm.src_id = d.machine_id
  JOIN main.devices e ON e.machine_id = mm.dst_id AND e.kind = d.kind AND e.name = d.name AND e.isa_path = d.isa_path;
INSERT INTO main.workloads (name, params) SELECT name, params FROM src.workloads WHERE true
  ON CONFLICT (name, params) DO NOTHING;
CREATE TEMP TABLE workload_map AS
  SELECT s.id AS src_id, w.id AS dst_id FROM src.workloads s JOIN main.workloads w ON w.name = s.name AND w.params = s.params;
CREATE TEMP TABLE new_runs AS SELECT id AS src_id FROM src.runs WHERE uuid NOT IN (SELECT uuid FROM main.runs);
INSERT INTO main.runs (uuid, machine_id, suite, command, git_commit, build_type, threads, libraries, started, finished)
  SELECT r.uuid, mm.dst_id, r.suite, r.command, r.git_commit, r.build_type, r.threads, r.libraries, r.started, r.finished
  FROM src.runs r JOIN new_runs n ON n.src_id = r.id JOIN machine_map mm ON mm.src_id = r.machine_id;
CREATE TEMP TABLE metric_map AS
  SELECT x.id AS src_id, r.id AS run_id, wm.dst_id AS workload_id, dm.dst_id AS device_id, x.name AS name
  FROM src.metrics x JOIN new_runs n ON n.src_id = x.run_id JOIN src.runs s ON s.id = x.run_id
  JOIN main.runs r ON r.uuid = s.uuid JOIN workload_map wm ON wm.src_id = x.workload_id
  JOIN device_map dm ON dm.src_id = x.device_id;
INSERT INTO main.metrics (run_id, workload_id, device_id, name, unit, kind, median, min, max, n)
  SELECT mm.run_id, mm.workload_id, mm.device_id, x.name, x.unit, x.kind, x.median, x.min, x.max, x.n
  FROM src.metrics x JOIN metric_map mm ON mm.src_id = x.id;
INSERT INTO main.samples (metric_id, rep, value)
  SELECT y.id, s.rep, s.value FROM src.samples s JOIN metric_map mm ON mm.src_id = s.metric_id
  JOIN main.metrics y ON y.run_id = mm.run_id AND y.workload_id = mm.workload_id AND y.device_id = mm.device_id
  AND y.name = mm.name;
)sql";

constexpr const char* kDropMaps =
    "DROP TABLE IF EXISTS temp.machine_map; DROP TABLE IF EXISTS temp.device_map; "
    "DROP TABLE IF EXISTS temp.workload_map; DROP TABLE IF EXISTS temp.new_runs; DROP TABLE IF EXISTS temp.metric_map";

}  // namespace

MergeResult ResultsStore::merge(const std::string& source) {
  namespace fs = std::filesystem;
  GP_CHECK(depth_ == 0, "[study] ", path_, ": merge runs in a transaction of its own, not inside another");
  const int64_t source_runs = ResultsStore(source, Mode::Existing).counts().runs;  // refuses what is not a store
  std::error_code ec;
  if (fs::equivalent(source, path_, ec)) return {0, source_runs};
  Statement(db_, "ATTACH DATABASE ? AS src", path_).bind(source).run();
  // Detached whatever happens (ATTACH and DETACH cannot run inside a transaction).
  struct Detach {
    sqlite3* db;
    ~Detach() { sqlite3_exec(db, "DETACH DATABASE src", nullptr, nullptr, nullptr); }
  } detach{db_};
  MergeResult r;
  Transaction t(*this);
  exec(kDropMaps);
  exec(kMerge);
  auto count = [&](const char* sql) { return study::query_integer(db_, sql, path_); };
  r.runs_added = count("SELECT count(*) FROM temp.new_runs");
  r.runs_skipped = source_runs - r.runs_added;
  const int64_t lost =
      count("SELECT count(*) FROM src.metrics WHERE run_id IN (SELECT src_id FROM temp.new_runs)") -
      count("SELECT count(*) FROM temp.metric_map");
  GP_CHECK(lost == 0, "[study] ", source, ": ", lost, " metrics name a run, workload or device the store lacks");
  exec(kDropMaps);
  t.commit();
  return r;
}

}  // namespace genperf

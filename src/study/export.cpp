// Export of the store's metric rows as CSV (RFC 4180) and JSON, for spreadsheets, pandas and
// plotting scripts; each row carries its run, machine, device and workload.
#include <string>
#include <vector>

#include "genperf/fileio.h"
#include "genperf/study_store.h"

namespace genperf {
namespace {

// RFC 4180: a field holding a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) (c == '"' ? q += "\"\"" : q += c);
  return q + "\"";
}

// The columns, in order, shared by the CSV header and the JSON keys. Samples come last.
const std::vector<std::string>& columns() {
  static const std::vector<std::string> c = {
      "run", "suite", "command", "commit", "build_type", "threads", "libraries", "started", "finished",
      "machine", "hostname", "cpu", "cores", "memory_bytes", "isa_flags", "os",
      "device_kind", "device", "isa_path", "workload", "params",
      "metric", "unit", "kind", "median", "min", "max", "n"};
  return c;
}

// A row's values as JSON, in the order of columns().
std::vector<Json> values(const MetricRow& r) {
  return {r.run.uuid, r.run.suite, r.run.command, r.run.commit, r.run.build_type, r.run.threads, r.run.libraries,
          r.run.started, r.run.finished,
          r.machine.fingerprint, r.machine.hostname, r.machine.cpu, r.machine.cores, r.machine.memory_bytes,
          r.machine.isa_flags, r.machine.os,
          r.device.kind, r.device.name, r.device.isa_path, r.workload.name, r.workload.params,
          r.name, r.unit, metric_kind_name(r.kind), r.median, r.min, r.max, int64_t(r.samples.size())};
}

// Strings as they are; numbers as Json writes them (the shortest text that reads back as the
// same double); objects canonically.
std::string csv_text(const Json& v) { return v.is_string() ? v.as_string() : canonical_json(v); }

}  // namespace

std::string metrics_csv(const std::vector<MetricRow>& rows) {
  std::string out;
  for (const std::string& c : columns()) out += c + ",";
  out += "samples\r\n";
  for (const MetricRow& r : rows) {
    for (const Json& v : values(r)) out += csv_field(csv_text(v)) + ",";
    std::string samples;
    for (size_t i = 0; i < r.samples.size(); ++i) {
      if (i) samples += ';';
      samples += Json(r.samples[i]).dump();
    }
    out += samples + "\r\n";
  }
  return out;
}

Json metrics_json(const std::vector<MetricRow>& rows) {
  Json::Array out;
  for (const MetricRow& r : rows) {
    Json::Object o;
    const std::vector<Json> v = values(r);
    for (size_t i = 0; i < v.size(); ++i) o.emplace_back(columns()[i], v[i]);
    o.emplace_back("samples", Json::Array(r.samples.begin(), r.samples.end()));
    out.push_back(Json(std::move(o)));
  }
  return Json(std::move(out));
}

void export_csv(const ResultsStore& s, const std::string& path) { write_file_atomic(path, metrics_csv(s.metrics())); }

void export_json(const ResultsStore& s, const std::string& path) {
  write_file_atomic(path, metrics_json(s.metrics()).dump(2) + "\n");
}

}  // namespace genperf

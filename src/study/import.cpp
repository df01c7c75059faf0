// import_bench_record: a record of `genperf bench infer|train|sr`, `eval kl|mc|ppl` or `sr eval`
// becomes a run of the store.
// Which benchmark wrote it and what defines its workload are rows of a table; the metrics are
// found by walking the record for Stats-valued fields, so a figure added to a benchmark is stored
// without a change here.
#include <string_view>
#include <utility>
#include <vector>

#include "genperf/error.h"
#include "genperf/study_store.h"

namespace genperf {
namespace {

struct BenchKind {
  const char* name;
  const char* signature;                // a field only this benchmark's records have
  std::vector<const char*> parameters;  // the fields (a.b: nested) that define its workload
  // Evaluations measure a figure once (an accuracy, a divergence, a size): these fields are
  // metrics of one sample each, beside any Stats-valued ones.
  struct Scalar {
    const char *field, *unit;
    bool optional = false;  // absent from records written before the figure existed
  };
  std::vector<Scalar> scalars = {};
};

// The measured figures are not parameters: tokens/s, GFLOP/s, memory and peaks follow from the
// workload, the machine and the code.
const std::vector<BenchKind>& bench_kinds() {
  static const std::vector<BenchKind> kinds = {
      {"bench infer", "decode",
       {"model", "parameters", "weight_types", "kv_type", "decode.prompt_tokens", "decode.tokens_per_rep"}},
      {"bench train", "step_seconds",
       {"model", "batch", "seq", "attention", "checkpoint_layers", "precision", "lora", "ranks", "shard", "overlap"}},
      {"bench sr", "train_step_seconds", {"model", "batch", "size", "config", "ranks", "shard", "conv3x3"}},
      // The weights' bytes are part of what an evaluation's model is (its size, for accuracy
      // against size), as are the text's cut and the tasks' count.
      {"eval kl", "kl_mean", {"model", "ref", "weight_types", "weights_bytes", "parameters", "max_bytes"},
       {{"kl_mean", "nats"}, {"kl_p99", "nats"}, {"top1_agreement", ""}, {"ppl", ""}, {"ppl_delta", ""}}},
      {"eval mc", "acc_norm", {"model", "weight_types", "weights_bytes", "parameters", "n"}, {{"acc", ""}, {"acc_norm", ""}}},
      {"eval ppl", "nll", {"model", "weight_types", "weights_bytes", "parameters", "max_bytes"}, {{"ppl", ""}, {"nll", "nats"}}},
      // The SR model's quality on held-out maps, each figure the mean over the maps, beside
      // bicubic's; the seconds per map are its Stats field. Its workload is the model as stored,
      // the maps, the sampler and the degradation; the batch changes the seconds alone.
      {"sr eval", "psnr_bicubic",
       {"model", "weight_types", "weights_bytes", "parameters", "scale", "data", "steps", "sampler", "spacing", "eta",
        "samples", "seed", "tile", "overlap", "batch", "project", "project_iters", "blur", "noise"},
       {{"psnr_mean", "dB"}, {"psnr_one", "dB"}, {"psnr_bicubic", "dB"}, {"ssim_mean", ""}, {"ssim_bicubic", ""},
        {"spectrum_worst", ""}, {"spectrum_worst_bicubic", ""},
        {"spectrum_mean", ""}, {"spectrum_mean_bicubic", ""}, {"spectrum_worst_wide", "", true},
        {"spectrum_worst_wide_bicubic", "", true}, {"min_corr", ""}, {"min_corr_bicubic", ""}, {"w1", ""},
        {"w1_bicubic", ""}, {"consistency", ""}, {"consistency_bicubic", ""}, {"coverage", ""}, {"coverage_predictive", ""},
        {"minkowski", ""}}},
  };
  return kinds;
}

const Json* find_path(const Json& j, std::string_view path) {
  const Json* at = &j;
  while (at) {
    const size_t dot = path.find('.');
    at = at->find(path.substr(0, dot));
    if (dot == std::string_view::npos) return at;
    path.remove_prefix(dot + 1);
  }
  return nullptr;
}

const std::string& required_string(const Json& p, const char* key, const std::string& source) {
  const Json* v = p.find(key);
  GP_CHECK(v && v->is_string(), "[study] ", source, ": provenance.", key, " is missing or not a string");
  return v->as_string();
}

// The record's provenance; the machine's hostname, OS, cores, memory and libraries are absent
// from records written before they were recorded, and stay empty.
Provenance provenance_of(const Json& record, const std::string& source) {
  const Json* p = record.find("provenance");
  GP_CHECK(p && p->is_object(), "[study] ", source, ": not a genperf bench record (no provenance object)");
  Provenance out;
  out.cpu = required_string(*p, "cpu", source);
  out.isa_flags = required_string(*p, "isa_flags", source);
  out.isa_path = required_string(*p, "isa_path", source);
  out.commit = required_string(*p, "commit", source);
  out.build_type = required_string(*p, "build_type", source);
  out.date = required_string(*p, "date", source);
  out.command = required_string(*p, "command", source);
  const Json* threads = p->find("threads");
  GP_CHECK(threads && threads->is_number(), "[study] ", source, ": provenance.threads is missing or not a number");
  out.threads = int(threads->as_int());
  if (const Json* v = p->find("hostname")) out.hostname = v->as_string();
  if (const Json* v = p->find("os")) out.os = v->as_string();
  if (const Json* v = p->find("cores")) out.cores = int(v->as_int());
  if (const Json* v = p->find("memory_bytes")) out.memory_bytes = v->as_int();
  if (const Json* v = p->find("libraries"))
    for (const auto& [name, version] : v->as_object()) out.libraries.emplace_back(name, version.as_string());
  return out;
}

bool is_stats(const Json& j) {
  return j.is_object() && j.find("median") && j.find("min") && j.find("max") && j.find("samples");
}

// The samples of a Stats field, checked against the median, min and max the record states.
Stats stats_of(const Json& j, const std::string& source, const std::string& path) {
  std::vector<double> samples;
  for (const Json& x : j.at("samples").as_array()) samples.push_back(x.as_number());
  GP_CHECK(!samples.empty(), "[study] ", source, ": ", path, " has no samples");
  const Json* n = j.find("n");
  GP_CHECK(!n || n->as_int() == int64_t(samples.size()), "[study] ", source, ": ", path, " says n ",
           n ? n->as_int() : 0, " but holds ", samples.size(), " samples");
  Stats s = Stats::of(std::move(samples));
  for (const auto& [key, value] : {std::pair{"median", s.median}, {"min", s.min}, {"max", s.max}})
    GP_CHECK(j.at(key).as_number() == value, "[study] ", source, ": ", path, ".", key, " is ",
             j.at(key).as_number(), " but its samples give ", value);
  return s;
}

// A Stats field is timed in seconds where its name says so; others keep no unit.
std::string unit_of(const std::string& key) {
  return key.find("seconds") != std::string::npos || key.ends_with("_s") ? "s" : "";
}

// Every Stats-valued field below `j`, named by its path. An array element is named by its first
// field where that is a number or a string ("prefill[tokens=128].seconds"), else by its index.
void collect(const Json& j, const std::string& path, const std::string& key,
             std::vector<std::pair<std::string, std::string>>& names, std::vector<Stats>& stats,
             const std::string& source) {
  if (is_stats(j)) {
    names.emplace_back(path, unit_of(key));
    stats.push_back(stats_of(j, source, path));
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.as_object())
      if (!(path.empty() && k == "provenance")) collect(v, path.empty() ? k : path + "." + k, k, names, stats, source);
  } else if (j.is_array()) {
    const Json::Array& a = j.as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      std::string label = cat(i);
      if (a[i].is_object() && !a[i].as_object().empty()) {
        const auto& [first, value] = a[i].as_object().front();
        if (value.is_number() || value.is_string())
          label = first + "=" + (value.is_string() ? value.as_string() : value.dump());
      }
      collect(a[i], cat(path, "[", label, "]"), key, names, stats, source);
    }
  }
}

}  // namespace

ImportResult import_bench_record(ResultsStore& s, const Json& record, const std::string& source,
                                 const std::string& suite) {
  GP_CHECK(record.is_object(), "[study] ", source, ": not a genperf bench record (a JSON ", record.type_name(),
           ", not an object)");
  const Provenance p = provenance_of(record, source);
  const BenchKind* kind = nullptr;
  for (const BenchKind& k : bench_kinds())
    if (record.find(k.signature)) kind = &k;
  if (!kind) {
    std::string names, signatures;
    for (const BenchKind& k : bench_kinds())
      names += cat(names.empty() ? "" : ", ", k.name), signatures += cat(signatures.empty() ? "" : ", ", k.signature);
    fail("[study] ", source, ": not a record of ", names, " (none of ", signatures, ")");
  }
  Workload w{kind->name, Json::Object{}};
  for (const char* key : kind->parameters)
    if (const Json* v = find_path(record, key)) w.params[key] = *v;

  std::vector<std::pair<std::string, std::string>> names;  // metric name and unit
  std::vector<Stats> stats;
  collect(record, "", "", names, stats, source);
  for (const auto& [field, unit, optional] : kind->scalars) {
    const Json* v = record.find(field);
    if (!v && optional) continue;
    GP_CHECK(v && v->is_number(), "[study] ", source, ": a ", kind->name, " record without a number at ", field);
    names.emplace_back(field, unit);
    stats.push_back(Stats::of({v->as_number()}));
  }
  GP_CHECK(!stats.empty(), "[study] ", source, ": a ", kind->name, " record without a measured figure");

  ImportResult r;
  r.kind = kind->name;
  r.metrics = int64_t(stats.size());
  r.uuid = content_uuid(canonical_json(record));  // the same record, whatever its key order
  if (s.has_run(r.uuid)) {
    r.already_stored = true;
    return r;
  }
  ResultsStore::Transaction t(s);
  RunRecord run = run_record(p, suite);
  run.uuid = r.uuid;
  const int64_t id = s.begin_run(machine_record(p), run);
  const DeviceRecord cpu{"cpu", p.cpu, p.isa_path};
  for (size_t i = 0; i < stats.size(); ++i) s.add_metric(id, w, cpu, names[i].first, names[i].second, stats[i]);
  t.commit();
  return r;
}

}  // namespace genperf

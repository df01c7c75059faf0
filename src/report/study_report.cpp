// The study's report: the store's rows pooled into figures, then one section per question of the
// study (speedup by ISA level, flash against naive attention, sharding and scaling, the SR model's
// throughput and quality, accuracy against size), each a set of Vega-Lite specs with their data and tables.
// The HTML page and the Markdown summary render the same sections, so their tables agree.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/study_report.h"
#include "report/markup.h"

namespace genperf {
namespace {

// One metric of one configuration (machine, kernel path, workload, threads), pooled over the runs
// that measured it: a rerun adds its samples, it does not replace the first.
struct Figure {
  const MetricRow* row = nullptr;  // the first run's row: machine, device, workload, unit
  std::string config;              // machine, kernel path, workload and threads
  MetricKind kind = MetricKind::Measured;
  double median = 0, min = 0, max = 0;
  size_t n = 0;                           // samples pooled; 0 for a modeled figure
  std::vector<const RunRecord*> runs;     // for provenance
  const Json& params() const { return row->workload.params; }
  bool modeled() const { return kind == MetricKind::Modeled; }
};

std::string config_key(const MetricRow& r) {
  return cat(r.machine.fingerprint, "|", r.device.kind, "|", r.device.name, "|", r.device.isa_path, "|",
             r.workload.name, "|", canonical_json(r.workload.params), "|", r.run.threads);
}

std::vector<Figure> pool(const std::vector<MetricRow>& rows) {
  std::map<std::string, size_t> at;  // config, metric and kind -> index
  std::vector<Figure> figs;
  std::vector<std::vector<double>> values;  // every sample (a modeled figure: every value)
  for (const MetricRow& r : rows) {
    const std::string config = config_key(r);
    const auto [it, fresh] = at.emplace(cat(config, "|", r.name, "|", metric_kind_name(r.kind)), figs.size());
    if (fresh) {
      Figure f;
      f.row = &r;
      f.config = config;
      f.kind = r.kind;
      f.median = r.median, f.min = r.min, f.max = r.max;
      figs.push_back(f);
      values.emplace_back();
    }
    Figure& f = figs[it->second];
    f.runs.push_back(&r.run);
    std::vector<double>& v = values[it->second];
    if (r.kind == MetricKind::Modeled) v.push_back(r.median);
    else v.insert(v.end(), r.samples.begin(), r.samples.end());
  }
  for (size_t i = 0; i < figs.size(); ++i) {
    Figure& f = figs[i];
    f.n = f.modeled() ? 0 : values[i].size();
    if (f.runs.size() < 2) continue;  // one run: its stored median, min and max as they are
    const Stats s = Stats::of(values[i]);
    f.median = s.median, f.min = s.min, f.max = s.max;
  }
  return figs;
}

const Figure* find(const std::vector<Figure>& figs, const std::string& config, const std::string& metric) {
  for (const Figure& f : figs)
    if (f.config == config && f.row->name == metric) return &f;
  return nullptr;
}

double param_number(const Json& p, const char* key, double otherwise = 0) {
  const Json* v = p.find(key);
  return v && v->is_number() ? v->as_number() : otherwise;
}

std::string param_text(const Json& p, const char* key) {
  const Json* v = p.find(key);
  return !v ? "" : v->is_string() ? v->as_string() : v->dump();
}

// Four significant digits: the repetitions' spread is wider than that.
std::string num(double x) {
  if (!std::isfinite(x)) return "–";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

std::string ratio_text(double r) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f×", r);
  return b;
}

std::string percent(double r) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.0f%%", 100 * r);
  return b;
}

// A throughput from a time: work / seconds, so the slowest repetition gives the low whisker.
struct Rate {
  double median, lo, hi;
};
Rate rate(const Figure& f, double work) { return {work / f.median, work / f.max, work / f.min}; }

// "median (min–max)", and *modeled* after a prediction: a table never shows one unlabelled.
std::string cell(double median, double lo, double hi, bool modeled) {
  if (modeled) return num(median) + " *modeled*";
  return cat(num(median), " (", num(lo), "–", num(hi), ")");
}
std::string cell(const Rate& r, bool modeled) { return cell(r.median, r.lo, r.hi, modeled); }
std::string cell(const Figure& f) { return cell(f.median, f.min, f.max, f.modeled()); }

// A ratio of two figures of the same kind; a measured figure over a modeled one is no result.
std::string ratio_cell(double num_, double den, const Figure& a, const Figure& b) {
  if (a.kind != b.kind || !(den > 0)) return "–";
  return ratio_text(num_ / den) + (a.modeled() ? " *modeled*" : "");
}

std::string host(const Figure& f) { return f.row->machine.hostname.empty() ? f.row->machine.fingerprint : f.row->machine.hostname; }

// The kernel paths in the order of the study's hardware generations, then the catalogue's devices
// that `genperf study model` predicts (device kind "model", the catalogue id as the path).
int isa_rank(const std::string& isa) {
  static const char* const order[] = {"generic", "avx2", "avx2+avxvnni", "avx512", "v100", "a100",
                                      "h100",    "h200", "gaudi1",       "gaudi2", "gaudi3"};
  for (int i = 0; i < 11; ++i)
    if (isa == order[i]) return i;
  return 11;
}

// Where, from what code and when the figures of a section were measured.
std::string provenance(const std::vector<const Figure*>& figs) {
  std::set<std::string> machines, commits, dates, builds;
  for (const Figure* f : figs) {
    const MachineRecord& m = f->row->machine;
    machines.insert(cat(m.hostname.empty() ? m.fingerprint : m.hostname, " (", m.cpu, ", ", m.cores, " cores)"));
    for (const RunRecord* r : f->runs) {
      commits.insert(r->commit.empty() ? "unknown" : r->commit);
      dates.insert(r->started.substr(0, 10));
      builds.insert(r->build_type);
    }
  }
  auto list = [](const std::set<std::string>& s) {
    std::string o;
    for (const std::string& x : s) o += (o.empty() ? "" : ", ") + x;
    return o;
  };
  const std::string when = dates.empty() ? "" : *dates.begin() + (dates.size() > 1 ? " to " + *dates.rbegin() : "");
  return cat(machines.size() > 1 ? "machines " : "machine ", list(machines), "; commit ", list(commits), " (",
             list(builds), "); ", when);
}

// BENCHMARKING.md: a spread wider than 10% says the machine was noisy, and the report says so.
std::string noisy_note(const std::vector<const Figure*>& figs) {
  int noisy = 0, measured = 0;
  for (const Figure* f : figs) {
    if (f->modeled()) continue;
    ++measured;
    noisy += f->median > 0 && (f->max - f->min) / f->median > 0.10;
  }
  if (noisy == 0) return "";
  return cat(noisy, " of these ", measured, " measured figures spread more than 10% of their median from the fastest "
             "to the slowest repetition: the machine was noisy, and ratios near 1 are no difference.");
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string caption = {};  // above the table, where a section has several: what this one is of
};

struct Section {
  std::string title, about;
  std::string empty;  // the one line said where the store has no data for the section
  std::string provenance;
  std::vector<Json> charts;  // Vega-Lite specs, data inlined
  std::vector<Table> tables;
  std::string note;  // said under the tables: a noisy machine
};

// The section's provenance and note from the figures it shows; without any, its one line instead.
bool close_section(Section& s, const std::vector<const Figure*>& used, const std::string& empty) {
  if (used.empty()) {
    s.empty = empty;
    return false;
  }
  s.provenance = provenance(used);
  s.note = noisy_note(used);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Chart specs. Every data value carries `kind` (measured or modeled): modeled marks are hollow and
// dashed, and the legend names them.

Json kind_scale(Json range) {
  return Json::Object{{"domain", Json::Array{"measured", "modeled"}}, {"range", std::move(range)}};
}
Json kind_fill_opacity() {
  return Json::Object{{"field", "kind"}, {"type", "nominal"}, {"title", "figure"}, {"scale", kind_scale(Json::Array{0.85, 0.0})}};
}
Json kind_dash() {
  return Json::Object{{"field", "kind"}, {"type", "nominal"}, {"title", "figure"},
                      {"scale", kind_scale(Json::Array{Json::Array{1, 0}, Json::Array{4, 3}})}};
}
Json field(const char* name, const char* type, Json title = Json()) {
  Json f = Json::Object{{"field", name}, {"type", type}};
  if (!title.is_null()) f["title"] = std::move(title);
  return f;
}
Json tooltip() {
  return Json::Array{field("series", "nominal"), field("x", "nominal"), field("median", "quantitative"),
                     field("lo", "quantitative", "min"), field("hi", "quantitative", "max"),
                     field("n", "quantitative", "samples"), field("kind", "nominal")};
}

// Facets by `panel` (machine and what is measured), each with its own y scale.
Json faceted(const std::string& title, const std::string& subtitle, Json values, Json layers, int columns = 2) {
  return Json::Object{
      {"$schema", "https://vega.github.io/schema/vega-lite/v6.json"},
      {"title", Json::Object{{"text", title}, {"subtitle", subtitle}, {"anchor", "start"}}},
      {"data", Json::Object{{"values", std::move(values)}}},
      {"facet", Json::Object{{"field", "panel"}, {"type", "nominal"}, {"title", Json()}}},
      {"columns", columns},
      {"resolve", Json::Object{{"scale", Json::Object{{"y", "independent"}}}}},
      {"spec", Json::Object{{"width", 280}, {"height", 220}, {"layer", std::move(layers)}}}};
}

Json stacked_off(Json f) {
  f["stack"] = Json();
  return f;
}

// Bars of the medians side by side by `series`, min-max whiskers, and `label` above each bar.
// log_y: a logarithmic axis, for figures orders of magnitude apart (a CPU beside modeled GPUs).
Json bar_chart(const std::string& title, const std::string& subtitle, Json values, const std::string& x_title,
               const std::string& y_title, const std::string& series_title, bool log_y = false) {
  Json y = stacked_off(field("median", "quantitative", y_title));
  if (log_y) y["scale"] = Json::Object{{"type", "log"}};
  Json x = Json::Object{{"field", "x"},
                        {"type", "nominal"},
                        {"title", x_title},
                        {"sort", Json::Object{{"field", "order"}, {"op", "min"}}},
                        {"axis", Json::Object{{"labelAngle", 0}}}};
  Json offset = field("series", "nominal");
  Json color = field("series", "nominal", series_title);
  Json bar = Json::Object{
      {"mark", Json::Object{{"type", "bar"}, {"strokeWidth", 1.5}}},
      {"encoding", Json::Object{{"x", x}, {"xOffset", offset}, {"y", y},
                                {"color", color}, {"stroke", color}, {"fillOpacity", kind_fill_opacity()},
                                {"strokeDash", kind_dash()}, {"tooltip", tooltip()}}}};
  Json whisker = Json::Object{
      {"mark", Json::Object{{"type", "rule"}, {"color", "#222"}}},
      {"encoding", Json::Object{{"x", x}, {"xOffset", offset}, {"y", field("lo", "quantitative")}, {"y2", Json::Object{{"field", "hi"}}}}}};
  Json text = Json::Object{
      {"mark", Json::Object{{"type", "text"}, {"dy", -7}, {"fontSize", 10}}},
      {"encoding", Json::Object{{"x", x}, {"xOffset", offset}, {"y", field("hi", "quantitative")}, {"text", field("label", "nominal")}}}};
  return faceted(title, subtitle, std::move(values), Json::Array{bar, whisker, text});
}

Json bar_value(const std::string& panel, const std::string& x, double order, const std::string& series, const Rate& r,
               const Figure& f, const std::string& label) {
  return Json::Object{{"panel", panel}, {"x", x}, {"order", order}, {"series", series}, {"median", r.median},
                      {"lo", r.lo}, {"hi", r.hi}, {"n", int64_t(f.n)}, {"kind", metric_kind_name(f.kind)},
                      {"label", label}};
}

std::vector<const Figure*> of(const std::vector<Figure>& figs, const std::string& workload) {
  std::vector<const Figure*> out;
  for (const Figure& f : figs)
    if (f.row->workload.name == workload) out.push_back(&f);
  return out;
}

// ---------------------------------------------------------------------------------------------
// (a) bench infer at each ISA level: decode and prefill tokens/s, and the ratio to generic.

Section isa_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "Speedup by hardware generation (ISA level)";
  s.about = "bench infer on each kernel path of a machine: generic, AVX2, AVX-VNNI and AVX-512 are the measured "
            "analogue of the study's GPU generations (V100, A100, H100), beside which `genperf study model` predicts the "
            "same workloads on the catalogued accelerators (hollow, *modeled*). Tokens/s = tokens / median seconds; "
            "whiskers from the slowest and fastest repetitions; the label is the ratio to generic on the same machine.";
  struct Item {
    const Figure* f;
    std::string measure;
    double tokens;
  };
  std::vector<Item> items;
  for (const Figure* f : of(figs, "bench infer")) {
    const std::string& m = f->row->name;
    if (m == "decode.seconds_per_token") items.push_back({f, "decode tokens/s", 1});
    else if (m.rfind("prefill[tokens=", 0) == 0 && m.size() > 23 && m.compare(m.size() - 9, 9, "].seconds") == 0)
      items.push_back({f, cat("prefill ", m.substr(15, m.size() - 24), " tokens/s"), std::stod(m.substr(15))});
  }
  if (items.empty()) {
    s.empty = "No bench infer figures in this store.";
    return s;
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::make_tuple(host(*a.f), a.measure, isa_rank(a.f->row->device.isa_path)) <
           std::make_tuple(host(*b.f), b.measure, isa_rank(b.f->row->device.isa_path));
  });
  // The generic path's figure of the same machine, workload, threads, metric and kind.
  auto generic_of = [&](const Item& it) -> const Item* {
    for (const Item& g : items)
      if (g.f->row->device.isa_path == "generic" && g.f->row->name == it.f->row->name && g.f->kind == it.f->kind &&
          g.f->row->machine.fingerprint == it.f->row->machine.fingerprint &&
          canonical_json(g.f->params()) == canonical_json(it.f->params()) && g.f->row->run.threads == it.f->row->run.threads)
        return &g;
    return nullptr;
  };
  Table t{{"machine", "model", "threads", "measure", "ISA path", "tokens/s median (min–max)", "× generic"}, {}};
  Json values = Json::Array{};
  std::vector<const Figure*> used;
  for (const Item& it : items) {
    const Rate r = rate(*it.f, it.tokens);
    const Item* g = generic_of(it);
    const std::string ratio = g ? ratio_cell(r.median, rate(*g->f, g->tokens).median, *it.f, *g->f) : "–";
    const Json& p = it.f->params();
    const std::string model = cat(param_text(p, "model"), " ", param_text(p, "weight_types"), ", KV ", param_text(p, "kv_type"));
    t.rows.push_back({host(*it.f), model, cat(it.f->row->run.threads), it.measure, it.f->row->device.isa_path,
                      cell(r, it.f->modeled()), ratio});
    const std::string isa = it.f->row->device.isa_path;
    values.push_back(bar_value(it.measure + " · " + model, isa, isa_rank(isa), host(*it.f), r, *it.f,
                               ratio == "–" ? "" : ratio_text(r.median / rate(*g->f, g->tokens).median)));
    used.push_back(it.f);
  }
  close_section(s, used, "");
  const bool modeled = std::any_of(used.begin(), used.end(), [](const Figure* f) { return f->modeled(); });
  s.charts.push_back(bar_chart(modeled ? "Tokens/s by ISA level and modeled accelerator (log axis; label: × generic)"
                                       : "Tokens/s by ISA level (label: × generic)",
                               s.provenance, std::move(values), "ISA path", "tokens/s", "machine", modeled));
  s.tables.push_back(std::move(t));
  return s;
}

// ---------------------------------------------------------------------------------------------
// (b) bench train on one rank: flash against naive attention at each sequence length.

// The configuration without one parameter: what pairs figures that differ only in it.
std::string config_without(const Figure& f, std::initializer_list<const char*> keys) {
  Json p = f.params();
  Json::Object& o = p.as_object();
  for (const char* k : keys) o.erase(std::remove_if(o.begin(), o.end(), [&](const auto& kv) { return kv.first == k; }), o.end());
  const MetricRow& r = *f.row;
  return cat(r.machine.fingerprint, "|", r.device.isa_path, "|", r.workload.name, "|", canonical_json(p), "|",
             r.run.threads, "|", r.name, "|", metric_kind_name(f.kind));
}

Section attention_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "Flash against naive attention by sequence length";
  s.about = "bench train on one rank, naive and flash attention with everything else equal. Tokens/s = batch × seq "
            "/ median step seconds; the speedup is naive / flash median step time (a ratio of two runs' medians, not "
            "of alternated repetitions).";
  std::map<std::string, std::pair<const Figure*, const Figure*>> pairs;  // (naive, flash)
  for (const Figure* f : of(figs, "bench train")) {
    if (f->row->name != "step_seconds" || param_number(f->params(), "ranks", 1) != 1) continue;
    const std::string a = param_text(f->params(), "attention");
    auto& p = pairs[config_without(*f, {"attention"})];
    if (a == "naive") p.first = f;
    else if (a == "flash") p.second = f;
  }
  Table t{{"machine", "seq", "batch", "threads", "naive step s", "flash step s", "naive tokens/s", "flash tokens/s",
           "flash speedup"},
          {}};
  Json values = Json::Array{};
  std::vector<const Figure*> used;
  std::vector<std::pair<const Figure*, const Figure*>> sorted;
  for (const auto& [key, p] : pairs)
    if (p.first && p.second) sorted.push_back(p);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return std::make_pair(host(*a.first), param_number(a.first->params(), "seq")) <
           std::make_pair(host(*b.first), param_number(b.first->params(), "seq"));
  });
  for (const auto& [naive, flash] : sorted) {
    const Json& p = naive->params();
    const double seq = param_number(p, "seq"), batch = param_number(p, "batch"), tokens = seq * batch;
    const Rate rn = rate(*naive, tokens), rf = rate(*flash, tokens);
    t.rows.push_back({host(*naive), num(seq), num(batch), cat(naive->row->run.threads), cell(*naive), cell(*flash),
                      cell(rn, naive->modeled()), cell(rf, flash->modeled()),
                      ratio_cell(naive->median, flash->median, *naive, *flash)});
    const std::string x = cat("seq ", num(seq), " × batch ", num(batch));
    const std::string panel = cat(host(*naive), " · ", param_text(p, "model"), ", ", naive->row->run.threads, " threads");
    for (const auto& [f, r, name] : {std::tuple{naive, rn, "naive"}, std::tuple{flash, rf, "flash"}})
      values.push_back(bar_value(panel, x, seq, name, r, *f, ""));
    used.push_back(naive);
    used.push_back(flash);
  }
  if (!close_section(s, used, "No pair of bench train figures on one rank that differ only in naive and flash attention.")) return s;
  Json x = Json::Object{{"field", "x"},
                        {"type", "ordinal"},
                        {"title", "sequence length"},
                        {"sort", Json::Object{{"field", "order"}, {"op", "min"}}},
                        {"axis", Json::Object{{"labelAngle", 0}}}};
  Json color = field("series", "nominal", "attention");
  Json line = Json::Object{
      {"mark", Json::Object{{"type", "line"}, {"point", Json::Object{{"filled", false}, {"size", 60}}}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("median", "quantitative", "tokens/s")}, {"color", color},
                                {"strokeDash", kind_dash()}, {"tooltip", tooltip()}}}};
  Json points = Json::Object{
      {"mark", Json::Object{{"type", "point"}, {"filled", true}, {"size", 60}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("median", "quantitative")}, {"color", color},
                                {"fillOpacity", kind_fill_opacity()}}}};
  Json whisker = Json::Object{
      {"mark", Json::Object{{"type", "rule"}, {"strokeWidth", 1.5}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("lo", "quantitative")}, {"y2", Json::Object{{"field", "hi"}}}, {"color", color}}}};
  s.charts.push_back(faceted("Training tokens/s: naive and flash attention", s.provenance, std::move(values),
                             Json::Array{line, points, whisker}));
  s.tables.push_back(std::move(t));
  return s;
}

// ---------------------------------------------------------------------------------------------
// (c) scaling and sharding: bench train and bench sr at each number of ranks and shard mode.

struct ScalePoint {
  const Figure* f;
  int ranks;
  std::string shard;
  double work;  // tokens or images of one step of the whole job
};

Section scaling_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "Sharding overhead and scaling efficiency";
  s.about = "bench train (step_seconds) and bench sr (train_step_seconds) at each number of ranks and shard mode, "
            "with the same batch on each rank. Weak-scaling efficiency = throughput at N ranks / (N × throughput at "
            "1 rank, unsharded); the overhead of a shard mode is its median step time over the unsharded one's at "
            "the same ranks, minus one.";
  // Grouped by everything but the ranks and shard mode (and for bench sr, whose batch is the
  // job's, the batch: its batch per rank stands in the key instead).
  std::map<std::string, std::vector<ScalePoint>> groups;
  for (const Figure& f : figs) {
    const Json& p = f.params();
    const int ranks = int(param_number(p, "ranks", 1));
    if (f.row->workload.name == "bench train" && f.row->name == "step_seconds")
      groups[config_without(f, {"ranks", "shard", "overlap"})].push_back(
          {&f, ranks, param_text(p, "shard"), ranks * param_number(p, "batch") * param_number(p, "seq")});
    else if (f.row->workload.name == "bench sr" && f.row->name == "train_step_seconds")
      groups[cat(config_without(f, {"ranks", "shard", "batch"}), "|", param_number(p, "batch") / ranks)].push_back(
          {&f, ranks, param_text(p, "shard"), param_number(p, "batch")});
  }
  Table t{{"machine", "workload", "ranks", "shard", "threads a rank", "step s median (min–max)", "throughput /s",
           "weak-scaling efficiency", "overhead vs none"},
          {}};
  Json values = Json::Array{};
  std::vector<const Figure*> used;
  for (auto& [key, pts] : groups) {
    if (std::none_of(pts.begin(), pts.end(), [](const ScalePoint& p) { return p.ranks > 1; })) continue;
    std::sort(pts.begin(), pts.end(), [](const ScalePoint& a, const ScalePoint& b) {
      return std::make_tuple(a.ranks, a.shard != "none", a.shard) < std::make_tuple(b.ranks, b.shard != "none", b.shard);
    });
    const ScalePoint* one = nullptr;
    for (const ScalePoint& p : pts)
      if (p.ranks == 1 && p.shard == "none") one = &p;
    const Figure& f0 = *pts.front().f;
    const Json& p0 = f0.params();
    const bool sr = f0.row->workload.name == "bench sr";
    const std::string what =
        sr ? cat("bench sr ", param_text(p0, "model"), ", ", num(param_number(p0, "batch") / pts.front().ranks),
                 " images of ", num(param_number(p0, "size")), "² a rank")
           : cat("bench train ", param_text(p0, "model"), ", ", param_text(p0, "attention"), ", batch ",
                 num(param_number(p0, "batch")), " × seq ", num(param_number(p0, "seq")), " a rank");
    for (const ScalePoint& p : pts) {
      const Rate r = rate(*p.f, p.work);
      std::string eff = "–", over = "–";
      if (one && p.ranks > 1 && p.shard == "none" && one->f->kind == p.f->kind)
        eff = cat(num(100 * r.median / (p.ranks * rate(*one->f, one->work).median)), "%");
      for (const ScalePoint& q : pts)
        if (q.ranks == p.ranks && q.shard == "none" && p.shard != "none" && q.f->kind == p.f->kind)
          over = percent(p.f->median / q.f->median - 1);
      for (std::string* c : {&eff, &over})
        if (p.f->modeled() && *c != "–") *c += " *modeled*";
      t.rows.push_back({host(*p.f), what, cat(p.ranks), p.shard, cat(p.f->row->run.threads), cell(*p.f),
                        cell(r, p.f->modeled()) + (sr ? " images" : " tokens"), eff, over});
      values.push_back(bar_value(host(*p.f) + " · " + what, cat(p.ranks, p.ranks == 1 ? " rank" : " ranks"), p.ranks,
                                 p.shard, {p.f->median, p.f->min, p.f->max}, *p.f, over == "–" ? "" : over));
      used.push_back(p.f);
    }
  }
  if (!close_section(s, used, "No bench train or bench sr figures on several ranks in this store.")) return s;
  s.charts.push_back(bar_chart("Step time by ranks and shard mode (label: overhead vs none)", s.provenance,
                               std::move(values), "ranks", "step seconds", "shard"));
  s.tables.push_back(std::move(t));
  return s;
}

// ---------------------------------------------------------------------------------------------
// (d) the SR model's throughput: training images/s and sampling images/s per denoising step.

Section sr_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "SR model throughput";
  s.about = "bench sr: training images/s = batch / median train step seconds; sampling images/s per step = batch / "
            "median seconds of one denoising step (a sample takes as many steps as the sampler runs).";
  Table t{{"machine", "model", "size", "batch", "ranks", "threads a rank", "train images/s", "sampling images/s per step"}, {}};
  Json values = Json::Array{};
  std::vector<const Figure*> used;
  std::vector<const Figure*> train = of(figs, "bench sr");
  std::erase_if(train, [](const Figure* f) { return f->row->name != "train_step_seconds"; });
  // By machine, then the order of ranks and batch a reader scans (the store's order is the runs').
  auto order = [](const Figure* f) {
    return std::make_tuple(host(*f), param_text(f->params(), "model"), param_number(f->params(), "size"),
                           param_number(f->params(), "ranks", 1), param_number(f->params(), "batch"));
  };
  std::stable_sort(train.begin(), train.end(), [&](const Figure* a, const Figure* b) { return order(a) < order(b); });
  for (const Figure* f : train) {
    const Figure* sample = find(figs, f->config, "sample_step_seconds");
    const Json& p = f->params();
    const double batch = param_number(p, "batch");
    const int ranks = int(param_number(p, "ranks", 1));
    const std::string x = cat(ranks, ranks == 1 ? " rank" : " ranks", ", batch ", num(batch));
    const std::string panel_tail = cat(" · ", param_text(p, "model"), " ", num(param_number(p, "size")), "²");
    const Rate tr = rate(*f, batch);
    t.rows.push_back({host(*f), param_text(p, "model"), num(param_number(p, "size")), num(batch), cat(ranks),
                      cat(f->row->run.threads), cell(tr, f->modeled()),
                      sample ? cell(rate(*sample, batch), sample->modeled()) : "–"});
    values.push_back(bar_value(host(*f) + " · train images/s" + panel_tail, x, ranks * 1e6 + batch, host(*f), tr, *f, ""));
    used.push_back(f);
    if (sample) {
      values.push_back(bar_value(host(*f) + " · sampling images/s per step" + panel_tail, x, ranks * 1e6 + batch,
                                 host(*f), rate(*sample, batch), *sample, ""));
      used.push_back(sample);
    }
  }
  if (!close_section(s, used, "No bench sr figures in this store.")) return s;
  s.charts.push_back(bar_chart("SR training and sampling throughput", s.provenance, std::move(values), "ranks, batch", "images/s", "machine"));
  s.tables.push_back(std::move(t));
  return s;
}

// ---------------------------------------------------------------------------------------------
// (e) the SR model's quality: sr eval's figures (each the mean over the maps) beside bicubic's, a
// table per workload (the model, the maps, the sampler), a row group per machine.

Section sr_quality_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "Super-resolution quality";
  s.about = "sr eval: the SR model's samples against the truth of held-out maps, beside bicubic up-sampling of the "
            "same low-resolution input (docs/SR.md defines each figure); every figure is the mean over the maps. "
            "Several runs of one workload on one machine give the median of their figures, with (min–max); the "
            "seconds per map are the median over the maps (the first map's include the first calls' set-up).";
  struct Row {
    const char *label, *model, *bicubic, *better;
  };
  static const Row kRows[] = {
      {"PSNR of the samples' mean (dB)", "psnr_mean", "psnr_bicubic", "higher"},
      {"PSNR of one sample (dB)", "psnr_one", "psnr_bicubic", "higher"},
      {"SSIM of the mean", "ssim_mean", "ssim_bicubic", "higher"},
      {"power spectrum, worst |R − 1| (the samples; maps pooled)", "spectrum_worst", "spectrum_worst_bicubic", "lower"},
      {"power spectrum, mean R over the same bands (1: none missing)", "spectrum_mean", "spectrum_mean_bicubic",
       "nearer 1"},
      {"power spectrum, worst |R − 1| over quarter-octave bands", "spectrum_worst_wide", "spectrum_worst_wide_bicubic",
       "lower"},
      {"cross-correlation, least r(k) (the samples' mean r)", "min_corr", "min_corr_bicubic", "higher"},
      {"W1 of the values (one sample)", "w1", "w1_bicubic", "lower"},
      {"consistency ‖D(SR) − LR‖ / ‖LR‖ (mean)", "consistency", "consistency_bicubic", "lower"},
      {"coverage of the truth by mean ± sd", "coverage", nullptr, "below 0.68 for few samples"},
      {"coverage by the samples' 68% predictive interval", "coverage_predictive", nullptr, "0.68 when calibrated"},
      {"Minkowski functionals' distance, over bicubic's", "minkowski", nullptr, "below 1"},
      {"seconds per map", "seconds_per_map", nullptr, "lower"}};
  // A figure of one run as it is; of several, their median and range.
  auto value = [](const Figure* f) -> std::string {
    return !f ? "–" : f->runs.size() > 1 || f->n > 1 ? cell(*f) : num(f->median);
  };
  std::map<std::string, std::vector<const Figure*>> workloads;  // params -> a figure of each configuration
  for (const Figure* f : of(figs, "sr eval"))
    if (f->row->name == "psnr_mean") workloads[canonical_json(f->params())].push_back(f);
  std::vector<const Figure*> used;
  for (auto& [key, configs] : workloads) {
    std::stable_sort(configs.begin(), configs.end(), [](const Figure* a, const Figure* b) {
      return std::make_tuple(host(*a), a->row->run.threads) < std::make_tuple(host(*b), b->row->run.threads);
    });
    const Json& p = configs.front()->params();
    Table t{{"machine", "figure", "model", "bicubic", "better"}, {}};
    t.caption = cat(param_text(p, "model"), " (", param_text(p, "weight_types"), ", ",
                    num(param_number(p, "weights_bytes") / 1e6), " MB) on ", param_text(p, "data"), ": ",
                    param_text(p, "sampler"), ", ", param_text(p, "steps"), " steps, ", param_text(p, "samples"),
                    " samples, seed ", param_text(p, "seed"), ", tiles of ", param_text(p, "tile"));
    // One sample has no spread: its coverage is not measured.
    const bool one_sample = param_number(p, "samples") < 2;
    for (const Figure* first : configs) {
      const std::string machine = cat(host(*first), ", ", first->row->run.threads, " threads");
      for (const Row& r : kRows) {
        const Figure* m = find(figs, first->config, r.model);
        const Figure* b = r.bicubic ? find(figs, first->config, r.bicubic) : nullptr;
        const bool unmeasured = one_sample && std::string(r.model) == "coverage";
        t.rows.push_back({machine, r.label, unmeasured ? "–" : value(m), r.bicubic ? value(b) : "", r.better});
        for (const Figure* f : {m, b})
          if (f) used.push_back(f);
      }
    }
    s.tables.push_back(std::move(t));
  }
  // No noise note: the quality figures are the same on every run of a seed, and the seconds are
  // of different maps, the first with the first calls' set-up, not repetitions of one.
  if (close_section(s, used, "No sr eval figures in this store.")) s.note.clear();
  return s;
}

// ---------------------------------------------------------------------------------------------
// (f) accuracy against size: a quality metric of a workload whose params name its size
// (size_bytes, or weights_bytes as eval records give it).

double size_bytes(const Json& params) {
  const double s = param_number(params, "size_bytes");
  return s > 0 ? s : param_number(params, "weights_bytes");
}

// The quality metrics the report knows, and whether more is better.
bool quality_metric(const std::string& name, bool* higher_better) {
  // As eval kl, mc and ppl name them (genperf study stores their records), and plainer names.
  static const std::set<std::string> lower = {"kl", "kl_mean", "ppl", "perplexity", "nll"};
  static const std::set<std::string> higher = {"mc_accuracy", "accuracy", "acc", "acc_norm", "top1", "top1_agreement"};
  *higher_better = higher.count(name) > 0;
  return lower.count(name) || higher.count(name);
}

Section accuracy_section(const std::vector<Figure>& figs) {
  Section s;
  s.title = "Accuracy against size (the Pareto front)";
  s.about = "Quality metrics (KL, perplexity, accuracy, ...) of workloads whose params give the model's size; the "
            "line joins the Pareto front: the configurations no smaller one matches in quality.";
  std::map<std::string, std::vector<const Figure*>> panels;  // machine and metric -> figures
  for (const Figure& f : figs) {
    bool higher = false;
    if (quality_metric(f.row->name, &higher) && size_bytes(f.params()) > 0)
      panels[host(f) + " · " + f.row->name].push_back(&f);
  }
  if (panels.empty()) {
    s.empty = "No quantization metrics in this store (a metric such as kl or mc_accuracy of a workload with a "
              "size_bytes param would be plotted here).";
    return s;
  }
  Table t{{"machine", "metric", "configuration", "size MB", "value median (min–max)", "on the front"}, {}};
  Json values = Json::Array{};
  std::vector<const Figure*> used;
  for (auto& [panel, list] : panels) {
    bool higher = false;
    quality_metric(list.front()->row->name, &higher);
    auto better = [&](double a, double b) { return higher ? a > b : a < b; };
    std::sort(list.begin(), list.end(), [&](const Figure* a, const Figure* b) {
      const double sa = size_bytes(a->params()), sb = size_bytes(b->params());
      return sa != sb ? sa < sb : better(a->median, b->median);
    });
    bool any = false;
    double best = 0;
    for (const Figure* f : list) {
      const bool front = !any || better(f->median, best);
      if (front) best = f->median, any = true;
      const Json& p = f->params();
      std::string label = param_text(p, "recipe");
      if (label.empty()) label = param_text(p, "weight_types");
      if (label.empty()) label = f->row->workload.name;
      const double mb = size_bytes(p) / 1e6;
      t.rows.push_back({host(*f), f->row->name, label, num(mb), cell(*f), front ? "yes" : ""});
      values.push_back(Json::Object{{"panel", panel}, {"size_mb", mb}, {"median", f->median}, {"lo", f->min},
                                    {"hi", f->max}, {"series", label}, {"kind", metric_kind_name(f->kind)},
                                    {"front", front}, {"n", int64_t(f->n)}, {"x", label}});
      used.push_back(f);
    }
  }
  close_section(s, used, "");
  Json x = field("size_mb", "quantitative", "size (MB)");
  Json points = Json::Object{
      {"mark", Json::Object{{"type", "point"}, {"filled", true}, {"size", 70}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("median", "quantitative", "value")}, {"color", field("series", "nominal", "configuration")},
                                {"fillOpacity", kind_fill_opacity()}, {"tooltip", tooltip()}}}};
  Json whisker = Json::Object{
      {"mark", Json::Object{{"type", "rule"}, {"color", "#222"}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("lo", "quantitative")}, {"y2", Json::Object{{"field", "hi"}}}}}};
  Json front = Json::Object{
      {"transform", Json::Array{Json::Object{{"filter", "datum.front"}}}},
      {"mark", Json::Object{{"type", "line"}, {"color", "#555"}}},
      {"encoding", Json::Object{{"x", x}, {"y", field("median", "quantitative")}, {"order", field("size_mb", "quantitative")}}}};
  s.charts.push_back(faceted("Quality against size", s.provenance, std::move(values), Json::Array{front, whisker, points}));
  s.tables.push_back(std::move(t));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Rendering.

// A table cell: *modeled* becomes an emphasized label.
std::string html_cell(const std::string& s) {
  std::string o = report::xml_text(s);
  const std::string mark = "*modeled*";
  for (size_t at; (at = o.find(mark)) != std::string::npos;) o.replace(at, mark.size(), "<em class=\"modeled\">modeled</em>");
  return o;
}

// JSON inside a <script>: "<" escaped, so no string in the data can close the element.
std::string script_json(const Json& j) {
  std::string o;
  for (char c : j.dump()) o += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return o;
}

// The bundle inside a <script>: checked, since a literal "</script" in it would end the element.
const std::string& script_code(const std::string& code, const char* name) {
  std::string lower(code.size(), ' ');
  std::transform(code.begin(), code.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  GP_CHECK(lower.find("</script") == std::string::npos && lower.find("<!--") == std::string::npos, "[report] ", name,
           " contains </script or <!--, so it cannot be inlined in a <script> element");
  return code;
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}

std::string markdown(const std::vector<Section>& sections, const std::string& source, const std::string& summary) {
  std::string md = cat("# genperf study report: ", source, "\n\n", summary, "\n\n",
                       "Medians with (min–max) over the repetitions; throughput is work / median seconds, its range from "
                       "the slowest and fastest repetitions. Figures marked *modeled* are predictions, not measurements. "
                       "The charts are in the HTML report beside this file.\n");
  for (const Section& s : sections) {
    md += cat("\n## ", s.title, "\n\n", s.about, "\n\n");
    if (!s.empty.empty()) {
      md += s.empty + "\n";
      continue;
    }
    for (const Table& t : s.tables) {
      if (!t.caption.empty()) md += cat(t.caption, "\n\n");
      for (const std::string& h : t.header) md += "| " + md_cell(h) + " ";
      md += "|\n";
      for (size_t i = 0; i < t.header.size(); ++i) md += i < 2 ? "|---" : "|--:";
      md += "|\n";
      for (const auto& row : t.rows) {
        for (const std::string& c : row) md += "| " + md_cell(c) + " ";
        md += "|\n";
      }
      md += "\n";
    }
    md += cat("Measured on ", s.provenance, ".\n");
    if (!s.note.empty()) md += cat("\n", s.note, "\n");
  }
  return md;
}

std::string html(const std::vector<Section>& sections, const ReportAssets& a, const std::string& source,
                 const std::string& summary) {
  std::string h = cat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // No request leaves the page: everything it needs is in it.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline' "
      "'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">\n"
      "<title>genperf study report: ", report::xml_text(source), "</title>\n<style>\n"
      "body{font-family:Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222}\n"
      "table{border-collapse:collapse;margin:12px 0;font-size:13px}\n"
      "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f0f0f0}\n"
      "td:nth-child(-n+2),th:nth-child(-n+2){text-align:left}caption{text-align:left;padding:4px 0}\n"
      ".about{max-width:900px}.provenance{color:#555;font-size:12px}.empty{font-style:italic}\n"
      "em.modeled{color:#a33}\n</style>\n</head>\n<body>\n<h1>genperf study report: ", report::xml_text(source), "</h1>\n<p>",
      report::xml_text(summary), "</p>\n<p class=\"about\">Medians with (min–max) over the repetitions; throughput is work / "
      "median seconds, its whiskers from the slowest and fastest repetitions. Modeled figures (predictions) are drawn "
      "hollow and dashed and labelled <em class=\"modeled\">modeled</em>.</p>\n");
  Json specs = Json::Array{};
  for (const Section& s : sections) {
    h += cat("<section>\n<h2>", report::xml_text(s.title), "</h2>\n<p class=\"about\">", report::xml_text(s.about), "</p>\n");
    if (!s.empty.empty()) {
      h += cat("<p class=\"empty\">", report::xml_text(s.empty), "</p>\n</section>\n");
      continue;
    }
    for (const Json& c : s.charts) {
      h += cat("<div class=\"chart\" id=\"chart-", specs.as_array().size(), "\"></div>\n");
      specs.push_back(c);
    }
    for (const Table& t : s.tables) {
      h += "<table>\n";
      if (!t.caption.empty()) h += cat("<caption>", report::xml_text(t.caption), "</caption>\n");
      h += "<tr>";
      for (const std::string& c : t.header) h += "<th>" + report::xml_text(c) + "</th>";
      h += "</tr>\n";
      for (const auto& row : t.rows) {
        h += "<tr>";
        for (const std::string& c : row) h += "<td>" + html_cell(c) + "</td>";
        h += "</tr>\n";
      }
      h += "</table>\n";
    }
    h += cat("<p class=\"provenance\">Measured on ", report::xml_text(s.provenance), ".</p>\n");
    if (!s.note.empty()) h += cat("<p class=\"provenance\">", report::xml_text(s.note), "</p>\n");
    h += "</section>\n";
  }
  h += cat("<script>", script_code(a.vega, "vega.min.js"), "</script>\n<script>", script_code(a.vega_lite, "vega-lite.min.js"),
           "</script>\n<script>", script_code(a.vega_embed, "vega-embed.min.js"), "</script>\n");
  // genperfReport settles when every chart has rendered (the browser test waits on it).
  h += cat("<script>\nconst specs = ", script_json(specs),
           ";\nwindow.genperfReport = Promise.all(specs.map((s, i) =>\n"
           "  vegaEmbed('#chart-' + i, s, {renderer: 'svg', actions: false})));\n</script>\n</body>\n</html>\n");
  return h;
}

}  // namespace

ReportAssets read_report_assets(const std::string& node_modules) {
  auto read = [&](const char* rel) {
    const std::string path = node_modules + "/" + rel;
    std::error_code ec;
    GP_CHECK(std::filesystem::is_regular_file(path, ec), "[report] ", path,
             ": missing; the report inlines Vega, Vega-Lite and vega-embed from tools/report/node_modules, which "
             "scripts/deps.sh installs (npm ci in tools/report), or name their node_modules with --assets");
    return read_text_file(path);
  };
  return {read("vega/build/vega.min.js"), read("vega-lite/build/vega-lite.min.js"), read("vega-embed/build/vega-embed.min.js")};
}

StudyReport study_report(const std::vector<MetricRow>& rows, const ReportAssets& assets, const std::string& source) {
  const std::vector<Figure> figs = pool(rows);
  std::set<std::string> machines, runs;
  for (const MetricRow& r : rows) machines.insert(r.machine.fingerprint), runs.insert(r.run.uuid);
  const std::string summary = cat(runs.size(), " runs on ", machines.size(), machines.size() == 1 ? " machine, " : " machines, ",
                                  figs.size(), " figures.");
  const std::vector<Section> sections = {isa_section(figs), attention_section(figs), scaling_section(figs),
                                         sr_section(figs), sr_quality_section(figs), accuracy_section(figs)};
  StudyReport r;
  for (const Section& s : sections) r.charts += int(s.charts.size());
  r.html = html(sections, assets, source, summary);
  r.markdown = markdown(sections, source, summary);
  return r;
}

StudyReport write_study_report(const std::string& db, const std::string& node_modules, const std::string& html_path,
                               const std::string& md_path) {
  const ResultsStore store(db, ResultsStore::Mode::Existing);
  const std::vector<MetricRow> rows = store.metrics();
  const StudyReport r = study_report(rows, read_report_assets(node_modules), std::filesystem::path(db).filename().string());
  write_file_atomic(html_path, r.html);
  write_file_atomic(md_path, r.markdown);
  return r;
}

}  // namespace genperf

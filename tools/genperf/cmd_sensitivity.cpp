// `genperf sensitivity`: measures the sensitivity map of a model on calibration text and writes
// PREFIX.csv, PREFIX.json and PREFIX.svg. With --check-bpw it also allocates at those budgets,
// quantizes, and prints the predicted against the achieved KL on the calibration windows, beside
// uniform quantization and the q4_k_m recipe (how well the additivity assumption holds, and
// what the allocation gains).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "common.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/quantize.h"
#include "genperf/report.h"
#include "genperf/sensitivity.h"

namespace genperf::cli {
namespace {

std::vector<DType> parse_formats(const std::string& s) {
  std::vector<DType> out;
  for (const std::string& x : split(s, ',')) {
    GP_CHECK(!x.empty(), "[sensitivity] --formats: empty name in '", s, "'");
    const DType f = parse_dtype(x);
    GP_CHECK(f != DType::F32, "[sensitivity] --formats: f32 is not a quantization format");
    GP_CHECK(std::find(out.begin(), out.end(), f) == out.end(), "[sensitivity] --formats: ", x, " given twice");
    out.push_back(f);
  }
  return out;
}

// Positive numbers, or "q4_k_m" for the bits per weight of that recipe.
std::vector<double> parse_budgets(const std::string& s, const char* opt, const Checkpoint& ck) {
  std::vector<double> out;
  for (const std::string& x : split(s, ',')) {
    if (x == "q4_k_m") {
      out.push_back(plan_bpw(ck, recipe_plan(ck, "q4_k_m")));
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    GP_CHECK(!x.empty() && end && *end == 0 && v > 0, "[sensitivity] ", opt, " expects positive numbers or q4_k_m, got '", x, "'");
    out.push_back(v);
  }
  return out;
}

}  // namespace

int cmd_sensitivity(int argc, char** argv) {
  Args a("sensitivity",
         {kModel,
          {"calib", "calibration data: a text file; for an SR model, maps (FITS/PNG files, directories, synthetic:N...)"},
          {"out", "output prefix: writes PREFIX.csv, PREFIX.json, PREFIX.svg"},
          {"formats", "candidate formats", "q2_k,q3_k,q4_0,q4_k,q5_k,q6_k,q8_0"},
          {"ctx", "tokens per calibration window", "256"},
          {"tokens", "calibration tokens to use (default: the whole text)", "", false, true},
          {"crops", "SR models: calibration crops, each at its own diffusion step", "16"},
          {"crop", "SR models: crop side in high-resolution pixels", "64"},
          {"method", "quantizer: rtn, imatrix or gptq", "rtn"},
          {"proxy-only", "compute only the activation-weighted proxy (no per-entry forward passes)", "", true},
          {"anchor", "cheap map: measure only this format per tensor, estimate the others from the proxy", "", false, true},
          {"check-bpw", "after measuring, allocate at these bits per weight (e.g. q4_k_m,4.0,4.5; q4_k_m: that recipe's) "
                        "and report predicted vs achieved KL beside uniform formats and q4_k_m", "",
           false, true},
          kThreads,
          kJson},
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  const bool json = a.flag("json");
  const std::string calib = a.str("calib");
  const Checkpoint ck = load_checkpoint(a.str("model"));

  CalibrationOptions co;
  co.ctx = a.integer("ctx");
  co.max_tokens = a.has("tokens") ? a.integer("tokens") : 0;
  GP_CHECK(co.max_tokens >= 0, "[sensitivity] --tokens must be positive");
  co.crops = a.integer("crops");
  co.crop = a.integer("crop");
  co.source = calib;
  co.progress = !json;
  SensitivityOptions so;
  so.formats = parse_formats(a.str("formats"));
  so.quant.method = parse_quant_method(a.str("method"));
  so.measure = !a.flag("proxy-only");
  if (a.has("anchor")) {
    so.anchor = parse_dtype(a.str("anchor"));
    GP_CHECK(so.measure, "[sensitivity] --anchor and --proxy-only exclude each other");
    GP_CHECK(std::find(so.formats.begin(), so.formats.end(), so.anchor) != so.formats.end(), "[sensitivity] --anchor ",
             a.str("anchor"), " must be one of --formats");
  }
  so.progress = !json;
  const std::vector<double> checks =
      a.has("check-bpw") ? parse_budgets(a.str("check-bpw"), "--check-bpw", ck) : std::vector<double>{};
  GP_CHECK(checks.empty() || so.measure, "[sensitivity] --check-bpw needs the measured map (drop --proxy-only)");

  const auto t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<Calibration> cal = make_calibration(ck, calib, co);
  const Calibration& ref = *cal;
  const std::string metric = ref.metric() == std::string("kl") ? "KL" : ref.metric();
  if (!json) {
    const int64_t passes = int64_t(quantizable_tensors(ck).size() * (so.anchor != DType::F32 ? 1 : so.formats.size()));
    std::fprintf(stderr, "calibration %s; one pass %.2f s, about %lld passes\n", ref.describe().c_str(),
                 ref.seconds_per_score(), (long long)(so.measure ? passes : 0));
  }
  SensitivityMap m = measure_sensitivity(ck, ref, so);
  m.calib = calib;
  write_sensitivity(m, a.str("out"));
  const double measure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Json out = Json::parse(sensitivity_json(m));
  Json summary = Json::Object{{"files", Json::Array{a.str("out") + ".csv", a.str("out") + ".json", a.str("out") + ".svg"}},
                              {"seconds", measure_s}};
  // Mean KL and correlation per format, and the most sensitive tensors.
  if (!json) {
    std::printf("model %s, %zu tensors x %zu formats = %zu entries, %.1f s\n", m.model.c_str(), m.tensors.size(),
                m.formats.size(), m.entries.size(), measure_s);
    if (m.measured) {
      std::printf("%-12s %7s %12s %12s %12s %10s\n", "format", "bpw", ("mean " + metric).c_str(),
                  ("max " + metric).c_str(), "mean dloss", "spearman");
    } else {  // --proxy-only: no KL was measured
      std::printf("%-12s %7s %12s %12s\n", "format", "bpw", "mean proxy", "max proxy");
    }
    for (DType f : m.formats) {
      double s = 0, mx = 0, dl = 0, bpw = 0, px = 0, pmx = 0;
      int n = 0;
      for (const auto& e : m.entries)
        if (e.format == f)
          s += e.kl, dl += e.dloss, mx = std::max(mx, e.kl), px += e.proxy, pmx = std::max(pmx, e.proxy), bpw = e.bpw, ++n;
      // (anchored maps: the other formats' figures are estimates)
      if (!n) continue;
      if (!m.measured) {
        std::printf("%-12s %7.3f %12.4g %12.4g\n", dtype_name(f), bpw, px / n, pmx);
        continue;
      }
      auto it = m.spearman_by_format.find(dtype_name(f));
      std::printf("%-12s %7.3f %12.4g %12.4g %12.4g %10.3f\n", dtype_name(f), bpw, s / n, mx, dl / n,
                  it == m.spearman_by_format.end() ? NAN : it->second);
    }
    if (m.measured)
      std::printf("Spearman rank correlation of proxy and measured %s, all entries: %.3f\n", metric.c_str(), m.spearman);
    for (size_t i = 0; i < m.notes.size() && i < 4; ++i) std::printf("note: %s\n", m.notes[i].c_str());
    if (m.notes.size() > 4) std::printf("note: ... and %zu more (in %s.json)\n", m.notes.size() - 4, a.str("out").c_str());
  }

  if (!checks.empty()) {
    // Achieved KL on the calibration windows: the allocation at each budget, then the fixed
    // recipes for comparison.
    QuantizeOptions qo = so.quant;
    ActivationStats stats;
    if (qo.method != QuantMethod::Rtn) {
      stats = ref.activation_stats(ck, qo.method == QuantMethod::Gptq);
      qo.stats = &stats;
    }
    Json::Array rows;
    auto run = [&](const std::string& name, const QuantPlan& plan, const AllocationReport* r) {
      const Checkpoint q = quantize_checkpoint(ck, plan, qo);
      const SizeReport sz = size_report(q);
      const CalibrationScore sc = ref.score(q);
      Json row = Json::Object{{"plan", name}, {"bpw", sz.bpw}, {"total_bytes", sz.total_bytes}, {"kl", sc.kl},
                              {"dloss", sc.dloss}, {"metric", m.metric}};
      if (std::isfinite(sc.top1)) row["top1"] = sc.top1;
      if (r) {
        row["predicted_kl"] = r->predicted;
        row["predicted_dloss"] = r->predicted_dloss;
        row["predicted_bytes"] = r->total_bytes;
        row["lagrangian_bound"] = r->lagrangian_bound;
        row["achieved_over_predicted"] = sc.kl / r->predicted;
      }
      if (!json) {
        std::printf("%-22s %7.4f bpw %10.3f MB  %s %.5g  dloss %+.5g", name.c_str(), sz.bpw,
                    double(sz.total_bytes) / 1e6, metric.c_str(), sc.kl, sc.dloss);
        if (std::isfinite(sc.top1)) std::printf("  top-1 %.4f", sc.top1);
        if (r) std::printf("  (predicted %s %.5g, %.3f MB; achieved/predicted %.2f)", metric.c_str(), r->predicted,
                           double(r->total_bytes) / 1e6, sc.kl / r->predicted);
        std::printf("\n");
      }
      rows.push_back(std::move(row));
    };
    if (!json) std::printf("\nplans scored on the calibration windows (%s quantizer):\n", m.method.c_str());
    for (double bpw : checks) {
      AllocationReport r;
      QuantPlan plan;
      try {
        plan = plan_for_budget(m, Budget::bpw(bpw), &r);
      } catch (const Error& e) {  // an infeasible budget is a finding here, not the end of the run
        if (!json) std::printf("auto@%g: %s\n", bpw, e.what());
        rows.push_back(Json::Object{{"plan", cat("auto@", bpw)}, {"error", std::string(e.what())}});
        continue;
      }
      if (!json) std::printf("auto@%g: %s\n", bpw, r.summary().c_str());
      run(cat("auto@", bpw), plan, &r);
    }
    // q4_k_m is llama.cpp's mix for LLMs; other families compare with the uniform formats.
    std::vector<std::string> recipes;
    if (metric == "KL") recipes.push_back("q4_k_m");
    for (DType f : m.formats) recipes.push_back(cat("uniform:", dtype_name(f)));
    for (const auto& rc : recipes) {
      std::vector<std::string> notes;
      run(rc, recipe_plan(ck, rc, &notes), nullptr);
    }
    summary["checks"] = Json(std::move(rows));
  }
  std::fprintf(stderr, "wrote %s.csv, %s.json, %s.svg\n", a.str("out").c_str(), a.str("out").c_str(), a.str("out").c_str());
  if (json) {
    out["summary"] = summary;
    print_json(out);
  }
  return 0;
}

}  // namespace genperf::cli

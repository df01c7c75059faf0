// `genperf quantize`: a recipe (or, later, a budget) gives each quantizable tensor a format; the
// method (rtn, imatrix, gptq) decides how the values are chosen, from calibration text when it
// needs statistics. Prints the per-tensor formats and the size report, and writes a .gguf file
// or an HF-style directory (when a format is not a ggml type).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "common.h"
#include "genperf/checkpoint.h"
#include "genperf/decode_latency.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/llama.h"
#include "genperf/quantize.h"
#include "genperf/sensitivity.h"

namespace genperf::cli {
namespace {

namespace fs = std::filesystem;

bool is_gguf(const std::string& p) { return p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0; }

std::string shape_text(const Tensor& t) {
  std::string s;
  for (int i = 0; i < t.ndim(); ++i) s += cat(i ? "x" : "", t.size(i));
  return s;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  Args a("quantize",
         {kModel,
          {"out", "output: a .gguf file, or a directory (HF safetensors; needed for formats GGUF lacks)"},
          {"recipe", "uniform:<format> (q4_0, q4_k, q8_0, f8_e4m3_b32, ...), q4_k_m (llama.cpp's mix), or auto "
                     "(a budget: --target-bpw, --target-size, --max-kl or --target-latency)", "q4_k_m"},
          {"target-bpw", "auto: bits per weight over the quantizable tensors", "", false, true},
          {"target-size", "auto: total weight bytes", "", false, true},
          {"max-kl", "auto: the smallest model whose predicted KL (nats/token) stays below this", "", false, true},
          {"target-latency", "auto: the least predicted KL whose decode step takes at most this many ms on --device "
                             "(per-format kernel times measured here, or modeled for a catalogue device)", "", false, true},
          {"device", "--target-latency: cpu (this machine, measured) or a catalogue device (modeled: h100, a100, ...)",
           "cpu"},
          {"latency-context", "--target-latency: tokens in the KV cache when a decode step is timed", "128"},
          {"sensitivity", "auto: a sensitivity map (PREFIX.json of genperf sensitivity); else measured on --calib", "",
           false, true},
          {"proxy", "auto: allocate by the activation-weighted error proxy instead of measured KL", "", true},
          {"method", "rtn (round to nearest), imatrix (weighted by activation statistics) or gptq", "rtn"},
          {"calib", "calibration text for imatrix and gptq; auto: measures the map (without --sensitivity) and the "
                    "achieved KL", "", false, true},
          {"calib-tokens", "calibration tokens to use (the text must have this many)", "4096"},
          {"ctx", "tokens per calibration window", "512"},
          {"gptq-block", "GPTQ lazy-batch width in columns", "128"},
          {"gptq-damp", "GPTQ dampening, a fraction of the Hessian's mean diagonal", "0.01"},
          kDtype, kThreads, kJson},
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  const bool json = a.flag("json");
  const std::string model = a.str("model"), out = a.str("out"), recipe = a.str("recipe");
  Checkpoint ck = model.rfind("random:", 0) == 0
                      ? random_checkpoint(preset_config(model.substr(7)), parse_dtype(a.str("dtype")), 1)
                      : load_checkpoint(model);

  QuantizeOptions o;
  o.method = parse_quant_method(a.str("method"));
  std::vector<std::string> notes;
  GP_CHECK(a.has("target-latency") || a.str("device") == "cpu",
           "[quantize] --device names where --target-latency is timed; give --recipe auto --target-latency MS");
  std::optional<AutoPlan> autop;
  DecodeLatencyOptions lo;
  std::optional<DecodeLatency> latency;
  if (recipe == "auto") {
    const int budgets =
        int(a.has("target-bpw")) + int(a.has("target-size")) + int(a.has("max-kl")) + int(a.has("target-latency"));
    GP_CHECK(budgets == 1, "[quantize] --recipe auto needs exactly one of --target-bpw, --target-size, --max-kl and "
                           "--target-latency");
    AutoPlanOptions ao;
    ao.budget = a.has("target-bpw")    ? Budget::bpw(a.number("target-bpw"))
                : a.has("target-size") ? Budget::bytes(a.number("target-size"))
                : a.has("max-kl")      ? Budget::max_kl(a.number("max-kl"))
                                       : Budget::latency(a.number("target-latency") / 1e3);
    if (a.has("target-latency")) {
      lo.device = a.str("device");
      if (lo.device != "cpu") lo.device = catalog_device(lo.device).id;  // names the known ones when unknown
      lo.context = a.integer("latency-context");
      lo.progress = !json;
      ao.latency = [&](const SensitivityMap& m) {
        latency = decode_latency(ck, m.formats, lo);
        return latency->table;
      };
    }
    ao.proxy = a.flag("proxy");
    ao.sensitivity = a.has("sensitivity") ? a.str("sensitivity") : "";
    ao.calib = a.has("calib") ? a.str("calib") : "";
    ao.ctx = a.integer("ctx");
    ao.calib_tokens = a.integer("calib-tokens");
    ao.progress = !json;
    ao.quant = o;
    autop.emplace(plan_auto(ck, ao));
    notes.insert(notes.end(), autop->notes.begin(), autop->notes.end());
  }
  const QuantPlan plan = autop ? autop->plan : recipe_plan(ck, recipe, &notes);
  check_quantized_output(out, ck, plan);
  if (is_gguf(out))
    for (const std::string& n : gguf_llamacpp_notes(ck)) notes.push_back(n);

  o.gptq_block = a.integer("gptq-block");
  o.gptq_damp = a.number("gptq-damp");
  GP_CHECK(o.gptq_block > 0, "[quantize] --gptq-block must be positive");
  GP_CHECK(o.gptq_damp >= 0, "[quantize] --gptq-damp must be non-negative");
  ActivationStats stats;
  int64_t calib_tokens = 0;
  if (o.method != QuantMethod::Rtn) {
    const char* m = quant_method_name(o.method);
    GP_CHECK(a.has("calib"), "[quantize] --method ", m, " needs calibration text: give --calib FILE");
    GP_CHECK(ck.tokenizer, "[quantize] --method ", m, ": ", ck.source, " has no tokenizer to read --calib with");
    const std::string file = a.str("calib");
    calib_tokens = a.integer("calib-tokens");
    GP_CHECK(calib_tokens > 0, "[quantize] --calib-tokens must be positive");
    std::vector<int32_t> tokens = ck.tokenizer->encode(read_text_file(file), false);
    GP_CHECK(int64_t(tokens.size()) >= calib_tokens, "[quantize] calibration text ", file, " has ", tokens.size(),
             " tokens, but ", calib_tokens, " are needed (--calib-tokens); give a longer text or lower "
             "--calib-tokens");
    tokens.resize(size_t(calib_tokens));
    const auto t0 = std::chrono::steady_clock::now();
    stats = collect_activation_stats(ck, tokens, a.integer("ctx"), o.method == QuantMethod::Gptq, calib_tokens,
                                     !json);
    o.stats = &stats;
    if (!json)
      std::fprintf(stderr, "calibration: %lld tokens of %s in %.1f s\n", (long long)calib_tokens, file.c_str(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } else if (a.has("calib") && recipe != "auto" && !json) {
    std::fprintf(stderr, "note: --calib is not used by --method rtn\n");
  }

  const auto t0 = std::chrono::steady_clock::now();
  const Checkpoint q = quantize_checkpoint(ck, plan, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  save_quantized(out, q);

  const SizeReport before = size_report(ck), after = size_report(q);
  // --recipe auto: what the allocation predicted against what the quantized model achieves.
  Json allocation;
  std::optional<CalibrationScore> achieved;
  double score_s = 0;
  if (autop) {
    const AllocationReport& rp = autop->report;
    allocation = Json::Object{{"predicted_bpw", rp.bpw}, {"predicted_total_bytes", rp.total_bytes},
                              {autop->proxy ? "predicted_proxy" : "predicted_kl", rp.predicted}};
    if (autop->ref) {
      const auto t1 = std::chrono::steady_clock::now();
      achieved = autop->ref->score(q);
      score_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      allocation["kl"] = achieved->kl;
      allocation["dloss"] = achieved->dloss;
      if (std::isfinite(achieved->top1)) allocation["top1"] = achieved->top1;
      allocation["metric"] = autop->ref->metric();
      allocation["kl_tokens"] = achieved->tokens;
      allocation["kl_ctx"] = autop->ref->ctx();
      if (!autop->proxy) allocation["achieved_over_predicted_kl"] = achieved->kl / rp.predicted;
    }
    if (!autop->ref_note.empty()) allocation["kl_note"] = autop->ref_note;
  }
  // --target-latency: the step predicted for the mix against the step measured with it (on this
  // machine only; a catalogue device's figures are modeled).
  std::optional<Stats> measured, source_measured;
  if (latency) {
    const AllocationReport& rp = autop->report;
    allocation["latency_device"] = latency->device;
    allocation["latency_kind"] = figure_kind_name(latency->kind);
    allocation["predicted_latency_ms"] = rp.predicted_seconds * 1e3;
    allocation["budget_latency_ms"] = rp.budget_seconds * 1e3;
    allocation["source_latency_ms"] = latency->source_s * 1e3;
    if (latency->kind == FigureKind::Measured) {
      // The quantized and the source model side by side in one run: the ratio of their steps holds
      // when the machine's speed drifts between the allocation's timings and these.
      const Checkpoint* both[] = {&q, &ck};
      const std::vector<Stats> st = measure_decode_steps(both, lo);
      measured = st[0], source_measured = st[1];
      auto ms = [](const Stats& x) {
        return Json::Object{{"median", x.median * 1e3}, {"min", x.min * 1e3}, {"max", x.max * 1e3},
                            {"n", int64_t(x.samples.size())}};
      };
      allocation["measured_latency_ms"] = ms(*measured);
      allocation["measured_source_latency_ms"] = ms(*source_measured);
      allocation["measured_over_predicted_latency"] = measured->median / rp.predicted_seconds;
      allocation["predicted_speedup"] = latency->source_s / rp.predicted_seconds;
      allocation["measured_speedup"] = source_measured->median / measured->median;
    }
    for (const std::string& n : latency->notes) notes.push_back("latency: " + n);
  }
  Json tensors = Json::Object{};
  std::map<std::string, int64_t> counts;
  for (const std::string& name : quantizable_tensors(q)) {
    const Tensor& t = q.tensors.at(name);
    tensors[name] = dtype_name(t.dtype());
    ++counts[dtype_name(t.dtype())];
  }
  if (json) {
    Json::Array n;
    for (const std::string& s : notes) n.push_back(s);
    Json c = Json::Object{};
    for (const auto& [f, k] : counts) c[f] = Json(k);
    print_json(Json::Object{{"model", ck.source},
                            {"out", out},
                            {"recipe", recipe},
                            {"method", quant_method_name(o.method)},
                            {"calibration_tokens", calib_tokens},
                            {"tensors", std::move(tensors)},
                            {"format_counts", std::move(c)},
                            {"notes", Json(std::move(n))},
                            {"bpw", after.bpw},
                            {"source_bpw", before.bpw},
                            {"quantizable_bytes", after.quantizable_bytes},
                            {"total_bytes", after.total_bytes},
                            {"source_total_bytes", before.total_bytes},
                            {"compression_vs_bf16", after.compression_vs_bf16()},
                            {"allocation", std::move(allocation)},
                            {"latency", latency ? latency->to_json() : Json()},
                            {"seconds", seconds}});
    return 0;
  }
  for (const std::string& name : quantizable_tensors(q)) {
    const Tensor& src = ck.tensors.at(name);
    const Tensor& t = q.tensors.at(name);
    std::printf("%-40s %-12s %-5s -> %-12s %10.1f KB\n", name.c_str(), shape_text(t).c_str(), dtype_name(src.dtype()),
                dtype_name(t.dtype()), double(t.nbytes()) / 1e3);
  }
  for (const std::string& s : notes) std::printf("note: %s\n", s.c_str());
  std::string mix;
  for (const auto& [f, k] : counts) mix += cat(mix.empty() ? "" : ", ", k, " ", f);
  std::printf("recipe %s, method %s: %s (%.1f s)\n", recipe.c_str(), quant_method_name(o.method), mix.c_str(),
              seconds);
  std::printf("size: %.3f bits per weight over the quantizable tensors (%.3f before); total %.2f MB "
              "(%.2f MB before), %.2fx smaller than bf16\n",
              after.bpw, before.bpw, double(after.total_bytes) / 1e6, double(before.total_bytes) / 1e6,
              after.compression_vs_bf16());
  if (autop) {
    const AllocationReport& rp = autop->report;
    const std::string metric = !autop->ref || autop->ref->metric() == std::string("kl") ? "KL" : autop->ref->metric();
    std::printf("predicted: %.3f bpw, %.3f MB, %s %.5g\n", rp.bpw, double(rp.total_bytes) / 1e6,
                autop->proxy ? "proxy" : metric.c_str(), rp.predicted);
    std::printf("achieved:  %.3f bpw, %.3f MB, ", after.bpw, double(after.total_bytes) / 1e6);
    if (achieved) {
      std::printf("%s %.5g (dloss %+.5g", metric.c_str(), achieved->kl, achieved->dloss);
      if (std::isfinite(achieved->top1)) std::printf(", top-1 %.4f", achieved->top1);
      std::printf(") on %s, %.1f s", autop->ref->describe().c_str(), score_s);
      if (!autop->proxy) std::printf("; achieved / predicted %s %.2f", metric.c_str(), achieved->kl / rp.predicted);
    } else {
      std::printf("%s not measured", metric.c_str());
    }
    if (!autop->ref_note.empty()) std::printf(" (%s)", autop->ref_note.c_str());
    std::printf("\n");
  }
  if (latency) {
    const AllocationReport& rp = autop->report;
    std::printf("latency on %s (%s): predicted %.4g ms per decode step (budget %.4g ms; %.4g ms unquantized)",
                latency->device.c_str(), figure_kind_name(latency->kind), rp.predicted_seconds * 1e3,
                rp.budget_seconds * 1e3, latency->source_s * 1e3);
    if (measured)
      std::printf(", measured %.4g ms (%.4g-%.4g, median of %zu; measured / predicted %.3f); speedup over the source "
                  "model predicted %.3fx, measured %.3fx (%.4g ms unquantized, interleaved with the quantized model's "
                  "steps)",
                  measured->median * 1e3, measured->min * 1e3, measured->max * 1e3, measured->samples.size(),
                  measured->median / rp.predicted_seconds, latency->source_s / rp.predicted_seconds,
                  source_measured->median / measured->median, source_measured->median * 1e3);
    else
      std::printf("; not measured: %s is not this machine", latency->device.c_str());
    std::printf("\n");
  }
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace genperf::cli

// The hardware model (genperf/hw_model.h): per-op rooflines over the op layer's costs, calibrated
// on this machine's measured runs, predicting the planner's catalogue of accelerators.
#include "genperf/hw_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/ops_cost.h"
#include "genperf/runtime.h"

namespace genperf {

namespace {

// The kernel paths in the order of the study's hardware generations (as the report orders them).
int isa_rank(const std::string& isa) {
  static const char* const order[] = {"generic", "avx2", "avx2+avxvnni", "avx512"};
  for (int i = 0; i < 4; ++i)
    if (isa == order[i]) return i;
  return -1;
}

}  // namespace

const char* compute_type_name(ComputeType t) {
  return t == ComputeType::Bf16 ? "bf16" : t == ComputeType::F32 ? "f32" : "elementwise";
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Train: return "train";
  }
  return "?";
}

RooflineDevice roofline_device(const DeviceSpec& d) {
  RooflineDevice r;
  r.id = d.id, r.name = d.name, r.source = d.source, r.kind = FigureKind::Modeled;
  r.memory_gbs = d.memory_gbs.value;
  if (d.fp32) r.fp32_tflops = d.fp32->value;
  if (d.bf16) r.bf16_tflops = d.bf16->value;
  else if (d.fp16) {
    r.bf16_tflops = d.fp16->value;
    r.note = cat(d.id, " has no bf16: its fp16 tensor peak (", d.fp16->value, " TFLOPS) stands in for bf16");
  }
  if (!d.fp32)
    r.note += cat(r.note.empty() ? "" : "; ", d.id,
                  " publishes no fp32 peak: its elementwise ops are bound by memory alone, f32 matmuls not timed");
  return r;
}

namespace {

// Whether the words of a provenance's isa_flags ("avx2 fma ... avx512_bf16") include `flag`.
bool has_flag(const std::string& flags, const std::string& flag) {
  size_t at = 0;
  while ((at = flags.find(flag, at)) != std::string::npos) {
    const size_t end = at + flag.size();
    if ((at == 0 || flags[at - 1] == ' ') && (end == flags.size() || flags[end] == ' ')) return true;
    at = end;
  }
  return false;
}

// One ISA level of this machine from a bench infer record's machine block; nullopt when the file
// is not such a record, or its GEMM peak is of a type that bounds no f32 or bf16 op (int8).
std::optional<RooflineDevice> level_of_record(const std::filesystem::path& f) {
  Json j;
  try {
    j = Json::parse_file(f.string());
  } catch (const Error&) {
    return std::nullopt;
  }
  const Json* m = j.is_object() ? j.find("machine") : nullptr;
  const Json* prov = j.is_object() ? j.find("provenance") : nullptr;
  if (!m || !m->is_object() || !prov || !prov->is_object()) return std::nullopt;
  const Json* peak = m->find("gemm_peak_gflops");
  const Json* bw = m->find("bandwidth_gbs");
  const Json* gp = m->find("gemm_peak");
  const Json* type = gp && gp->is_object() ? gp->find("type") : nullptr;
  const Json* isa = prov->find("isa_path");
  const Json* flags = prov->find("isa_flags");
  if (!peak || !peak->is_number() || !(peak->as_number() > 0) || !bw || !bw->is_number() || !(bw->as_number() > 0) ||
      !isa || !isa->is_string())
    return std::nullopt;
  // Records before the type was written measured the f32 peak.
  const std::string t = type && type->is_string() ? type->as_string() : "f32";
  if (t != "f32" && t != "bf16") return std::nullopt;
  RooflineDevice d;
  d.id = "cpu", d.name = "this machine", d.kind = FigureKind::Measured;
  d.isa_path = isa->as_string();
  (t == "bf16" ? d.bf16_tflops : d.fp32_tflops) = peak->as_number() / 1e3;
  d.memory_gbs = bw->as_number();
  // The bf16 matmul runs only at the AVX-512 level of a CPU with AVX512-BF16 (gemm_onednn.cpp).
  const bool bf16_cpu = flags && flags->is_string() && has_flag(flags->as_string(), "avx512_bf16");
  d.bf16_as_f32 = !(t == "bf16" || (d.isa_path == "avx512" && bf16_cpu));
  d.source = cat("the machine block of ", f.string());
  return d;
}

}  // namespace

std::vector<RooflineDevice> isa_level_rooflines(const std::string& records_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<RooflineDevice> levels;
  if (records_dir.empty() || !fs::is_directory(records_dir, ec)) return levels;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(records_dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::optional<RooflineDevice> d = level_of_record(f);
    if (!d) continue;
    const bool seen = std::any_of(levels.begin(), levels.end(),
                                  [&](const RooflineDevice& l) { return l.isa_path == d->isa_path; });
    if (!seen) levels.push_back(std::move(*d));
  }
  std::stable_sort(levels.begin(), levels.end(), [](const RooflineDevice& a, const RooflineDevice& b) {
    return isa_rank(a.isa_path) < isa_rank(b.isa_path);
  });
  return levels;
}

RooflineDevice this_machine_roofline(const CpuFigures& g) {
  RooflineDevice r;
  r.id = "cpu", r.name = "this machine", r.kind = FigureKind::Measured;
  r.fp32_tflops = g.fp32_gflops / 1e3, r.bf16_tflops = g.bf16_gflops / 1e3, r.memory_gbs = g.memory_gbs;
  r.isa_path = isa_path();
  std::vector<std::string> from;
  if (g.fp32_gflops > 0 || g.bf16_gflops > 0 || g.memory_gbs > 0) from.push_back("given on the command line");
  // The record of the best ISA level with a machine block (bench infer --out writes one).
  const std::vector<RooflineDevice> levels = isa_level_rooflines(g.records_dir);
  if (!levels.empty()) {
    const RooflineDevice& best = levels.back();
    from.push_back(best.source);
    r.isa_path = best.isa_path;
    r.bf16_as_f32 = best.bf16_as_f32 && !(g.bf16_gflops > 0);  // a bf16 peak given says it runs
    if (!(r.fp32_tflops > 0)) r.fp32_tflops = best.fp32_tflops;
    if (!(r.bf16_tflops > 0)) r.bf16_tflops = best.bf16_tflops;
    if (!(r.memory_gbs > 0)) r.memory_gbs = best.memory_gbs;
  }
  if (g.measure_missing) {
    const Precision missing[] = {Precision::F32, Precision::Bf16};
    for (const Precision p : missing) {
      if (p == Precision::Bf16 && r.bf16_as_f32) continue;  // its bf16 ops take the f32 peak
      double& slot = p == Precision::Bf16 ? r.bf16_tflops : r.fp32_tflops;
      if (slot > 0 && r.memory_gbs > 0) continue;
      const MachineFigures m = measure_this_machine(p);
      if (!(slot > 0)) slot = m.gemm_peak_gflops / 1e3;
      if (!(r.memory_gbs > 0)) r.memory_gbs = m.memory_gbs;
      from.push_back(cat(precision_name(p), " GEMM peak measured now (oneDNN 2048^3, at the ", isa_path(), " level)"));
    }
  }
  GP_CHECK(r.memory_gbs > 0 && (r.fp32_tflops > 0 || r.bf16_tflops > 0),
           "[hw model] this machine's peaks and bandwidth are unknown: give them or let them be measured");
  r.source.clear();
  for (const std::string& f : from) r.source += cat(r.source.empty() ? "" : "; ", f);
  return r;
}

namespace {
double total(const std::vector<OpWork>& ops, double OpWork::*field) {
  double s = 0;
  for (const OpWork& o : ops) s += o.*field;
  return s;
}
}  // namespace

double WorkloadCost::flops() const { return total(ops, &OpWork::flops); }
double WorkloadCost::bytes() const { return total(ops, &OpWork::bytes); }

namespace {

void add(WorkloadCost& w, std::string op, const ops::OpCost& c, ComputeType t) {
  w.ops.push_back({std::move(op), c.flops, c.bytes, t});
}

}  // namespace

WorkloadCost inference_cost(const LlamaConfig& c, Phase phase, int64_t B, int64_t T, int64_t P, DType weight,
                            DType kv, ComputeType compute) {
  GP_CHECK(B > 0 && T > 0 && P >= 0, "[hw model] inference needs B, T > 0 and P >= 0, got B ", B, ", T ", T, ", P ", P);
  WorkloadCost w;
  w.phase = phase;
  const ComputeType f32 = ComputeType::Elementwise;
  const int64_t N = B * T, d = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads,
                D = c.head_dim, FF = c.intermediate_size;
  add(w, "embedding", ops::embedding_cost(N, d, weight), f32);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    add(w, "rms_norm attn", ops::rms_norm_cost(N, d), f32);
    add(w, "linear q", ops::linear_cost(N, d, c.q_dim(), weight, c.attention_bias), compute);
    add(w, "linear k", ops::linear_cost(N, d, c.kv_dim(), weight, c.attention_bias), compute);
    add(w, "linear v", ops::linear_cost(N, d, c.kv_dim(), weight, c.attention_bias), compute);
    add(w, "rope q", ops::rope_cost(N, H, D), f32);
    add(w, "rope k", ops::rope_cost(N, Hkv, D), f32);
    add(w, "store_rows k", ops::store_rows_cost(N, c.kv_dim(), kv), f32);
    add(w, "store_rows v", ops::store_rows_cost(N, c.kv_dim(), kv), f32);
    ops::OpCost a = ops::attention_cost(T, H, Hkv, D, P, kv);
    a.flops *= double(B), a.bytes *= double(B);  // each sequence its own cache
    add(w, "attention", a, compute);
    add(w, "linear o", ops::linear_cost(N, c.q_dim(), d, weight), compute);
    add(w, "add attn", ops::add_cost(N, d), f32);
    add(w, "rms_norm ffn", ops::rms_norm_cost(N, d), f32);
    add(w, "linear gate", ops::linear_cost(N, d, FF, weight), compute);
    add(w, "linear up", ops::linear_cost(N, d, FF, weight), compute);
    add(w, "silu_mul", ops::silu_mul_cost(N, FF), f32);
    add(w, "linear down", ops::linear_cost(N, FF, d, weight), compute);
    add(w, "add ffn", ops::add_cost(N, d), f32);
  }
  add(w, "rms_norm final", ops::rms_norm_cost(B, d), f32);  // the last token of each sequence
  add(w, "linear head", ops::linear_cost(B, d, c.vocab_size, weight), compute);
  return w;
}

WorkloadCost train_step_cost(const LlamaConfig& c, int64_t B, int64_t T, bool flash, Precision precision) {
  GP_CHECK(B > 0 && T > 0, "[hw model] a training step needs B, T > 0, got B ", B, ", T ", T);
  WorkloadCost w;
  w.phase = Phase::Train;
  const ComputeType f32 = ComputeType::Elementwise;
  const ComputeType mm = precision == Precision::Bf16 ? ComputeType::Bf16 : ComputeType::F32;
  const int64_t N = B * T, d = c.hidden_size, FF = c.intermediate_size;
  ops::AttnShape s;
  s.B = B, s.T = T, s.NH = c.num_attention_heads, s.NKV = c.num_key_value_heads, s.HS = c.head_dim;
  auto both = [&](const std::string& op, const ops::OpCost& f, const ops::OpCost& b, ComputeType t) {
    add(w, op + " forward", f, t);
    add(w, op + " backward", b, t);
  };
  both("embedding", ops::embedding_forward_cost(N, d), ops::embedding_backward_cost(N, d), f32);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    both("rmsnorm attn", ops::rmsnorm_forward_cost(N, d), ops::rmsnorm_backward_cost(N, d), f32);
    both("matmul qkv", ops::matmul_forward_cost(N, d, s.qkv_cols(), c.attention_bias),
         ops::matmul_backward_cost(N, d, s.qkv_cols(), c.attention_bias), mm);
    const ops::OpCost r = ops::rope_train_cost(N, s.NH + s.NKV, s.HS);
    both("rope", r, r, f32);
    both("attention", ops::attention_forward_cost(s, flash), ops::attention_backward_cost(s, flash), mm);
    both("matmul o", ops::matmul_forward_cost(N, c.q_dim(), d, false), ops::matmul_backward_cost(N, c.q_dim(), d, false), mm);
    both("residual attn", ops::residual_forward_cost(N * d), ops::residual_backward_cost(N * d), f32);
    both("rmsnorm ffn", ops::rmsnorm_forward_cost(N, d), ops::rmsnorm_backward_cost(N, d), f32);
    both("matmul gate_up", ops::matmul_forward_cost(N, d, 2 * FF, false), ops::matmul_backward_cost(N, d, 2 * FF, false), mm);
    both("swiglu", ops::swiglu_forward_cost(N, FF), ops::swiglu_backward_cost(N, FF), f32);
    both("matmul down", ops::matmul_forward_cost(N, FF, d, false), ops::matmul_backward_cost(N, FF, d, false), mm);
    both("residual ffn", ops::residual_forward_cost(N * d), ops::residual_backward_cost(N * d), f32);
  }
  both("rmsnorm final", ops::rmsnorm_forward_cost(N, d), ops::rmsnorm_backward_cost(N, d), f32);
  both("matmul head", ops::matmul_forward_cost(N, d, c.vocab_size, false),
       ops::matmul_backward_cost(N, d, c.vocab_size, false), mm);
  both("crossentropy", ops::crossentropy_forward_cost(N, c.vocab_size), ops::crossentropy_backward_cost(N, c.vocab_size), f32);
  add(w, "adamw", ops::adamw_cost(c.num_parameters()), f32);
  return w;
}

bool can_time(const WorkloadCost& w, const RooflineDevice& d) {
  if (!(d.memory_gbs > 0)) return false;
  for (const OpWork& o : w.ops)
    if (o.flops > 0 && !d.has_peak(o.compute)) return false;
  return true;
}

double roofline_seconds(const WorkloadCost& w, const RooflineDevice& d, double efficiency) {
  GP_CHECK(efficiency > 0, "[hw model] the efficiency must be positive, got ", efficiency);
  GP_CHECK(d.memory_gbs > 0, "[hw model] ", d.id, " has no memory bandwidth");
  double t = 0;
  for (const OpWork& o : w.ops) {
    const double peak = d.peak_tflops(o.compute) * 1e12;
    GP_CHECK(o.flops == 0 || d.has_peak(o.compute), "[hw model] ", d.id, " publishes no ", compute_type_name(o.compute),
             " peak (op ", o.op, ")");
    const double compute_s = o.flops > 0 && peak > 0 ? o.flops / (peak * efficiency) : 0.0;
    const double memory_s = o.bytes / (d.memory_gbs * 1e9 * efficiency);
    t += std::max(compute_s, memory_s);
  }
  return t;
}

namespace {

const Json* param(const Json& p, const char* key) { return p.find(key); }

int64_t param_int(const Json& p, const char* key, int64_t otherwise) {
  const Json* v = param(p, key);
  return v && v->is_number() ? int64_t(v->as_number()) : otherwise;
}

std::string param_str(const Json& p, const char* key) {
  const Json* v = param(p, key);
  return v && v->is_string() ? v->as_string() : "";
}

// "bf16", "q8_0", or "mixed: 39 q4_k, 5 q6_k" (the most common type first: it stands for all).
DType weight_dtype(const std::string& s) {
  std::string t = s;
  if (t.rfind("mixed: ", 0) == 0) {
    t = t.substr(7);
    const size_t sp = t.find(' ');
    t = t.substr(sp + 1, t.find(',') == std::string::npos ? std::string::npos : t.find(',') - sp - 1);
  }
  return parse_dtype(t);
}

// The config a workload's model names; nullopt (and a note) when it cannot be read here.
std::optional<LlamaConfig> model_config(const std::string& model, std::map<std::string, std::optional<LlamaConfig>>& cache,
                                        std::vector<std::string>& notes) {
  if (const auto it = cache.find(model); it != cache.end()) return it->second;
  namespace fs = std::filesystem;
  std::optional<LlamaConfig> c;
  try {
    if (model.rfind("random:", 0) == 0) c = preset_config(model.substr(7));
    else if (fs::is_directory(model) && fs::exists(fs::path(model) / "config.json"))
      c = read_hf_config((fs::path(model) / "config.json").string());
    else if (fs::is_regular_file(model)) c = load_checkpoint(model, false).config;
    else notes.push_back(cat("model ", model, " is not here: its workloads are not modeled"));
  } catch (const Error& e) {
    notes.push_back(cat("model ", model, ": ", e.what(), ": its workloads are not modeled"));
    c.reset();
  }
  cache.emplace(model, c);
  return c;
}

// The model a figure's workload names: its params' model, or where that is a checkpoint built in
// code ("random weights (seed 1)": bench infer of random:<preset>), the run command's --model.
std::string model_of(const MetricRow& r) {
  const std::string m = param_str(r.workload.params, "model");
  if (m.rfind("random weights", 0) != 0) return m;
  const std::string& c = r.run.command;
  const size_t at = c.find("--model ");
  if (at == std::string::npos) return m;
  const size_t from = at + 8;
  return c.substr(from, c.find(' ', from) == std::string::npos ? std::string::npos : c.find(' ', from) - from);
}

// The cost of a measured figure, or nullopt when the model does not cover it.
std::optional<ModeledFigure> cost_of(const MetricRow& r, std::map<std::string, std::optional<LlamaConfig>>& configs,
                                     std::vector<std::string>& notes) {
  if (r.kind != MetricKind::Measured || !(r.median > 0)) return std::nullopt;
  const Json& p = r.workload.params;
  ModeledFigure f;
  f.row = &r;
  if (r.workload.name == "bench infer") {
    const bool decode = r.name == "decode.seconds_per_token";
    const std::string pre = "prefill[tokens=", post = "].seconds";
    const bool prefill = r.name.rfind(pre, 0) == 0 && r.name.size() > pre.size() + post.size() &&
                         r.name.compare(r.name.size() - post.size(), post.size(), post) == 0;
    if (!decode && !prefill) return std::nullopt;
    const std::optional<LlamaConfig> c = model_config(model_of(r), configs, notes);
    if (!c) return std::nullopt;
    DType w, kv;
    try {
      w = weight_dtype(param_str(p, "weight_types"));
      kv = parse_dtype(param_str(p, "kv_type"));
    } catch (const Error&) {
      notes.push_back(cat("bench infer of ", param_str(p, "model"), ": weight types '", param_str(p, "weight_types"),
                          "' or KV type '", param_str(p, "kv_type"), "' not known: not modeled"));
      return std::nullopt;
    }
    if (decode) {
      // Decode tokens_per_rep tokens after the prompt: the cache's mean length over them.
      const int64_t P = param_int(p, "decode.prompt_tokens", 0) + param_int(p, "decode.tokens_per_rep", 0) / 2;
      f.phase = Phase::Decode;
      f.cost = inference_cost(*c, Phase::Decode, 1, 1, P, w, kv, ComputeType::Bf16);
    } else {
      const int64_t T = std::stoll(r.name.substr(pre.size()));
      f.phase = Phase::Prefill;
      f.cost = inference_cost(*c, Phase::Prefill, 1, T, 0, w, kv, ComputeType::Bf16);
    }
    return f;
  }
  if (r.workload.name == "bench train" && r.name == "step_seconds") {
    const Json* lora = param(p, "lora");
    const Json* ckpt = param(p, "checkpoint_layers");
    if ((lora && !lora->is_null()) || (ckpt && ckpt->is_bool() && ckpt->as_bool())) {
      notes.push_back("bench train with LoRA or layer checkpointing: not modeled yet");
      return std::nullopt;
    }
    const std::optional<LlamaConfig> c = model_config(model_of(r), configs, notes);
    if (!c) return std::nullopt;
    f.phase = Phase::Train;
    f.ranks = int(param_int(p, "ranks", 1));
    // The ranks of this machine share its cores: N ranks do N x the batch's work on one device
    // (their communication is not modeled).
    f.cost = train_step_cost(*c, param_int(p, "batch", 1) * f.ranks, param_int(p, "seq", 1),
                             param_str(p, "attention") == "flash", parse_precision(param_str(p, "precision")));
    return f;
  }
  return std::nullopt;
}

// This machine's roofline at an ISA level: the calibration level's (o.cpu), or another level's own
// (o.cpu_levels); where that level's peaks were not measured, the calibration level's, and a note
// says so: its figures' error then includes the speed of their ISA path.
const RooflineDevice& roofline_at(const std::string& isa, const HwModelOptions& o, std::vector<std::string>& notes) {
  if (isa == o.cpu.isa_path) return o.cpu;
  for (const RooflineDevice& d : o.cpu_levels)
    if (d.isa_path == isa) return d;
  const std::string calib = o.cpu.isa_path.empty() ? "calibration" : o.cpu.isa_path;
  const std::string note =
      cat("the ", isa, " figures are costed with the ", calib, " level's peaks: no bench infer record of the ", isa,
          " level has a machine block with an f32 or bf16 GEMM peak (a store of before per-level peaks, or runs with "
          "--no-peaks), so their error includes the speed of the ISA path itself");
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);  // once per level
  return o.cpu;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

HwModelResult run_hw_model(const std::vector<MetricRow>& rows, const HwModelOptions& o, const std::string& source) {
  GP_CHECK(o.cpu.memory_gbs > 0 && (o.cpu.bf16_tflops > 0 || o.cpu.fp32_tflops > 0),
           "[hw model] this machine's peak and bandwidth must be positive");
  HwModelResult r;
  std::map<std::string, std::optional<LlamaConfig>> configs;
  // The machine: that of the first measured figure the model covers; others are left out.
  std::string machine;
  for (const MetricRow& row : rows) {
    std::optional<ModeledFigure> f = cost_of(row, configs, r.notes);
    if (!f) continue;
    if (machine.empty()) machine = row.machine.fingerprint;
    if (row.machine.fingerprint != machine) {
      r.notes.push_back(cat("figures of machine ", row.machine.hostname, " (", row.machine.cpu,
                            ") left out: the model knows only this machine's peaks"));
      continue;
    }
    f->roofline = roofline_at(row.device.isa_path, o, r.notes);
    if (!can_time(f->cost, f->roofline)) {
      r.notes.push_back(cat(row.workload.name, " ", row.name, " at ", row.device.isa_path,
                            ": this machine has no measured peak of its type at that level"));
      continue;
    }
    r.figures.push_back(std::move(*f));
  }
  GP_CHECK(!r.figures.empty(), "[hw model] ", source,
           ": no measured bench infer (decode, prefill) or bench train (step_seconds) figure to calibrate on; "
           "run `genperf study` first");

  // Calibration: per phase, the figure of the best ISA level, the first in store order among equals.
  std::map<Phase, size_t> calib;
  for (size_t i = 0; i < r.figures.size(); ++i) {
    const ModeledFigure& f = r.figures[i];
    const auto it = calib.find(f.phase);
    if (it == calib.end() || isa_rank(f.row->device.isa_path) > isa_rank(r.figures[it->second].row->device.isa_path))
      calib[f.phase] = i;
  }
  std::map<Phase, double> eff;
  for (const auto& [phase, i] : calib) {
    const ModeledFigure& f = r.figures[i];
    PhaseCalibration c;
    c.phase = phase, c.row = f.row;
    c.roofline_s = roofline_seconds(f.cost, f.roofline);
    c.measured_s = f.row->median;
    c.efficiency = c.roofline_s / c.measured_s;
    eff[phase] = c.efficiency;
    r.calibration.push_back(c);
    if (const double spread = (f.row->max - f.row->min) / f.row->median; spread > 0.10)
      r.notes.push_back(cat("the ", phase_name(phase), " calibration figure spread by ", std::lround(100 * spread),
                            "% (min ", f.row->min, " s, max ", f.row->max, " s): the machine was noisy, and every ",
                            phase_name(phase), " prediction carries it"));
  }

  // Error on measured hardware: every figure but the calibration ones.
  std::vector<double> abs_errors;
  for (size_t i = 0; i < r.figures.size(); ++i) {
    const ModeledFigure& f = r.figures[i];
    if (calib.at(f.phase) == i) continue;
    ErrorRow e;
    e.row = f.row, e.phase = f.phase, e.peaks_of = f.roofline.isa_path, e.measured_s = f.row->median;
    e.predicted_s = roofline_seconds(f.cost, f.roofline, eff.at(f.phase));
    abs_errors.push_back(std::abs(e.error()));
    r.errors.push_back(e);
  }
  r.median_abs_error = median_of(abs_errors);
  r.worst_abs_error = abs_errors.empty() ? 0 : *std::max_element(abs_errors.begin(), abs_errors.end());

  // Predictions: each workload once (its figure at the best ISA level), single-rank, on each device.
  std::vector<RooflineDevice> devices;
  for (const std::string& id : o.devices) {
    devices.push_back(roofline_device(catalog_device(id)));
    if (!devices.back().note.empty()) r.notes.push_back(devices.back().note);
  }
  std::map<std::string, size_t> seen;  // workload, params and metric -> the figure predicted
  for (size_t i = 0; i < r.figures.size(); ++i) {
    const ModeledFigure& f = r.figures[i];
    if (f.ranks != 1) continue;
    const std::string key = cat(f.row->workload.name, "|", canonical_json(f.row->workload.params), "|", f.row->name);
    const auto [it, fresh] = seen.emplace(key, i);
    if (!fresh && isa_rank(f.row->device.isa_path) > isa_rank(r.figures[it->second].row->device.isa_path)) it->second = i;
  }
  std::vector<size_t> chosen;
  for (const auto& [key, i] : seen) chosen.push_back(i);
  std::sort(chosen.begin(), chosen.end());
  for (const RooflineDevice& d : devices)
    for (const size_t i : chosen) {
      const ModeledFigure& f = r.figures[i];
      if (!can_time(f.cost, d)) {
        r.notes.push_back(cat(d.id, " publishes no peak for ", f.row->workload.name, " ",
                              param_str(f.row->workload.params, "precision"), " (", f.row->name, "): not predicted"));
        continue;
      }
      r.predictions.push_back({f.row, f.phase, d, roofline_seconds(f.cost, d, eff.at(f.phase))});
    }
  std::sort(r.notes.begin(), r.notes.end());
  r.notes.erase(std::unique(r.notes.begin(), r.notes.end()), r.notes.end());
  return r;
}

std::string store_predictions(ResultsStore& s, const HwModelResult& r, const std::string& command) {
  GP_CHECK(!r.calibration.empty(), "[hw model] nothing calibrated: no predictions to store");
  ResultsStore::Transaction t(s);
  const MetricRow& at = *r.calibration.front().row;
  RunRecord run;
  run.suite = "model";
  run.command = command;
  run.commit = at.run.commit;
  run.build_type = at.run.build_type;
  run.threads = at.run.threads;
  run.started = run.finished = at.run.finished.empty() ? at.run.started : at.run.finished;
  const int64_t id = s.begin_run(at.machine, run);
  for (const Prediction& p : r.predictions)
    s.add_modeled_metric(id, p.row->workload, DeviceRecord{"model", p.device.name, p.device.id}, p.row->name,
                         p.row->unit, p.seconds);
  t.commit();
  return run.uuid;
}

// ---------------------------------------------------------------------------------------------
// Published cross-hardware ratios.

namespace {

LlamaConfig llama2_70b() {
  LlamaConfig c;
  c.vocab_size = 32000, c.hidden_size = 8192, c.intermediate_size = 28672, c.num_hidden_layers = 80;
  c.num_attention_heads = 64, c.num_key_value_heads = 8, c.head_dim = 128, c.max_position_embeddings = 4096;
  return c;
}

// GPT-3 175B's shape (d 12288, 96 layers and heads, 2048 tokens) as a Llama-style decoder: a
// SwiGLU MLP of hidden size 32768 has the parameters and FLOPs of GPT-3's 4d GELU MLP.
LlamaConfig gpt3_175b() {
  LlamaConfig c;
  c.vocab_size = 50257, c.hidden_size = 12288, c.intermediate_size = 32768, c.num_hidden_layers = 96;
  c.num_attention_heads = 96, c.num_key_value_heads = 96, c.head_dim = 128, c.max_position_embeddings = 2048;
  return c;
}

}  // namespace

const std::vector<PublishedRatio>& published_ratios() {
  static const std::vector<PublishedRatio> table = [] {
    std::vector<PublishedRatio> t;
    PublishedRatio a;
    a.what = "MLPerf Inference v4.1 Llama 2 70B offline, 8x H200 / 8x H100 (samples/s)";
    a.numerator = "h200", a.denominator = "h100";
    a.published = 118.5 / 84.2;
    a.source = "https://alpha-one-index.github.io/ai-infra-index/specs/inference-benchmarks.html (a third-party "
               "summary of MLCommons' v4.1 results: H200 118.5, H100 84.2 samples/s; FP8; not checked against "
               "MLCommons' own table)";
    a.modeled_as = "decode of Llama 2 70B, batch 64 at a context of 1024, bf16 weights and KV, one device";
    a.phase = Phase::Decode, a.config = llama2_70b(), a.batch = 64, a.tokens = 1, a.position = 1024;
    t.push_back(a);
    PublishedRatio b = a;
    b.what = "TensorRT-LLM H200 launch: Llama 70B, 2048 in / 128 out, max throughput on 1 GPU, H200 / H100";
    b.published = 1.9;
    b.source = "https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/release/0.5.0/docs/source/blogs/H200launch.md "
               "(NVIDIA, TensorRT-LLM v0.5.0, FP8: \"1.9x more performant\"; not an MLPerf result)";
    b.modeled_as = "decode of Llama 2 70B, batch 64 at a context of 2048, bf16 weights and KV, one device";
    b.position = 2048;
    t.push_back(b);
    PublishedRatio c;
    c.what = "MLPerf Training v3.0 GPT-3 175B, per chip: H100 / Gaudi 2";
    c.numerator = "h100", c.denominator = "gaudi2";
    c.published = 3.6;
    c.source = "https://spectrum.ieee.org/large-language-models-training-benchmark (IEEE Spectrum on MLPerf "
               "Training v3.0, June 2023: \"On a per-chip basis, H100 systems were 3.6-times as fast\"; Gaudi 2 "
               "ran without FP8 mixed precision)";
    c.modeled_as = "one training step of a GPT-3 175B-shaped decoder, 1 x 2048 tokens, bf16, flash attention, per chip";
    c.phase = Phase::Train, c.config = gpt3_175b(), c.batch = 1, c.tokens = 2048, c.position = 0;
    t.push_back(c);
    return t;
  }();
  return table;
}

double predicted_ratio(const PublishedRatio& p) {
  const WorkloadCost w = p.phase == Phase::Train
                             ? train_step_cost(p.config, p.batch, p.tokens, true, p.precision)
                             : inference_cost(p.config, p.phase, p.batch, p.tokens, p.position, DType::BF16,
                                              DType::BF16, ComputeType::Bf16);
  const RooflineDevice num = roofline_device(catalog_device(p.numerator));
  const RooflineDevice den = roofline_device(catalog_device(p.denominator));
  return roofline_seconds(w, den) / roofline_seconds(w, num);
}

}  // namespace genperf

// Decode latency per tensor and format (genperf/decode_latency.h): measured on this machine,
// modeled on a catalogue device.
#include "genperf/decode_latency.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "bench/peaks.h"
#include "genperf/error.h"
#include "genperf/hw_model.h"
#include "genperf/llama.h"
#include "genperf/model_family.h"
#include "genperf/ops.h"
#include "genperf/ops_cost.h"
#include "genperf/progress.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"

namespace genperf {

namespace {

// A quantizable tensor as decode uses it: an N x K matrix multiplied by one row, or rows looked
// up (the untied embedding), whose format costs nothing measurable.
struct Product {
  std::string name;
  int64_t N = 0, K = 0;
  bool lookup = false;
  DType source = DType::F32;
};

std::vector<Product> products(const Checkpoint& ck) {
  const ModelFamily& fam = family_of(ck);
  GP_CHECK(std::string(fam.name()) == "llama", "[latency] ", ck.source, " is a ", fam.name(),
           " model; a decode latency budget applies to models that decode tokens (the Llama family)");
  std::vector<Product> out;
  for (const TensorRole& r : fam.quantizable(ck)) {
    const Tensor& t = ck.tensors.at(r.name);
    out.push_back({r.name, t.size(0), t.size(1), r.lookup, t.dtype()});
  }
  return out;
}

// The formats a tensor is timed in: its source type and each candidate that fits its rows.
std::vector<DType> formats_of(const Product& p, std::span<const DType> formats) {
  std::vector<DType> v{p.source};
  for (DType f : formats)
    if (f != p.source && format_fits(f, p.K)) v.push_back(f);
  return v;
}

// Bytes of the whole model with every quantizable tensor in f where it fits (else its source type).
double model_bytes_in(const Checkpoint& ck, const std::vector<Product>& ps, DType f) {
  double b = 0;
  for (const auto& [name, t] : ck.tensors) b += double(t.nbytes());
  for (const Product& p : ps)
    b += double(bytes_for(format_fits(f, p.K) ? f : p.source, p.N * p.K)) - double(bytes_for(p.source, p.N * p.K));
  return b;
}

Tensor random_matrix(int64_t N, int64_t K, uint64_t seed) {
  Tensor w = Tensor::zeros({N, K});
  Rng rng(seed);
  float* d = w.data<float>();
  for (int64_t i = 0; i < N * K; ++i) d[i] = float(0.02 * rng.normal());
  return w;
}

// Seconds of one product of an N x K matrix in f by one row, the matrix one of copies holding
// pool_bytes in all, timed as passes over every copy (median of o.reps passes after a warm-up).
double time_product(int64_t N, int64_t K, DType f, double pool_bytes, const DecodeLatencyOptions& o) {
  const Tensor w32 = random_matrix(N, K, o.seed + uint64_t(N) * 7919u + uint64_t(K));
  const Tensor w = traits(f).is_float ? w32.to(f) : quantize_matrix(w32, f, QuantizeOptions{}, "latency");
  const int64_t copies = std::clamp<int64_t>(int64_t(std::ceil(pool_bytes / double(w.nbytes()))), 1, 512);
  std::vector<Tensor> pool{w};
  for (int64_t c = 1; c < copies; ++c) pool.push_back(w.clone());
  const Tensor x = random_matrix(1, K, o.seed);
  Tensor y = Tensor::zeros({1, N});
  const Stats st = measure(
      [&] {
        for (const Tensor& m : pool) ops::linear(x, m, nullptr, y);
      },
      1, std::max(o.reps, 1), 0.02);
  return st.median / double(copies);
}

ComputeType compute_of(DType w, const RooflineDevice& d) {
  return w == DType::F32 && d.has_peak(ComputeType::F32) && d.fp32_tflops > 0 ? ComputeType::F32 : ComputeType::Bf16;
}

}  // namespace

std::vector<Stats> measure_decode_steps(std::span<const Checkpoint* const> cks, const DecodeLatencyOptions& o) {
  std::vector<std::unique_ptr<LlamaModel>> models;
  std::vector<std::unique_ptr<DecodeTimer>> timers;
  for (const Checkpoint* ck : cks) {
    models.push_back(std::make_unique<LlamaModel>(share_weights(*ck)));
    timers.push_back(std::make_unique<DecodeTimer>(*models.back(), o.context, o.tokens, o.seed));
    timers.back()->once();  // warm-up
  }
  std::vector<std::vector<double>> t(cks.size());
  for (int rep = 0; rep < std::max(o.reps, 1); ++rep)
    for (size_t i = 0; i < timers.size(); ++i) t[i].push_back(timers[i]->once().per_token_s);
  std::vector<Stats> out;
  for (auto& v : t) out.push_back(Stats::of(std::move(v)));
  return out;
}

double DecodeLatency::predict(const Checkpoint& ck, const QuantPlan& plan) const {
  double t = table.fixed;
  for (const Product& p : products(ck)) {
    const auto it = plan.find(p.name);
    t += table.of(p.name, it == plan.end() ? p.source : it->second);
  }
  return t;
}

Json DecodeLatency::to_json() const {
  Json tensors = Json::Object{};
  for (const auto& [name, fs] : table.seconds) {
    Json f = Json::Object{};
    for (const auto& [format, s] : fs) f[dtype_name(format)] = s;
    tensors[name] = std::move(f);
  }
  Json::Array n;
  for (const std::string& s : notes) n.push_back(s);
  Json j = Json::Object{{"device", device},
                        {"device_name", device_name},
                        {"kind", figure_kind_name(kind)},
                        {"threads", int64_t(threads)},
                        {"context", context},
                        {"source_measured_here_s", source.to_json()},
                        {"source_s", source_s},
                        {"fixed_s", table.fixed},
                        {"tensor_s", std::move(tensors)},
                        {"notes", Json(std::move(n))}};
  if (efficiency > 0) j["efficiency"] = efficiency;
  if (!second.samples.empty()) {
    j["second_format"] = dtype_name(second_format);
    j["second_measured_here_s"] = second.to_json();
  }
  j["scale"] = scale;
  j["scale_fitted"] = fitted;
  return j;
}

DecodeLatency decode_latency(const Checkpoint& ck, std::span<const DType> formats, const DecodeLatencyOptions& o) {
  const std::vector<Product> ps = products(ck);
  GP_CHECK(o.context > 0 && o.tokens > 0, "[latency] the context and tokens per repetition must be positive");
  DecodeLatency r;
  r.threads = num_threads();
  r.context = o.context;
  if (o.device == "cpu") {
    // Each distinct (shape, format) once; the pool of copies as large as the model in that format.
    size_t llc = bench::last_level_cache_bytes();
    if (llc == 0) llc = size_t(32) << 20;
    const double cap = 4.0 * double(llc);
    std::map<std::tuple<int64_t, int64_t, DType>, double> timed;
    int64_t jobs = 0;
    for (const Product& p : ps)
      if (!p.lookup)
        for (DType f : formats_of(p, formats)) jobs += timed.emplace(std::tuple{p.N, p.K, f}, -1.0).second;
    Progress bar("decode latency", jobs);
    int64_t done = 0;
    for (auto& [key, s] : timed) {
      const auto [N, K, f] = key;
      s = time_product(N, K, f, std::min(cap, model_bytes_in(ck, ps, f)), o);
      if (o.progress) bar.update(++done);
    }
    auto alone = [&](const Product& p, DType f) { return p.lookup ? 0.0 : timed.at({p.N, p.K, f}); };
    // The products' sum with every tensor in f where it fits (else its source type).
    auto sum_in = [&](DType f) {
      double t = 0;
      for (const Product& p : ps) t += alone(p, f != p.source && format_fits(f, p.K) ? f : p.source);
      return t;
    };
    // Two measured steps calibrate t(plan) = fixed + scale * sum(products timed alone): the source
    // model and the model uniformly in the candidate format whose sum differs most from the
    // source's, interleaved. scale carries what the products gain or lose inside a step (one
    // parallel region for q, k, v and for gate, up; the other products' weights streaming
    // meanwhile), fixed the rest (attention, norms, rope).
    const DType src = ps.empty() ? DType::F32 : ps.front().source;
    const double sum_src = sum_in(src);
    DType second = src;
    for (DType f : formats)
      if (std::abs(sum_in(f) - sum_src) > std::abs(sum_in(second) - sum_src)) second = f;
    std::optional<Checkpoint> uniform;
    if (std::abs(sum_in(second) - sum_src) >= 0.05 * sum_src) {
      QuantPlan plan;
      for (const Product& p : ps)
        if (format_fits(second, p.K)) plan[p.name] = second;
      uniform = quantize_checkpoint(ck, plan, QuantizeOptions{});
    }
    std::vector<const Checkpoint*> models{&ck};
    if (uniform) models.push_back(&*uniform);
    const std::vector<Stats> st = measure_decode_steps(models, o);
    r.source = st[0];
    r.source_s = r.source.median;
    double scale = 1;
    if (uniform) {
      r.second_format = second;
      r.second = st[1];
      const double fit = (r.source_s - r.second.median) / (sum_src - sum_in(second));
      r.fitted = fit >= 0.25 && fit <= 4;
      if (r.fitted)
        scale = fit;
      else
        r.notes.push_back(cat("the two calibration steps (", r.source_s * 1e3, " ms in ", dtype_name(src), ", ",
                              r.second.median * 1e3, " ms in ", dtype_name(second), ") disagree with the products timed "
                              "alone (", sum_src * 1e3, " and ", sum_in(second) * 1e3, " ms): scale taken as 1"));
    } else {
      r.notes.push_back(cat("no candidate format changes the products' time by 5% or more: one calibration step, "
                            "scale 1"));
    }
    r.scale = scale;
    for (const Product& p : ps)
      for (DType f : formats_of(p, formats)) r.table.seconds[p.name][f] = scale * alone(p, f);
    r.table.fixed = r.source_s - scale * sum_src;
    if (r.table.fixed < 0)
      r.notes.push_back(cat("the products take more than the measured step (", scale * sum_src * 1e3, " of ",
                            r.source_s * 1e3, " ms): the rest of the step is a negative offset"));
    r.notes.push_back(cat("measured here with ", r.threads, " threads at a context of ", o.context, " tokens: step ",
                          r.source_s * 1e3, " ms in ", dtype_name(src),
                          uniform ? cat(", ", r.second.median * 1e3, " ms uniformly in ", dtype_name(second)) : "",
                          " (medians of ", r.source.samples.size(), ", interleaved); products timed alone scaled by ",
                          scale, ", ", r.table.fixed * 1e3, " ms outside them"));
    return r;
  }

  // A catalogue device: the roofline at the decode efficiency measured here.
  const Checkpoint* self[] = {&ck};
  r.source = measure_decode_steps(self, o)[0];
  const DeviceSpec& spec = catalog_device(o.device);
  const RooflineDevice dev = roofline_device(spec);
  r.device = spec.id, r.device_name = spec.name, r.kind = FigureKind::Modeled;
  CpuFigures given;
  given.measure_missing = true;
  const RooflineDevice cpu = this_machine_roofline(given);
  const LlamaConfig& c = ck.config;
  const DType src = ps.empty() ? DType::F32 : ps.front().source;
  const WorkloadCost here = inference_cost(c, Phase::Decode, 1, 1, o.context, src, DType::F32, compute_of(src, cpu));
  r.efficiency = roofline_seconds(here, cpu) / r.source.median;
  if (r.efficiency > 1) {
    r.notes.push_back(cat("decode here ran above this machine's roofline (efficiency ", r.efficiency,
                          ": the model is served from cache, not memory); ", spec.id, " is modeled at efficiency 1"));
    r.efficiency = 1;
  }
  const WorkloadCost there = inference_cost(c, Phase::Decode, 1, 1, o.context, src, DType::F32, compute_of(src, dev));
  WorkloadCost rest;
  rest.phase = Phase::Decode;
  for (const OpWork& w : there.ops)
    if (w.op.rfind("linear ", 0) != 0) rest.ops.push_back(w);
  r.table.fixed = roofline_seconds(rest, dev, r.efficiency);
  double sum = 0;
  for (const Product& p : ps)
    for (DType f : formats_of(p, formats)) {
      double s = 0;
      if (!p.lookup) {
        const ops::OpCost oc = ops::linear_cost(1, p.K, p.N, f);
        WorkloadCost one;
        one.phase = Phase::Decode;
        one.ops.push_back({"linear", oc.flops, oc.bytes, compute_of(f, dev)});
        s = roofline_seconds(one, dev, r.efficiency);
      }
      r.table.seconds[p.name][f] = s;
      if (f == p.source) sum += s;
    }
  r.source_s = r.table.fixed + sum;
  r.notes.push_back(cat(spec.id, " is modeled (", spec.name, ", ", spec.source, "): a per-op roofline at the decode "
                        "efficiency ", r.efficiency, " measured here (step ", r.source.median * 1e3, " ms on ", r.threads,
                        " threads at a context of ", o.context, " tokens); kernel launches and synchronization are "
                        "not modeled"));
  return r;
}

}  // namespace genperf

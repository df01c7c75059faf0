// TrainModel: f32 master parameters and gradients in one flat buffer each, with named views,
// over LlamaGraph<float>; random initialization and conversion to and from Checkpoint; LoRA
// adapters in a buffer of their own (PEFT directories: lora_io.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "models/llama/names.h"
#include "train/graph.h"
#include "train/paged.h"

namespace genperf {

const char* attention_mode_name(AttentionMode m) {
  return m == AttentionMode::Naive ? "naive" : "flash";
}

AttentionMode parse_attention_mode(std::string_view s) {
  if (s == "naive") return AttentionMode::Naive;
  if (s == "flash") return AttentionMode::Flash;
  fail("[train] unknown attention mode '", s, "': expected naive or flash");
}

const char* precision_name(Precision p) { return p == Precision::Bf16 ? "bf16" : "f32"; }

Precision parse_precision(std::string_view s) {
  if (s == "f32") return Precision::F32;
  if (s == "bf16") return Precision::Bf16;
  fail("[train] unknown precision '", s, "': expected f32 or bf16");
}

// bf16 products need AVX512-BF16 and the AVX-512 level selected (GENPERF_ISA or set_isa may
// select a lower one, as for inference).
Precision effective_precision(Precision requested) {
  return requested == Precision::Bf16 && cpu_features().avx512_bf16 && isa() == Isa::Avx512
             ? Precision::Bf16
             : Precision::F32;
}

const std::vector<std::string>& lora_target_names() { return llama::lora_modules(); }
const std::vector<std::string>& default_lora_targets() { return llama::default_lora_modules(); }

namespace {
std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}
}  // namespace

void LoraConfig::validate() const {
  GP_CHECK(rank >= 1, "[lora] rank must be at least 1, got ", rank);
  GP_CHECK(std::isfinite(alpha) && alpha != 0, "[lora] alpha must be finite and non-zero, got ", alpha);
  GP_CHECK(dropout >= 0 && dropout < 1, "[lora] dropout must lie in [0, 1), got ", dropout);
  const auto& names = lora_target_names();
  GP_CHECK(!targets.empty(), "[lora] no target modules: expected some of ", joined(names, " "));
  for (size_t i = 0; i < targets.size(); ++i) {
    GP_CHECK(std::find(names.begin(), names.end(), targets[i]) != names.end(), "[lora] unknown target module '",
             targets[i], "': expected one of ", joined(names, ", "));
    for (size_t j = 0; j < i; ++j)
      GP_CHECK(targets[j] != targets[i], "[lora] target module '", targets[i], "' is listed twice");
  }
}

size_t ActivationMemory::total() const {
  return residual + norms + qkv + attention + attention_scores + mlp + logits + backward +
         attention_backward + bf16_operands + lora;
}

Json ActivationMemory::to_json() const {
  return Json::Object{{"residual", int64_t(residual)},
                      {"norms", int64_t(norms)},
                      {"qkv", int64_t(qkv)},
                      {"attention", int64_t(attention)},
                      {"attention_scores", int64_t(attention_scores)},
                      {"mlp", int64_t(mlp)},
                      {"logits", int64_t(logits)},
                      {"backward", int64_t(backward)},
                      {"attention_backward", int64_t(attention_backward)},
                      {"bf16_operands", int64_t(bf16_operands)},
                      {"lora", int64_t(lora)},
                      {"total", int64_t(total())}};
}

struct TrainModel::Impl {
  train::LlamaGraph<float> graph;
  Tensor params, grads;  // f32 [num_params]; grads undefined once LoRA freezes the base
  std::map<std::string, size_t> index;  // name -> position in param_info()
  Tensor lora_params, lora_grads;       // f32 [adapter elements] when LoRA is on
  // Deferred initialization: writes values [lo, hi) of the parameters (null once written).
  std::function<void(size_t lo, size_t hi, float* dst)> pending;

  // Deferred, the buffers are reserved pages that nothing has written (train/paged.h).
  Impl(const LlamaConfig& c, RopeStyle rope, TrainOptions o, InitMode init) : graph(c, rope, o) {
    const auto& lay = graph.layout();
    const bool lazy = init == InitMode::Deferred;
    params = lazy ? train::paged_zeros(lay.total) : Tensor::zeros({int64_t(lay.total)});
    grads = lazy ? train::paged_zeros(lay.total) : Tensor::zeros({int64_t(lay.total)});
    for (size_t i = 0; i < lay.params.size(); ++i) index[lay.params[i].name] = i;
  }
  float* p() const { return params.data<float>(); }
  float* g() const { return grads.defined() ? grads.data<float>() : nullptr; }
  float* lp() const { return lora_params.defined() ? lora_params.data<float>() : nullptr; }
  float* lg() const { return lora_grads.defined() ? lora_grads.data<float>() : nullptr; }
  const train::LoraLayout& lora() const {
    GP_CHECK(graph.lora(), "[lora] LoRA is not enabled on this model (call enable_lora first)");
    return *graph.lora();
  }
  const ParamInfo& info(const std::string& name) const {
    auto it = index.find(name);
    GP_CHECK(it != index.end(), "[train] the model has no parameter ", name);
    return graph.layout().params[it->second];
  }
};

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::string_view x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += cat(i ? ", " : "", s[i]);
  return r + "]";
}

// The part [lo, hi) of each tensor that a range of the flat buffer covers: f(tensor, its first
// value in the range, one past its last).
template <class F>
void for_each_overlap(const std::vector<ParamInfo>& info, size_t lo, size_t hi, F&& f) {
  for (size_t ti = 0; ti < info.size(); ++ti) {
    const size_t a = std::max(lo, info[ti].offset), b = std::min(hi, info[ti].offset + info[ti].numel);
    if (b > a) f(ti, a - info[ti].offset, b - info[ti].offset);
  }
}

// Values [lo, hi) of a model initialized from `seed` (TrainModel's first constructor), to dst.
// Residual projections are scaled down so the residual stream's variance does not grow with
// depth (GPT-2's initialization). Each chunk of a tensor draws from its own generator, seeded by
// (seed, tensor, chunk): the same weights for any thread count and any range, drawn in parallel.
void init_random(const std::vector<ParamInfo>& info, int64_t layers, uint64_t seed, size_t lo, size_t hi,
                 float* dst) {
  const double std = 0.02, resid_std = 0.02 / std::sqrt(2.0 * double(layers));
  constexpr size_t kChunk = size_t(1) << 16;
  struct Piece {
    size_t tensor, chunk, from, to;  // values [from, to) of the tensor, inside one chunk
  };
  std::vector<Piece> pieces;
  for_each_overlap(info, lo, hi, [&](size_t ti, size_t a, size_t b) {
    const ParamInfo& pi = info[ti];
    float* w = dst + (pi.offset + a - lo);
    if (pi.shape.size() == 1) {
      std::fill_n(w, b - a, ends_with(pi.name, ".bias") ? 0.0f : 1.0f);
      return;
    }
    for (size_t ch = a / kChunk; ch * kChunk < b; ++ch)
      pieces.push_back({ti, ch, std::max(a, ch * kChunk), std::min(b, (ch + 1) * kChunk)});
  });
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (pieces.size() > 1)
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& c = pieces[k];
    const ParamInfo& pi = info[c.tensor];
    const bool resid = ends_with(pi.name, "o_proj.weight") || ends_with(pi.name, "down_proj.weight");
    const double s = resid ? resid_std : std;
    Rng rng(seed * 0x9E3779B97F4A7C15ull + (uint64_t(c.tensor) << 32) + c.chunk);
    for (size_t i = c.chunk * kChunk; i < c.from; ++i) (void)rng.normal();  // the chunk's values before the range
    for (size_t i = c.from; i < c.to; ++i) dst[pi.offset + i - lo] = float(rng.normal() * s);
  }
}

}  // namespace

TrainModel::TrainModel(const LlamaConfig& c, uint64_t seed, TrainOptions o, RopeStyle rope, InitMode init)
    : impl_(std::make_unique<Impl>(c, rope, o, init)) {
  impl_->pending = [info = param_info(), layers = c.num_hidden_layers, seed](size_t lo, size_t hi, float* dst) {
    init_random(info, layers, seed, lo, hi, dst);
  };
  if (init == InitMode::Eager) materialize();
}

TrainModel::TrainModel(const Checkpoint& ck, TrainOptions o, InitMode init)
    : impl_(std::make_unique<Impl>(ck.config, ck.rope_style, o, init)) {
  // Each parameter's tensor, checked now; converted when its values are asked for.
  std::vector<Tensor> source;
  for (const ParamInfo& pi : param_info()) {
    auto it = ck.tensors.find(pi.name);
    GP_CHECK(it != ck.tensors.end(), "[train] ", ck.source, ": missing tensor ", pi.name);
    Tensor t = it->second;
    GP_CHECK(t.shape() == pi.shape, "[train] ", ck.source, ": tensor ", pi.name, " is ",
             t.describe(), ", expected shape ", shape_str(pi.shape));
    GP_CHECK(traits(t.dtype()).is_float && traits(t.dtype()).block_size == 1, "[train] ", ck.source,
             ": tensor ", pi.name, " is ", t.describe(), "; training needs a float type");
    source.push_back(t.is_contiguous() ? t : t.clone());
  }
  impl_->pending = [info = param_info(), source = std::move(source)](size_t lo, size_t hi, float* dst) {
    for_each_overlap(info, lo, hi, [&](size_t ti, size_t a, size_t b) {
      const TypeTraits& tt = traits(source[ti].dtype());
      const auto* from = static_cast<const char*>(source[ti].raw()) + a * tt.block_bytes;
      tt.to_f32(from, dst + (info[ti].offset + a - lo), int64_t(b - a));
    });
  };
  if (init == InitMode::Eager) materialize();
}

bool TrainModel::init_deferred() const { return bool(impl_->pending); }

void TrainModel::init_params(size_t lo, size_t hi, float* dst) const {
  GP_CHECK(lo <= hi && hi <= num_params(), "[train] init_params: range [", lo, ", ", hi, ") is outside the ",
           num_params(), " parameters");
  if (impl_->pending) return impl_->pending(lo, hi, dst);
  std::copy(impl_->p() + lo, impl_->p() + hi, dst);
}

void TrainModel::materialize() {
  if (!impl_->pending) return;
  impl_->pending(0, num_params(), impl_->p());
  impl_->pending = nullptr;
}

TrainModel::~TrainModel() = default;
TrainModel::TrainModel(TrainModel&&) noexcept = default;
TrainModel& TrainModel::operator=(TrainModel&&) noexcept = default;

const LlamaConfig& TrainModel::config() const { return impl_->graph.config(); }
RopeStyle TrainModel::rope_style() const { return impl_->graph.rope_style(); }
const TrainOptions& TrainModel::options() const { return impl_->graph.options(); }
void TrainModel::set_options(TrainOptions o) { impl_->graph.set_options(o); }

size_t TrainModel::num_params() const { return impl_->graph.layout().total; }
std::span<float> TrainModel::params() { return {impl_->p(), num_params()}; }
std::span<const float> TrainModel::params() const { return {impl_->p(), num_params()}; }
std::span<float> TrainModel::grads() { return {impl_->g(), impl_->g() ? num_params() : 0}; }
std::span<const float> TrainModel::grads() const { return {impl_->g(), impl_->g() ? num_params() : 0}; }
const std::vector<ParamInfo>& TrainModel::param_info() const { return impl_->graph.layout().params; }

Tensor TrainModel::param(const std::string& name) const {
  const ParamInfo& pi = impl_->info(name);
  return Tensor::wrap(impl_->p() + pi.offset, pi.shape, DType::F32, impl_->params.storage());
}

Tensor TrainModel::grad(const std::string& name) const {
  const ParamInfo& pi = impl_->info(name);
  GP_CHECK(impl_->g(), "[train] ", name, " is frozen (LoRA is on): the base has no gradients");
  return Tensor::wrap(impl_->g() + pi.offset, pi.shape, DType::F32, impl_->grads.storage());
}

float TrainModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t B, int64_t T) {
  GP_CHECK(!impl_->pending, "[train] the model's initialization is deferred: materialize() it (or train it data-parallel) first");
  return float(impl_->graph.forward(impl_->p(), tokens, targets, B, T, impl_->lp()));
}

Tensor TrainModel::logits() const {
  const auto& g = impl_->graph;
  GP_CHECK(g.has_forward(), "[train] logits are available after a forward and before its backward");
  const int64_t N = g.batch() * g.seq_len(), V = config().vocab_size;
  Tensor out = Tensor::zeros({N, V});
  std::copy_n(g.logits(), size_t(N * V), out.data<float>());
  return out;
}

void TrainModel::backward(float loss_scale) {
  impl_->graph.backward(impl_->p(), impl_->g(), double(loss_scale), impl_->lp(), impl_->lg());
}

// All gradients there are: the base's in full training, the adapters' with LoRA (no base ones).
void TrainModel::zero_grad() {
  const std::span<float> g = trainable_grads();
  std::fill(g.begin(), g.end(), 0.0f);
}

ActivationMemory TrainModel::activation_memory() const { return impl_->graph.memory(); }

ActivationMemory TrainModel::activation_memory(const LlamaConfig& c, const TrainOptions& o,
                                               int64_t B, int64_t T, const LoraConfig* lora, bool as_requested) {
  std::optional<train::LoraLayout> lay;
  if (lora) lay = train::lora_layout(c, train::param_layout(c), *lora);
  return train::activation_bytes(c, o, B, T, num_threads(), lay ? &*lay : nullptr, as_requested);
}

namespace {

// W[out, in] += (alpha / r) B A, each element's sum over r in double.
void merge_adapter(float* w, const train::LoraAdapter& ad, const float* adapters, const LoraConfig& lc) {
  const int64_t r = lc.rank;
  const double scale = double(lc.alpha) / double(r);
  const float *A = adapters + ad.a, *B = adapters + ad.b;
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (ad.out * ad.in >= (1 << 16))
  for (int64_t o = 0; o < ad.out; ++o)
    for (int64_t i = 0; i < ad.in; ++i) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k) s += double(B[o * r + k]) * double(A[k * ad.in + i]);
      w[o * ad.in + i] = float(double(w[o * ad.in + i]) + scale * s);
    }
}

}  // namespace

std::map<std::string, Tensor> TrainModel::tensors(DType dtype) const {
  GP_CHECK(!impl_->pending, "[train] the model's initialization is deferred: materialize() it first");
  GP_CHECK(traits(dtype).is_float && traits(dtype).block_size == 1, "[train] cannot export weights as ",
           dtype_name(dtype), "; expected f32, f16 or bf16");
  // Targeted projections merged: rows [out, in] at LoraAdapter::base get (alpha / r) B A.
  std::map<size_t, const train::LoraAdapter*> merged;
  if (lora_enabled())
    for (const train::LoraAdapter& ad : impl_->lora().adapters) merged[ad.base] = &ad;
  std::map<std::string, Tensor> out;
  std::vector<float> w;
  for (const ParamInfo& pi : param_info()) {
    Tensor t = Tensor::zeros(pi.shape, dtype);
    const float* src = impl_->p() + pi.offset;
    if (auto it = merged.find(pi.offset); it != merged.end()) {
      w.assign(src, src + pi.numel);
      merge_adapter(w.data(), *it->second, impl_->lp(), lora_config());
      src = w.data();
    }
    traits(dtype).from_f32(src, t.raw(), int64_t(pi.numel));
    out.emplace(pi.name, std::move(t));
  }
  return out;
}

Checkpoint TrainModel::to_checkpoint(DType dtype) const {
  Checkpoint ck;
  ck.source = "genperf train";
  ck.format = "train";
  ck.config = config();
  ck.config.torch_dtype = dtype == DType::F32 ? "float32" : dtype == DType::BF16 ? "bfloat16" : "float16";
  ck.rope_style = rope_style();
  ck.tensors = tensors(dtype);
  return ck;
}

std::span<float> TrainModel::trainable_params() {
  if (!lora_enabled()) return params();
  return {impl_->lp(), size_t(impl_->lora_params.numel())};
}

std::span<float> TrainModel::trainable_grads() {
  if (!lora_enabled()) return grads();
  return {impl_->lg(), size_t(impl_->lora_grads.numel())};
}

std::vector<ParamSegment> TrainModel::trainable_segments() const {
  if (!lora_enabled()) return param_segments(*this);
  std::vector<ParamSegment> s;
  for (const ParamInfo& pi : lora_param_info()) s.push_back({pi.offset, pi.numel, pi.decay});
  return s;
}

// ------------------------------------------------------------------------------------------
// LoRA

void TrainModel::enable_lora(const LoraConfig& cfg) {
  GP_CHECK(!lora_enabled(), "[lora] LoRA is already enabled on this model");
  impl_->graph.set_lora(&cfg);  // validates
  const train::LoraLayout& lay = impl_->lora();
  impl_->lora_params = Tensor::zeros({int64_t(lay.total)});
  impl_->lora_grads = Tensor::zeros({int64_t(lay.total)});
  impl_->grads = Tensor();  // the base is frozen
  // A ~ U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's kaiming_uniform_ with a = sqrt(5)), one generator
  // per (seed, layer, target); B stays 0.
  float* lp = impl_->lp();
  for (const train::LoraAdapter& ad : lay.adapters) {
    Rng rng(cfg.seed * 0x9E3779B97F4A7C15ull + 0x10AA5EEDull + (uint64_t(ad.layer) << 8) + uint64_t(ad.target));
    const double bound = 1.0 / std::sqrt(double(ad.in));
    for (int64_t i = 0; i < int64_t(cfg.rank) * ad.in; ++i)
      lp[ad.a + size_t(i)] = float((2.0 * rng.uniform() - 1.0) * bound);
  }
}

bool TrainModel::lora_enabled() const { return impl_->graph.lora() != nullptr; }
const LoraConfig& TrainModel::lora_config() const { return impl_->lora().config; }

const std::vector<ParamInfo>& TrainModel::lora_param_info() const {
  static const std::vector<ParamInfo> none;
  return lora_enabled() ? impl_->lora().params : none;
}

std::map<std::string, Tensor> TrainModel::lora_tensors(DType dtype) const {
  GP_CHECK(traits(dtype).is_float && traits(dtype).block_size == 1, "[lora] cannot export adapters as ",
           dtype_name(dtype), "; expected f32, f16 or bf16");
  std::map<std::string, Tensor> out;
  for (const ParamInfo& pi : impl_->lora().params) {
    Tensor t = Tensor::zeros(pi.shape, dtype);
    traits(dtype).from_f32(impl_->lp() + pi.offset, t.raw(), int64_t(pi.numel));
    out.emplace(pi.name, std::move(t));
  }
  return out;
}

void TrainModel::set_lora_step(int64_t step, int64_t first_micro) {
  impl_->graph.set_lora_step(step, first_micro);
}

std::vector<std::vector<std::pair<size_t, size_t>>> TrainModel::param_units() const {
  const train::ParamLayout& lay = impl_->graph.layout();
  std::vector<std::vector<std::pair<size_t, size_t>>> units;
  const ParamInfo& embed = lay.params.front();
  units.push_back({{embed.offset, embed.offset + embed.numel}});
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const size_t end = l + 1 < lay.layers.size() ? lay.layers[l + 1].attn_norm : lay.norm;
    units.push_back({{lay.layers[l].attn_norm, end}});
  }
  units.push_back({{lay.norm, lay.total}});  // the final norm, and the head when it is untied
  if (lay.lm_head == lay.embed) units.back().push_back(units.front().front());
  return units;
}

std::vector<std::vector<std::pair<size_t, size_t>>> TrainModel::trainable_units() const {
  const train::LoraLayout* lora = impl_->graph.lora();
  if (!lora) return param_units();
  // The adapter buffer is laid out layer by layer: each layer's adapters are one range.
  std::vector<std::vector<std::pair<size_t, size_t>>> units(size_t(config().num_hidden_layers) + 2);
  const size_t r = size_t(lora->config.rank);
  for (const train::LoraAdapter& a : lora->adapters) {
    // lora_A [r, in] at a, then lora_B [out, r] at b
    const size_t lo = a.a, hi = a.b + size_t(a.out) * r;
    auto& u = units[size_t(a.layer) + 1];
    if (u.empty()) u.push_back({lo, hi});
    u.front() = {std::min(u.front().first, lo), std::max(u.front().second, hi)};
  }
  return units;
}

void TrainModel::set_params_hook(std::function<void(int64_t, bool, bool)> hook) {
  impl_->graph.on_params = std::move(hook);
}

void TrainModel::adopt_buffers(Tensor params, Tensor grads) {
  GP_CHECK(!lora_enabled() || !grads.defined(), "[train] with LoRA the base is frozen: it has no gradients to adopt");
  for (const Tensor* t : {&params, &grads})
    GP_CHECK(!t->defined() || (t->dtype() == DType::F32 && t->numel() == int64_t(num_params()) && t->is_contiguous()),
             "[train] adopt_buffers needs contiguous f32 buffers of ", num_params(), " values, got ", t->describe());
  if (params.defined()) {
    impl_->params = std::move(params);
    impl_->pending = nullptr;  // the caller's buffer holds (or will hold) the values
  }
  if (grads.defined()) impl_->grads = std::move(grads);
}

void TrainModel::adopt_trainable_buffers(Tensor params, Tensor grads) {
  if (!lora_enabled()) return adopt_buffers(std::move(params), std::move(grads));
  const size_t n = impl_->lora().total;
  for (const Tensor* t : {&params, &grads})
    GP_CHECK(!t->defined() || (t->dtype() == DType::F32 && t->numel() == int64_t(n) && t->is_contiguous()),
             "[lora] adopt_trainable_buffers needs contiguous f32 buffers of ", n, " values, got ", t->describe());
  if (params.defined()) impl_->lora_params = std::move(params);
  if (grads.defined()) impl_->lora_grads = std::move(grads);
}

void TrainModel::set_grads_ready_hook(std::function<void(size_t)> hook) {
  auto& graph = impl_->graph;
  if (!hook) {
    graph.on_grads_ready = nullptr;
    return;
  }
  // Where stage s's trainable gradients begin: the base buffer is laid out embedding, layers,
  // final norm (and head); the adapter buffer layer by layer.
  std::vector<size_t> from(size_t(config().num_hidden_layers) + 1);
  const train::ParamLayout& lay = graph.layout();
  if (const train::LoraLayout* lora = graph.lora()) {
    std::fill(from.begin(), from.end(), lora->total);
    for (const train::LoraAdapter& a : lora->adapters)
      from[size_t(a.layer)] = std::min(from[size_t(a.layer)], std::min(a.a, a.b));
    for (size_t l = from.size() - 1; l-- > 0;) from[l] = std::min(from[l], from[l + 1]);
  } else {
    for (size_t l = 0; l + 1 < from.size(); ++l) from[l] = lay.layers[l].attn_norm;
    from.back() = lay.norm;
  }
  graph.on_grads_ready = [from = std::move(from), hook = std::move(hook)](int64_t stage) {
    hook(stage < 0 ? 0 : from[size_t(stage)]);
  };
}
int64_t TrainModel::lora_step() const { return impl_->graph.lora_step(); }
void TrainModel::set_training(bool on) { impl_->graph.set_training(on); }
bool TrainModel::training() const { return impl_->graph.training(); }


int64_t lora_parameters(const LlamaConfig& c, const LoraConfig& lora) {
  return int64_t(train::lora_layout(c, train::param_layout(c), lora).total);
}

std::vector<ParamSegment> param_segments(const TrainModel& m) {
  std::vector<ParamSegment> s;
  for (const ParamInfo& pi : m.param_info()) s.push_back({pi.offset, pi.numel, pi.decay});
  return s;
}

}  // namespace genperf

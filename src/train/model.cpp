// TrainModel: f32 master parameters and gradients in one flat buffer each, with named views,
// over LlamaGraph<float>; random initialization and conversion to and from Checkpoint.
#include <algorithm>
#include <cmath>

#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "train/graph.h"

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

Precision effective_precision(Precision requested) {
  return requested == Precision::Bf16 && cpu_features().avx512_bf16 ? Precision::Bf16 : Precision::F32;
}

size_t ActivationMemory::total() const {
  return residual + norms + qkv + attention + attention_scores + mlp + logits + backward +
         attention_backward;
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
                      {"total", int64_t(total())}};
}

struct TrainModel::Impl {
  train::LlamaGraph<float> graph;
  Tensor params, grads;  // f32 [num_params]
  std::map<std::string, size_t> index;  // name -> position in param_info()

  Impl(const LlamaConfig& c, RopeStyle rope, TrainOptions o) : graph(c, rope, o) {
    const auto& lay = graph.layout();
    params = Tensor::zeros({int64_t(lay.total)});
    grads = Tensor::zeros({int64_t(lay.total)});
    for (size_t i = 0; i < lay.params.size(); ++i) index[lay.params[i].name] = i;
  }
  float* p() const { return params.data<float>(); }
  float* g() const { return grads.data<float>(); }
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

}  // namespace

TrainModel::TrainModel(const LlamaConfig& c, uint64_t seed, TrainOptions o, RopeStyle rope)
    : impl_(std::make_unique<Impl>(c, rope, o)) {
  // Residual projections are scaled down so the residual stream's variance does not grow with
  // depth (GPT-2's initialization).
  const double std = 0.02, resid_std = 0.02 / std::sqrt(2.0 * double(c.num_hidden_layers));
  constexpr size_t kChunk = size_t(1) << 16;
  const auto& info = param_info();
  for (size_t ti = 0; ti < info.size(); ++ti) {
    const ParamInfo& pi = info[ti];
    float* w = impl_->p() + pi.offset;
    if (pi.shape.size() == 1) {
      std::fill_n(w, pi.numel, ends_with(pi.name, ".bias") ? 0.0f : 1.0f);
      continue;
    }
    const bool resid = ends_with(pi.name, "o_proj.weight") || ends_with(pi.name, "down_proj.weight");
    const double s = resid ? resid_std : std;
    // Each chunk draws from its own generator, seeded by (seed, tensor, chunk): the same weights
    // for any thread count, drawn in parallel.
    const size_t chunks = (pi.numel + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (chunks > 1)
    for (size_t ch = 0; ch < chunks; ++ch) {
      Rng rng(seed * 0x9E3779B97F4A7C15ull + (uint64_t(ti) << 32) + ch);
      const size_t e = std::min(pi.numel, (ch + 1) * kChunk);
      for (size_t i = ch * kChunk; i < e; ++i) w[i] = float(rng.normal() * s);
    }
  }
}

TrainModel::TrainModel(const Checkpoint& ck, TrainOptions o)
    : impl_(std::make_unique<Impl>(ck.config, ck.rope_style, o)) {
  for (const ParamInfo& pi : param_info()) {
    auto it = ck.tensors.find(pi.name);
    GP_CHECK(it != ck.tensors.end(), "[train] ", ck.source, ": missing tensor ", pi.name);
    Tensor t = it->second;
    GP_CHECK(t.shape() == pi.shape, "[train] ", ck.source, ": tensor ", pi.name, " is ",
             t.describe(), ", expected shape ", shape_str(pi.shape));
    GP_CHECK(traits(t.dtype()).is_float && traits(t.dtype()).block_size == 1, "[train] ", ck.source,
             ": tensor ", pi.name, " is ", t.describe(), "; training needs a float type");
    if (!t.is_contiguous()) t = t.clone();
    traits(t.dtype()).to_f32(t.raw(), impl_->p() + pi.offset, int64_t(pi.numel));
  }
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
std::span<float> TrainModel::grads() { return {impl_->g(), num_params()}; }
std::span<const float> TrainModel::grads() const { return {impl_->g(), num_params()}; }
const std::vector<ParamInfo>& TrainModel::param_info() const { return impl_->graph.layout().params; }

Tensor TrainModel::param(const std::string& name) const {
  const ParamInfo& pi = impl_->info(name);
  return Tensor::wrap(impl_->p() + pi.offset, pi.shape, DType::F32, impl_->params.storage());
}

Tensor TrainModel::grad(const std::string& name) const {
  const ParamInfo& pi = impl_->info(name);
  return Tensor::wrap(impl_->g() + pi.offset, pi.shape, DType::F32, impl_->grads.storage());
}

float TrainModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t B, int64_t T) {
  return float(impl_->graph.forward(impl_->p(), tokens, targets, B, T));
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
  impl_->graph.backward(impl_->p(), impl_->g(), double(loss_scale));
}

void TrainModel::zero_grad() { std::fill_n(impl_->g(), num_params(), 0.0f); }

ActivationMemory TrainModel::activation_memory() const { return impl_->graph.memory(); }

ActivationMemory TrainModel::activation_memory(const LlamaConfig& c, const TrainOptions& o,
                                               int64_t B, int64_t T) {
  ActivationMemory m = train::activation_elements(c, o, B, T, num_threads());
  for (size_t* f : {&m.residual, &m.norms, &m.qkv, &m.attention, &m.attention_scores, &m.mlp,
                    &m.logits, &m.backward, &m.attention_backward})
    *f *= sizeof(float);
  return m;
}

std::map<std::string, Tensor> TrainModel::tensors(DType dtype) const {
  GP_CHECK(traits(dtype).is_float && traits(dtype).block_size == 1, "[train] cannot export weights as ",
           dtype_name(dtype), "; expected f32, f16 or bf16");
  std::map<std::string, Tensor> out;
  for (const ParamInfo& pi : param_info()) {
    Tensor t = Tensor::zeros(pi.shape, dtype);
    traits(dtype).from_f32(impl_->p() + pi.offset, t.raw(), int64_t(pi.numel));
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

std::span<float> TrainModel::trainable_params() { return params(); }
std::span<float> TrainModel::trainable_grads() { return grads(); }
std::vector<ParamSegment> TrainModel::trainable_segments() const { return param_segments(*this); }

std::vector<ParamSegment> param_segments(const TrainModel& m) {
  std::vector<ParamSegment> s;
  for (const ParamInfo& pi : m.param_info()) s.push_back({pi.offset, pi.numel, pi.decay});
  return s;
}

}  // namespace genperf

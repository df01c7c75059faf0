// Llama-family forward pass over ops/. One call handles T tokens of one sequence: batched
// prefill when T > 1, decode when T = 1; both append to the session's KV cache.
#include <algorithm>
#include <cmath>
#include <map>

#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/ops.h"
#include "models/llama/forward.h"

namespace genperf {
namespace {

std::string layer_name(int64_t i, const char* rest) { return cat("model.layers.", i, ".", rest); }

// Takes a tensor out of the checkpoint, checking its shape.
Tensor take(const std::map<std::string, Tensor>& t, const std::string& src, const std::string& name,
            std::vector<int64_t> shape) {
  auto it = t.find(name);
  GP_CHECK(it != t.end(), "[llama] ", src, ": missing tensor ", name);
  const Tensor& x = it->second;
  if (x.shape() != shape) {
    std::string w = "[";
    for (size_t i = 0; i < shape.size(); ++i) w += cat(i ? ", " : "", shape[i]);
    fail("[llama] ", src, ": tensor ", name, " is ", x.describe(), ", expected shape ", w, "]");
  }
  return x;
}

}  // namespace

LlamaModel::LlamaModel(Checkpoint ck)
    : config_(ck.config), rope_style_(ck.rope_style), source_(ck.source),
      tensors_(std::move(ck.tensors)), tokenizer_(std::move(ck.tokenizer)) {
  const auto& c = config_;
  c.validate(source_);
  const int64_t d = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  embed_ = take(tensors_, source_, "model.embed_tokens.weight", {V, d});
  norm_ = take(tensors_, source_, "model.norm.weight", {d});
  // Linear weights are taken in the layout of the fastest kernels (ops::prepare_weight); the map
  // takes the prepared tensor too, so that the stored one is released. A head tied to the
  // embedding table stays as stored: the embedding reads it by rows.
  auto linear_weight = [&](const std::string& name, std::vector<int64_t> shape) {
    Tensor w = ops::prepare_weight(take(tensors_, source_, name, std::move(shape)));
    tensors_[name] = w;
    return w;
  };
  lm_head_ = c.tie_word_embeddings ? embed_ : linear_weight("lm_head.weight", {V, d});
  head_names_ = {c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Layer l;
    auto get = [&](const char* n, std::vector<int64_t> s) { return take(tensors_, source_, layer_name(i, n), s); };
    auto lin = [&](const char* n, std::vector<int64_t> s) { return linear_weight(layer_name(i, n), s); };
    l.attn_norm = get("input_layernorm.weight", {d});
    l.wq = lin("self_attn.q_proj.weight", {c.q_dim(), d});
    l.wk = lin("self_attn.k_proj.weight", {c.kv_dim(), d});
    l.wv = lin("self_attn.v_proj.weight", {c.kv_dim(), d});
    l.wo = lin("self_attn.o_proj.weight", {d, c.q_dim()});
    if (c.attention_bias) {
      l.bq = get("self_attn.q_proj.bias", {c.q_dim()});
      l.bk = get("self_attn.k_proj.bias", {c.kv_dim()});
      l.bv = get("self_attn.v_proj.bias", {c.kv_dim()});
    }
    l.ffn_norm = get("post_attention_layernorm.weight", {d});
    l.w_gate = lin("mlp.gate_proj.weight", {F, d});
    l.w_up = lin("mlp.up_proj.weight", {F, d});
    l.w_down = lin("mlp.down_proj.weight", {d, F});
    l.qkv_names = {layer_name(i, "self_attn.q_proj.weight"), layer_name(i, "self_attn.k_proj.weight"),
                   layer_name(i, "self_attn.v_proj.weight")};
    l.o_names = {layer_name(i, "self_attn.o_proj.weight")};
    l.gate_up_names = {layer_name(i, "mlp.gate_proj.weight"), layer_name(i, "mlp.up_proj.weight")};
    l.down_names = {layer_name(i, "mlp.down_proj.weight")};
    layers_.push_back(std::move(l));
  }
  inv_freq_ = rope_inv_freq(c);
}

size_t LlamaModel::weight_bytes() const { return genperf::weight_bytes(tensors_); }

std::string LlamaModel::weight_types() const { return genperf::weight_types(tensors_); }

size_t LlamaModel::weight_bytes_of(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? 0 : it->second.nbytes();
}

MemoryAccount LlamaModel::memory(const Session& s) const {
  return {weight_bytes(), s.kv_bytes(), s.scratch_bytes()};
}

double LlamaModel::forward_flops(int64_t T, int64_t past, LogitsFor which) const {
  const auto& c = config_;
  const int64_t d = c.hidden_size;
  const double per_layer = ops::linear_flops(T, d, c.q_dim() + 2 * c.kv_dim()) +
                           ops::linear_flops(T, c.q_dim(), d) +
                           ops::linear_flops(T, d, 3 * c.intermediate_size) +
                           ops::attention_flops(T, c.num_attention_heads, c.head_dim, past);
  const int64_t rows = which == LogitsFor::All ? T : 1;
  return per_layer * double(c.num_hidden_layers) + ops::linear_flops(rows, d, c.vocab_size);
}

namespace {
void check_kv_dtype(DType kv, const LlamaConfig& c) {
  GP_CHECK(kv == DType::F32 || kv == DType::F16 || kv == DType::BF16 || kv == DType::Q8_0,
           "[llama] a KV cache of ", dtype_name(kv), " is not supported (f32, f16, bf16 or q8_0)");
  GP_CHECK(kv != DType::Q8_0 || c.head_dim % 32 == 0, "[llama] a KV cache of q8_0 needs a head "
           "dimension that is a multiple of 32; this model's is ", c.head_dim);
}
}  // namespace

void LlamaModel::set_kv_dtype(DType kv) {
  check_kv_dtype(kv, config_);
  kv_dtype_ = kv;
}

Session::Session(const LlamaModel& m, int64_t capacity) : Session(m, capacity, m.kv_dtype()) {}

Session::Session(const LlamaModel& m, int64_t capacity, DType kv)
    : model_(&m), capacity_(capacity), kv_(kv) {
  const auto& c = m.config();
  GP_CHECK(capacity > 0 && capacity <= c.max_position_embeddings, "[llama] context of ", capacity,
           " tokens is outside 1..", c.max_position_embeddings, " (max_position_embeddings of ",
           m.source(), ")");
  check_kv_dtype(kv, c);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    k_.push_back(Tensor::zeros({c.num_key_value_heads, capacity, c.head_dim}, kv));
    v_.push_back(Tensor::zeros({c.num_key_value_heads, capacity, c.head_dim}, kv));
  }
}

void Session::truncate(int64_t n) {
  GP_CHECK(n >= 0 && n <= pos_, "[llama] cannot truncate a session of ", pos_, " tokens to ", n);
  pos_ = n;
}

size_t Session::kv_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < k_.size(); ++i) n += k_[i].nbytes() + v_[i].nbytes();
  return n;
}

size_t Session::scratch_bytes() const {
  size_t n = 0;
  for (const Tensor* t : {&x_, &h_, &q_, &attn_, &gate_, &up_, &kn_, &vn_})
    if (t->defined()) n += t->nbytes();
  return n;
}

void Session::reserve(int64_t T) {
  if (T <= scratch_T_) return;
  const auto& c = model_->config();
  x_ = Tensor::zeros({T, c.hidden_size});
  h_ = Tensor::zeros({T, c.hidden_size});
  q_ = Tensor::zeros({T, c.q_dim()});
  attn_ = Tensor::zeros({T, c.q_dim()});
  gate_ = Tensor::zeros({T, c.intermediate_size});
  up_ = Tensor::zeros({T, c.intermediate_size});
  kn_ = Tensor::zeros({T, c.kv_dim()});
  vn_ = Tensor::zeros({T, c.kv_dim()});
  scratch_T_ = T;
}

Tensor LlamaModel::forward(Session& s, std::span<const int32_t> tokens, LogitsFor which,
                           const MatmulInputHook* hook) const {
  GP_CHECK(s.model_ == this, "[llama] session belongs to another model");
  const int64_t T = int64_t(tokens.size());
  GP_CHECK(T > 0, "[llama] forward needs at least one token");
  GP_CHECK(s.pos_ + T <= s.capacity_, "[llama] ", T, " tokens after ", s.pos_,
           " cached exceed the session's context of ", s.capacity_);
  const auto& c = config_;
  const int64_t p0 = s.pos_;
  s.reserve(T);
  auto rows = [T](const Tensor& t) { return t.slice(0, 0, T); };
  Tensor x = rows(s.x_), h = rows(s.h_), q = rows(s.q_), attn = rows(s.attn_), gate = rows(s.gate_), up = rows(s.up_);
  s.positions_.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) s.positions_[size_t(t)] = int32_t(p0 + t);

  // The inference executor of the one Llama forward (forward.h): the session's tensors, the
  // KV cache, and the hook that sees each matmul's input (calibration statistics).
  struct Step {
    const LlamaModel& m;
    Session& s;
    std::span<const int32_t> tokens;
    LogitsFor which;
    const MatmulInputHook* hook;
    int64_t T, p0;
    float eps, scale;
    Tensor x, h, q, attn, gate, up, kn, vn, logits;

    const Layer& layer(int64_t l) const { return m.layers_[size_t(l)]; }
    void observe(const std::vector<std::string>& weights, const Tensor& in) const {
      if (hook) (*hook)(weights, in);
    }
    static const Tensor* bias(const Tensor& b) { return b.defined() ? &b : nullptr; }
    const LlamaConfig& c() const { return m.config_; }

    void embed() { ops::embedding(m.embed_, tokens, x); }
    void attn_norm(int64_t l) { ops::rms_norm(x, layer(l).attn_norm, eps, h); }
    // New keys and values are computed and rotated in f32, then stored (rounded or quantized
    // once) into the head-major cache at positions p0 .. p0+T-1.
    void qkv(int64_t l) {
      const Layer& y = layer(l);
      const ops::LinearOut outs[] = {{&y.wq, bias(y.bq), &q}, {&y.wk, bias(y.bk), &kn}, {&y.wv, bias(y.bv), &vn}};
      observe(y.qkv_names, h);
      ops::linear_many(h, outs);
    }
    void rope(int64_t) {
      ops::rope(q, c().num_attention_heads, s.positions_, m.inv_freq_, m.rope_style_);
      ops::rope(kn, c().num_key_value_heads, s.positions_, m.inv_freq_, m.rope_style_);
    }
    void attention(int64_t l) {
      const size_t li = size_t(l);
      Tensor kc = s.k_[li].slice(1, p0, T), vc = s.v_[li].slice(1, p0, T);
      ops::store_rows(kn, kc);
      ops::store_rows(vn, vc);
      ops::attention(q, s.k_[li].slice(1, 0, p0 + T), s.v_[li].slice(1, 0, p0 + T), c().num_attention_heads,
                     c().num_key_value_heads, p0, scale, attn);
    }
    void o_proj(int64_t l) {
      observe(layer(l).o_names, attn);
      ops::linear(attn, layer(l).wo, nullptr, h);
    }
    void residual_attn(int64_t) { ops::add_inplace(x, h); }
    void ffn_norm(int64_t l) { ops::rms_norm(x, layer(l).ffn_norm, eps, h); }
    void gate_up(int64_t l) {
      const Layer& y = layer(l);
      const ops::LinearOut outs[] = {{&y.w_gate, nullptr, &gate}, {&y.w_up, nullptr, &up}};
      observe(y.gate_up_names, h);
      ops::linear_many(h, outs);
    }
    void swiglu(int64_t) { ops::silu_mul(gate, up, gate); }
    void down(int64_t l) {
      observe(layer(l).down_names, gate);
      ops::linear(gate, layer(l).w_down, nullptr, h);
    }
    void residual_ffn(int64_t) { ops::add_inplace(x, h); }
    void final_norm() {
      const Tensor last = which == LogitsFor::All ? x : x.slice(0, T - 1, 1);
      h = Tensor::zeros(last.shape());
      ops::rms_norm(last, m.norm_, eps, h);
    }
    void head() {
      observe(m.head_names_, h);
      logits = Tensor::zeros({h.size(0), c().vocab_size});
      ops::linear(h, m.lm_head_, nullptr, logits);
    }
  };
  Step e{*this, s, tokens, which, hook, T, p0, float(c.rms_norm_eps), float(1.0 / std::sqrt(double(c.head_dim))),
         x, h, q, attn, gate, up, rows(s.kn_), rows(s.vn_), {}};
  llama::forward(e, int64_t(layers_.size()));
  s.pos_ += T;
  return e.logits;
}

}  // namespace genperf

// Activation statistics for quantization: a forward pass in f32 over calibration windows that
// accumulates, for each distinct matmul input, the per-column sums of squares and (for GPTQ)
// X^T X. q/k/v share one input and gate/up another, so each input is accumulated once and its
// statistics are copied to every weight that multiplies it.
#include <algorithm>
#include <cmath>
#include <memory>

#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/progress.h"
#include "genperf/quantize.h"
#include "genperf/ops.h"
#include "quant/quantize_internal.h"

namespace genperf {
namespace quant {
namespace {

Tensor f32_of(const Checkpoint& ck, const std::string& name) {
  const auto it = ck.tensors.find(name);
  GP_CHECK(it != ck.tensors.end(), "[quantize] ", ck.source, ": missing tensor ", name);
  return it->second.dtype() == DType::F32 && it->second.is_contiguous() ? it->second : it->second.to(DType::F32);
}

}  // namespace

CalibrationModel::CalibrationModel(const Checkpoint& ck) : config_(ck.config), rope_style_(ck.rope_style) {
  config_.validate(ck.source);
  embed_ = f32_of(ck, "model.embed_tokens.weight");
  norm_ = f32_of(ck, "model.norm.weight");
  head_name_ = config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  head_ = config_.tie_word_embeddings ? embed_ : f32_of(ck, head_name_);
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string p = cat("model.layers.", i, ".");
    Layer l;
    l.qkv = {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"};
    l.o = {p + "self_attn.o_proj.weight"};
    l.gate_up = {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"};
    l.down = {p + "mlp.down_proj.weight"};
    l.attn_norm = f32_of(ck, p + "input_layernorm.weight");
    l.wq = f32_of(ck, l.qkv[0]);
    l.wk = f32_of(ck, l.qkv[1]);
    l.wv = f32_of(ck, l.qkv[2]);
    l.wo = f32_of(ck, l.o[0]);
    if (config_.attention_bias) {
      l.bq = f32_of(ck, p + "self_attn.q_proj.bias");
      l.bk = f32_of(ck, p + "self_attn.k_proj.bias");
      l.bv = f32_of(ck, p + "self_attn.v_proj.bias");
    }
    l.ffn_norm = f32_of(ck, p + "post_attention_layernorm.weight");
    l.w_gate = f32_of(ck, l.gate_up[0]);
    l.w_up = f32_of(ck, l.gate_up[1]);
    l.w_down = f32_of(ck, l.down[0]);
    layers_.push_back(std::move(l));
  }
  inv_freq_ = rope_inv_freq(config_);
}

Tensor CalibrationModel::forward(std::span<const int32_t> tokens, const InputObserver& observe) const {
  const auto& c = config_;
  const int64_t T = int64_t(tokens.size());
  GP_CHECK(T > 0 && T <= c.max_position_embeddings, "[quantize] a calibration window of ", T,
           " tokens is outside 1..", c.max_position_embeddings);
  Tensor x = Tensor::zeros({T, c.hidden_size}), h = Tensor::zeros({T, c.hidden_size});
  Tensor q = Tensor::zeros({T, c.q_dim()}), attn = Tensor::zeros({T, c.q_dim()});
  Tensor k = Tensor::zeros({T, c.kv_dim()}), v = Tensor::zeros({T, c.kv_dim()});
  Tensor gate = Tensor::zeros({T, c.intermediate_size}), up = Tensor::zeros({T, c.intermediate_size});
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t);
  const float eps = float(c.rms_norm_eps);
  const float scale = float(1.0 / std::sqrt(double(c.head_dim)));
  auto bias = [](const Tensor& b) { return b.defined() ? &b : nullptr; };

  ops::embedding(embed_, tokens, x);
  for (const Layer& l : layers_) {
    ops::rms_norm(x, l.attn_norm, eps, h);
    observe(l.qkv, h);
    ops::linear(h, l.wq, bias(l.bq), q);
    ops::linear(h, l.wk, bias(l.bk), k);
    ops::linear(h, l.wv, bias(l.bv), v);
    ops::rope(q, c.num_attention_heads, pos, inv_freq_, rope_style_);
    ops::rope(k, c.num_key_value_heads, pos, inv_freq_, rope_style_);
    ops::attention(q, k, v, c.num_attention_heads, c.num_key_value_heads, 0, scale, attn);
    observe(l.o, attn);
    ops::linear(attn, l.wo, nullptr, h);
    ops::add_inplace(x, h);
    ops::rms_norm(x, l.ffn_norm, eps, h);
    observe(l.gate_up, h);
    ops::linear(h, l.w_gate, nullptr, gate);
    ops::linear(h, l.w_up, nullptr, up);
    ops::silu_mul(gate, up, gate);
    observe(l.down, gate);
    ops::linear(gate, l.w_down, nullptr, h);
    ops::add_inplace(x, h);
  }
  ops::rms_norm(x, norm_, eps, h);
  observe({head_name_}, h);
  Tensor logits = Tensor::zeros({T, c.vocab_size});
  ops::linear(h, head_, nullptr, logits);
  return logits;
}

}  // namespace quant

namespace {

// One matmul input's running sums: x_i^2 per column and, optionally, X^T X.
struct InputSums {
  std::vector<std::string> weights;
  std::vector<double> sum_sq, gram;
  int64_t rows = 0;

  void add(const Tensor& x, bool with_gram) {
    const int64_t T = x.size(0), K = x.size(1);
    if (sum_sq.empty()) {
      sum_sq.assign(size_t(K), 0.0);
      if (with_gram) gram.assign(size_t(K * K), 0.0);
    }
    for (int64_t t = 0; t < T; ++t) {
      const float* r = x.row<float>(t);
      for (int64_t i = 0; i < K; ++i) sum_sq[size_t(i)] += double(r[i]) * double(r[i]);
    }
    rows += T;
    if (!with_gram) return;
    // X^T X with the f32 GEMM: xt [K, T] times itself transposed. One window's sum of T products
    // in f32 is accurate to ~1e-6 relative; windows are summed in double.
    Tensor xt = Tensor::zeros({K, T}), g = Tensor::zeros({K, K});
    for (int64_t t = 0; t < T; ++t) {
      const float* r = x.row<float>(t);
      for (int64_t i = 0; i < K; ++i) xt.data<float>()[i * T + t] = r[i];
    }
    ops::linear(xt, xt, nullptr, g);
    const float* gp = g.data<float>();
    for (int64_t i = 0; i < K * K; ++i) gram[size_t(i)] += double(gp[i]);
  }
};

}  // namespace

ActivationStats collect_activation_stats(const Checkpoint& ck, const std::vector<int32_t>& tokens, int64_t ctx,
                                         bool with_gram, int64_t min_tokens, bool progress) {
  GP_CHECK(int64_t(tokens.size()) >= min_tokens, "[quantize] calibration needs at least ", min_tokens,
           " tokens, got ", tokens.size());
  GP_CHECK(!tokens.empty(), "[quantize] calibration needs at least one token");
  const quant::CalibrationModel model(ck);
  const auto& c = model.config();
  GP_CHECK(ctx >= 2 && ctx <= c.max_position_embeddings, "[quantize] calibration context ", ctx,
           " is outside 2..", c.max_position_embeddings, " (max_position_embeddings)");
  for (size_t i = 0; i < tokens.size(); ++i)
    GP_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, "[quantize] calibration token ", tokens[i], " at ", i,
             " is outside the vocabulary of ", c.vocab_size);
  const int32_t bos = ck.tokenizer ? ck.tokenizer->bos_id() : -1;
  const int64_t per_window = bos >= 0 ? ctx - 1 : ctx;

  std::map<std::string, InputSums> sums;  // one per matmul input, keyed by its first weight
  const quant::InputObserver observe = [&](const std::vector<std::string>& weights, const Tensor& x) {
    InputSums& s = sums[weights.front()];
    if (s.weights.empty()) s.weights = weights;
    s.add(x, with_gram);
  };
  const int64_t n = int64_t(tokens.size());
  const int64_t windows = (n + per_window - 1) / per_window;
  std::unique_ptr<Progress> bar;
  if (progress) bar = std::make_unique<Progress>("calibration", windows);
  std::vector<int32_t> input;
  for (int64_t w = 0; w < windows; ++w) {
    const int64_t b = w * per_window, e = std::min(n, b + per_window);
    input.clear();
    if (bos >= 0) input.push_back(bos);
    input.insert(input.end(), tokens.begin() + b, tokens.begin() + e);
    model.forward(input, observe);
    if (bar) bar->update(w + 1);
  }
  if (bar) bar->finish();

  ActivationStats st;
  for (const auto& [key, s] : sums) {
    std::vector<float> ms(s.sum_sq.size());
    for (size_t i = 0; i < ms.size(); ++i) ms[i] = float(s.sum_sq[i] / double(s.rows));
    std::vector<double> g = s.gram;
    for (double& v : g) v /= double(s.rows);
    for (const std::string& name : s.weights) {
      st.mean_sq[name] = ms;
      if (with_gram) st.gram[name] = g;
    }
    st.tokens = s.rows;
  }
  if (!c.tie_word_embeddings)  // a lookup: uniform importance (see quantize.h)
    st.mean_sq["model.embed_tokens.weight"].assign(size_t(c.hidden_size), 1.f);
  return st;
}

}  // namespace genperf

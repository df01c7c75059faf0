// Whole-model forward and backward (graph.h): the parameter layout, the activation buffers and
// their accounting, and the order in which the layer functions run.
#include "train/graph.h"

#include <algorithm>

#include "genperf/error.h"
#include "genperf/runtime.h"

namespace genperf::train {
namespace {

std::string layer_name(int64_t i, const char* rest) { return cat("model.layers.", i, ".", rest); }

// Elements of every buffer for one shape. Allocation and accounting both read this, so they
// cannot disagree.
struct BufferSizes {
  size_t res, h1, rstd1, qkv, att, scores, xmid, h2, rstd2, gu, act;  // forward
  size_t hf, rstdf, logits, lse;                                      // head
  size_t dres, dh, dtmp, dqkv, dbuf, dgu;                             // backward scratch
  size_t attn_scratch;  // allocated inside the attention functions while they run
};

BufferSizes buffer_sizes(const LlamaConfig& c, const TrainOptions& o, int64_t B, int64_t T,
                         int threads) {
  const auto N = size_t(B * T), C = size_t(c.hidden_size), FF = size_t(c.intermediate_size);
  const auto L = size_t(c.num_hidden_layers), V = size_t(c.vocab_size);
  const auto NH = size_t(c.num_attention_heads), HS = size_t(c.head_dim);
  const size_t QKV = size_t(c.q_dim() + 2 * c.kv_dim()), AO = size_t(c.q_dim());
  const size_t kept = o.checkpoint_layers ? 1 : L;  // layers whose activations are held at once
  const bool naive = o.attention == AttentionMode::Naive;
  const size_t scores = naive ? size_t(B) * NH * size_t(T) * size_t(T) : size_t(B) * NH * size_t(T);
  AttnShape s;
  s.B = B, s.T = T, s.NH = c.num_attention_heads, s.NKV = c.num_key_value_heads, s.HS = c.head_dim;
  // As attention.cpp's backward carves its per-thread scratch.
  const auto tile_scratch = size_t(2 * s.HS * s.k_tile + 2 * s.q_tile * s.k_tile + 2 * s.k_tile * s.HS + T);
  const size_t per_thread = naive ? HS * size_t(T) + size_t(T) * size_t(T) : tile_scratch;
  BufferSizes b{};
  b.res = (L + 1) * N * C;
  b.h1 = b.xmid = b.h2 = kept * N * C;
  b.rstd1 = b.rstd2 = kept * N;
  b.qkv = kept * N * QKV;
  b.att = kept * N * AO;
  b.scores = kept * scores;
  b.gu = kept * N * 2 * FF;
  b.act = kept * N * FF;
  b.hf = N * C;
  b.rstdf = b.lse = N;
  b.logits = N * V;
  b.dres = b.dh = b.dtmp = N * C;
  b.dqkv = N * QKV;
  b.dbuf = N * std::max(FF, AO);
  b.dgu = N * 2 * FF;
  b.attn_scratch = size_t(threads) * per_thread + size_t(attention_gqa_scratch(s));
  return b;
}

}  // namespace

ParamLayout param_layout(const LlamaConfig& c) {
  c.validate("train");
  ParamLayout L;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool decay) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    L.params.push_back({name, std::move(shape), L.total, n, decay});
    L.total += n;
    return L.params.back().offset;
  };
  const int64_t C = c.hidden_size, FF = c.intermediate_size, V = c.vocab_size;
  L.embed = add("model.embed_tokens.weight", {V, C}, true);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerOffsets o;
    o.attn_norm = add(layer_name(i, "input_layernorm.weight"), {C}, false);
    o.wqkv = add(layer_name(i, "self_attn.q_proj.weight"), {c.q_dim(), C}, true);
    add(layer_name(i, "self_attn.k_proj.weight"), {c.kv_dim(), C}, true);
    add(layer_name(i, "self_attn.v_proj.weight"), {c.kv_dim(), C}, true);
    o.has_bias = c.attention_bias;
    if (o.has_bias) {
      o.bqkv = add(layer_name(i, "self_attn.q_proj.bias"), {c.q_dim()}, false);
      add(layer_name(i, "self_attn.k_proj.bias"), {c.kv_dim()}, false);
      add(layer_name(i, "self_attn.v_proj.bias"), {c.kv_dim()}, false);
    }
    o.wo = add(layer_name(i, "self_attn.o_proj.weight"), {C, c.q_dim()}, true);
    o.ffn_norm = add(layer_name(i, "post_attention_layernorm.weight"), {C}, false);
    o.wgu = add(layer_name(i, "mlp.gate_proj.weight"), {FF, C}, true);
    add(layer_name(i, "mlp.up_proj.weight"), {FF, C}, true);
    o.wdown = add(layer_name(i, "mlp.down_proj.weight"), {C, FF}, true);
    L.layers.push_back(o);
  }
  L.norm = add("model.norm.weight", {C}, false);
  L.lm_head = c.tie_word_embeddings ? L.embed : add("lm_head.weight", {V, C}, true);
  return L;
}

ActivationMemory activation_elements(const LlamaConfig& c, const TrainOptions& o, int64_t B,
                                     int64_t T, int threads) {
  const BufferSizes b = buffer_sizes(c, o, B, T, threads);
  ActivationMemory m;
  m.residual = b.res + b.xmid;
  m.norms = b.h1 + b.rstd1 + b.h2 + b.rstd2 + b.hf + b.rstdf;
  m.qkv = b.qkv;
  m.attention = b.att;
  m.attention_scores = b.scores;
  m.mlp = b.gu + b.act;
  m.logits = b.logits + b.lse;
  m.backward = b.dres + b.dh + b.dtmp + b.dqkv + b.dbuf + b.dgu;
  m.attention_backward = b.attn_scratch;
  return m;
}

// ------------------------------------------------------------------------------------------

template <typename F>
LlamaGraph<F>::LlamaGraph(const LlamaConfig& c, RopeStyle rope, TrainOptions o)
    : config_(c), rope_style_(rope), options_(o), layout_(param_layout(c)),
      inv_freq_(rope_inv_freq(c)) {}

template <typename F>
void LlamaGraph<F>::set_options(TrainOptions o) {
  options_ = o;
  B_ = T_ = 0;  // buffers are sized for the mode; reallocate on the next forward
  have_forward_ = false;
}

template <typename F>
void LlamaGraph<F>::allocate(int64_t B, int64_t T) {
  if (B == B_ && T == T_) return;
  const BufferSizes b = buffer_sizes(config_, options_, B, T, num_threads());
  for (auto [v, n] : {std::pair{&res_, b.res}, {&h1_, b.h1}, {&rstd1_, b.rstd1}, {&qkv_, b.qkv},
                      {&att_, b.att}, {&scores_, b.scores}, {&xmid_, b.xmid}, {&h2_, b.h2},
                      {&rstd2_, b.rstd2}, {&gu_, b.gu}, {&act_, b.act}, {&hf_, b.hf},
                      {&rstdf_, b.rstdf}, {&logits_, b.logits}, {&lse_, b.lse}, {&dres_, b.dres},
                      {&dh_, b.dh}, {&dtmp_, b.dtmp}, {&dqkv_, b.dqkv}, {&dbuf_, b.dbuf},
                      {&dgu_, b.dgu}})
    *v = std::vector<F>(n);
  rope_ = rope_table<F>(inv_freq_, T);
  B_ = B;
  T_ = T;
}

template <typename F>
ActivationMemory LlamaGraph<F>::memory() const {
  ActivationMemory m = activation_elements(config_, options_, B_, T_, num_threads());
  for (size_t* f : {&m.residual, &m.norms, &m.qkv, &m.attention, &m.attention_scores, &m.mlp,
                    &m.logits, &m.backward, &m.attention_backward})
    *f *= sizeof(F);
  return m;
}

template <typename F>
typename LlamaGraph<F>::LayerActs LlamaGraph<F>::acts(int64_t l) {
  const auto i = size_t(options_.checkpoint_layers ? 0 : l);
  const size_t N = size_t(B_ * T_), C = size_t(config_.hidden_size);
  const size_t FF = size_t(config_.intermediate_size), AO = size_t(config_.q_dim());
  const size_t QKV = size_t(config_.q_dim() + 2 * config_.kv_dim());
  const size_t per_scores = scores_.size() / (options_.checkpoint_layers ? 1 : size_t(config_.num_hidden_layers));
  return {h1_.data() + i * N * C,     rstd1_.data() + i * N,       qkv_.data() + i * N * QKV,
          att_.data() + i * N * AO,   scores_.data() + i * per_scores, xmid_.data() + i * N * C,
          h2_.data() + i * N * C,     rstd2_.data() + i * N,       gu_.data() + i * N * 2 * FF,
          act_.data() + i * N * FF};
}

template <typename F>
AttnShape LlamaGraph<F>::attn_shape() const {
  AttnShape s;
  s.B = B_, s.T = T_, s.NH = config_.num_attention_heads, s.NKV = config_.num_key_value_heads;
  s.HS = config_.head_dim;
  return s;
}

// x -> xmid = x + o_proj(attention(rope(qkv(norm(x))))) -> out = xmid + down(swiglu(gu(norm(xmid)))).
template <typename F>
void LlamaGraph<F>::layer_forward(const F* p, int64_t l, const F* x, F* out) {
  const LayerOffsets& o = layout_.layers[size_t(l)];
  const LayerActs a = acts(l);
  const auto& c = config_;
  const int64_t N = B_ * T_, C = c.hidden_size, FF = c.intermediate_size, AO = c.q_dim();
  const int64_t QKV = c.q_dim() + 2 * c.kv_dim();
  const AttnShape s = attn_shape();
  rmsnorm_forward(a.h1, a.rstd1, x, p + o.attn_norm, N, C, c.rms_norm_eps);
  matmul_forward(a.qkv, a.h1, p + o.wqkv, o.has_bias ? p + o.bqkv : nullptr, N, C, QKV);
  // q and k heads are adjacent in the row: one pass rotates both.
  rope_forward(a.qkv, QKV, N, s.NH + s.NKV, s.HS, rope_, rope_style_);
  if (options_.attention == AttentionMode::Naive)
    attention_forward_naive(a.att, a.scores, a.qkv, s);
  else
    attention_forward_flash(a.att, a.scores, a.qkv, s);
  matmul_forward(a.xmid, a.att, p + o.wo, static_cast<const F*>(nullptr), N, AO, C);
  residual_forward(a.xmid, x, a.xmid, N * C);
  rmsnorm_forward(a.h2, a.rstd2, a.xmid, p + o.ffn_norm, N, C, c.rms_norm_eps);
  matmul_forward(a.gu, a.h2, p + o.wgu, static_cast<const F*>(nullptr), N, C, 2 * FF);
  swiglu_forward(a.act, a.gu, N, FF);
  if (!out) return;
  matmul_forward(out, a.act, p + o.wdown, static_cast<const F*>(nullptr), N, FF, C);
  residual_forward(out, a.xmid, out, N * C);
}

template <typename F>
void LlamaGraph<F>::layer_backward(const F* p, F* g, int64_t l, const F* x, F* dres) {
  const LayerOffsets& o = layout_.layers[size_t(l)];
  const LayerActs a = acts(l);
  const auto& c = config_;
  const int64_t N = B_ * T_, C = c.hidden_size, FF = c.intermediate_size, AO = c.q_dim();
  const int64_t QKV = c.q_dim() + 2 * c.kv_dim();
  const AttnShape s = attn_shape();
  F *dbuf = dbuf_.data(), *dh = dh_.data(), *dtmp = dtmp_.data(), *dqkv = dqkv_.data();
  // MLP branch; dres holds d(out) and becomes d(xmid).
  matmul_backward(dbuf, g + o.wdown, static_cast<F*>(nullptr), dres, a.act, p + o.wdown, N, FF, C);
  swiglu_backward(dgu_.data(), dbuf, a.gu, N, FF);
  matmul_backward(dh, g + o.wgu, static_cast<F*>(nullptr), dgu_.data(), a.h2, p + o.wgu, N, C, 2 * FF);
  rmsnorm_backward(dtmp, g + o.ffn_norm, dh, a.xmid, p + o.ffn_norm, a.rstd2, N, C);
  residual_backward(dres, dtmp, N * C);
  // Attention branch; dres becomes d(x).
  matmul_backward(dbuf, g + o.wo, static_cast<F*>(nullptr), dres, a.att, p + o.wo, N, AO, C);
  if (options_.attention == AttentionMode::Naive)
    attention_backward_naive(dqkv, dbuf, a.qkv, a.scores, s);
  else
    attention_backward_flash(dqkv, dbuf, a.qkv, a.att, a.scores, s);
  rope_backward(dqkv, QKV, N, s.NH + s.NKV, s.HS, rope_, rope_style_);
  matmul_backward(dh, g + o.wqkv, o.has_bias ? g + o.bqkv : nullptr, dqkv, a.h1, p + o.wqkv, N, C, QKV);
  rmsnorm_backward(dtmp, g + o.attn_norm, dh, x, p + o.attn_norm, a.rstd1, N, C);
  residual_backward(dres, dtmp, N * C);
}

template <typename F>
double LlamaGraph<F>::forward(const F* p, std::span<const int32_t> tokens,
                              std::span<const int32_t> targets, int64_t B, int64_t T) {
  const auto& c = config_;
  GP_CHECK(B > 0 && T > 0, "[train] forward needs a batch of at least 1 x 1 tokens, got ", B, " x ", T);
  GP_CHECK(int64_t(tokens.size()) == B * T && int64_t(targets.size()) == B * T, "[train] ",
           tokens.size(), " tokens and ", targets.size(), " targets for a batch of ", B, " x ", T);
  GP_CHECK(T <= c.max_position_embeddings, "[train] sequences of ", T,
           " tokens exceed max_position_embeddings ", c.max_position_embeddings);
  allocate(B, T);
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  const int64_t N = B * T, C = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  have_forward_ = false;
  embedding_forward(res_.data(), tokens_.data(), p + layout_.embed, N, C, V);
  for (int64_t l = 0; l < L; ++l)
    layer_forward(p, l, res_.data() + l * N * C, res_.data() + (l + 1) * N * C);
  rmsnorm_forward(hf_.data(), rstdf_.data(), res_.data() + L * N * C, p + layout_.norm, N, C,
                  c.rms_norm_eps);
  matmul_forward(logits_.data(), hf_.data(), p + layout_.lm_head, static_cast<const F*>(nullptr), N, C, V);
  const double sum = crossentropy_forward(lse_.data(), logits_.data(), targets_.data(), N, V, &scored_);
  have_forward_ = true;
  return scored_ ? sum / double(scored_) : 0.0;
}

template <typename F>
void LlamaGraph<F>::backward(const F* p, F* g, double loss_scale) {
  GP_CHECK(have_forward_, "[train] backward needs a forward just before it (one backward per forward)");
  have_forward_ = false;
  const auto& c = config_;
  const int64_t N = B_ * T_, C = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  F* dlogits = logits_.data();  // the logits are not needed after their gradient
  crossentropy_backward(dlogits, logits_.data(), lse_.data(), targets_.data(), N, V,
                        scored_ ? loss_scale / double(scored_) : 0.0);
  matmul_backward(dh_.data(), g + layout_.lm_head, static_cast<F*>(nullptr), dlogits, hf_.data(),
                  p + layout_.lm_head, N, C, V);
  rmsnorm_backward(dres_.data(), g + layout_.norm, dh_.data(), res_.data() + L * N * C,
                   p + layout_.norm, rstdf_.data(), N, C);
  for (int64_t l = L - 1; l >= 0; --l) {
    const F* x = res_.data() + l * N * C;
    // With checkpointing the shared buffers still hold the last layer from the forward.
    if (options_.checkpoint_layers && l != L - 1) layer_forward(p, l, x, nullptr);
    layer_backward(p, g, l, x, dres_.data());
  }
  embedding_backward(g + layout_.embed, dres_.data(), tokens_.data(), N, C);
}

template class LlamaGraph<float>;
template class LlamaGraph<double>;

}  // namespace genperf::train

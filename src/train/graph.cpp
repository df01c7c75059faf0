// Whole-model forward and backward (graph.h): the parameter layout, the activation buffers and
// their accounting, and the order in which the layer functions run.
#include "train/graph.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "genperf/error.h"
#include "genperf/runtime.h"
#include "models/llama/forward.h"
#include "models/llama/names.h"

namespace genperf::train {
namespace {


// Elements of every buffer for one shape. Allocation and accounting both read this, so they
// cannot disagree.
struct BufferSizes {
  size_t res, h1, rstd1, qkv, att, scores, xmid, h2, rstd2, gu, act;  // forward
  size_t hf, rstdf, logits, lse;                                      // head
  size_t dres, dh, dtmp, dqkv, dbuf, dgu;                             // backward scratch
  size_t attn_scratch;  // allocated inside the attention functions while they run
  size_t bf16_inp, bf16_dout, bf16_w;  // bf16 operands (2-byte elements)
  size_t lora_v, lora_x, lora_dv;      // LoRA
};

// bf16: the matmuls run in bf16 (a float graph whose effective precision is Bf16).
BufferSizes buffer_sizes(const LlamaConfig& c, const TrainOptions& o, int64_t B, int64_t T,
                         int threads, bool bf16, const LoraLayout* lora) {
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
  if (bf16) {
    // Every layer matmul fits whole; the lm_head runs in blocks of output channels (genperf/ops_train.h).
    b.bf16_inp = N * std::max({C, AO, FF});
    b.bf16_dout = N * std::max({QKV, C, 2 * FF});
    b.bf16_w = std::max({QKV * C, C * AO, 2 * FF * C, C * FF});
  }
  if (lora) {
    const auto r = size_t(lora->config.rank);
    b.lora_v = lora->adapters.size() * N * r;
    b.lora_x = lora->config.dropout > 0 ? N * size_t(lora->max_in) : 0;
    b.lora_dv = N * r;
  }
  return b;
}

ActivationMemory to_bytes(const BufferSizes& b, size_t float_bytes) {
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
  m.lora = b.lora_v + b.lora_x + b.lora_dv;
  for (size_t* f : {&m.residual, &m.norms, &m.qkv, &m.attention, &m.attention_scores, &m.mlp,
                    &m.logits, &m.backward, &m.attention_backward, &m.lora})
    *f *= float_bytes;
  m.bf16_operands = (b.bf16_inp + b.bf16_dout + b.bf16_w) * sizeof(uint16_t);
  return m;
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
  L.embed = add(llama::kEmbed, {V, C}, true);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerOffsets o;
    o.attn_norm = add(llama::layer_tensor(i, llama::kAttnNorm), {C}, false);
    o.wqkv = add(llama::layer_tensor(i, llama::kQ), {c.q_dim(), C}, true);
    add(llama::layer_tensor(i, llama::kK), {c.kv_dim(), C}, true);
    add(llama::layer_tensor(i, llama::kV), {c.kv_dim(), C}, true);
    o.has_bias = c.attention_bias;
    if (o.has_bias) {
      o.bqkv = add(llama::layer_tensor(i, llama::kQBias), {c.q_dim()}, false);
      add(llama::layer_tensor(i, llama::kKBias), {c.kv_dim()}, false);
      add(llama::layer_tensor(i, llama::kVBias), {c.kv_dim()}, false);
    }
    o.wo = add(llama::layer_tensor(i, llama::kO), {C, c.q_dim()}, true);
    o.ffn_norm = add(llama::layer_tensor(i, llama::kFfnNorm), {C}, false);
    o.wgu = add(llama::layer_tensor(i, llama::kGate), {FF, C}, true);
    add(llama::layer_tensor(i, llama::kUp), {FF, C}, true);
    o.wdown = add(llama::layer_tensor(i, llama::kDown), {C, FF}, true);
    L.layers.push_back(o);
  }
  L.norm = add(llama::kFinalNorm, {C}, false);
  L.lm_head = c.tie_word_embeddings ? L.embed : add(llama::kHead, {V, C}, true);
  return L;
}

LoraLayout lora_layout(const LlamaConfig& c, const ParamLayout& base, const LoraConfig& cfg) {
  cfg.validate();
  LoraLayout L;
  L.config = cfg;
  const int64_t C = c.hidden_size, FF = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim();
  const int64_t QKV = Q + 2 * KV, r = cfg.rank;
  const auto& names = lora_target_names();
  std::array<bool, kLoraTargets> on{};
  for (const std::string& t : cfg.targets)
    on[size_t(std::find(names.begin(), names.end(), t) - names.begin())] = true;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerOffsets& o = base.layers[size_t(l)];
    // in, out, first output column, output row stride, base weight rows
    const int64_t geom[kLoraTargets][5] = {{C, Q, 0, QKV, int64_t(o.wqkv)},
                                           {C, KV, Q, QKV, int64_t(o.wqkv + size_t(Q * C))},
                                           {C, KV, Q + KV, QKV, int64_t(o.wqkv + size_t((Q + KV) * C))},
                                           {Q, C, 0, C, int64_t(o.wo)},
                                           {C, FF, 0, 2 * FF, int64_t(o.wgu)},
                                           {C, FF, FF, 2 * FF, int64_t(o.wgu + size_t(FF * C))},
                                           {FF, C, 0, C, int64_t(o.wdown)}};
    auto& idx = L.index.emplace_back();
    idx.fill(-1);
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!on[size_t(t)]) continue;
      const auto* g = geom[t];
      LoraAdapter ad{l, LoraTarget(t), g[0], g[1], g[2], g[3], 0, 0, size_t(g[4])};
      const std::string prefix = "base_model.model." + llama::module_path(l, names[size_t(t)]);
      ad.a = L.total;
      L.params.push_back({prefix + ".lora_A.weight", {r, ad.in}, L.total, size_t(r * ad.in), true});
      L.total += size_t(r * ad.in);
      ad.b = L.total;
      L.params.push_back({prefix + ".lora_B.weight", {ad.out, r}, L.total, size_t(ad.out * r), true});
      L.total += size_t(ad.out * r);
      L.max_in = std::max(L.max_in, ad.in);
      idx[size_t(t)] = int(L.adapters.size());
      L.adapters.push_back(ad);
    }
  }
  return L;
}

ActivationMemory activation_bytes(const LlamaConfig& c, const TrainOptions& o, int64_t B,
                                  int64_t T, int threads, const LoraLayout* lora, bool as_requested) {
  const bool bf16 = (as_requested ? o.precision : effective_precision(o.precision)) == Precision::Bf16;
  return to_bytes(buffer_sizes(c, o, B, T, threads, bf16, lora), sizeof(float));
}

// ------------------------------------------------------------------------------------------

template <typename F>
LlamaGraph<F>::LlamaGraph(const LlamaConfig& c, RopeStyle rope, TrainOptions o)
    : config_(c), rope_style_(rope), layout_(param_layout(c)), inv_freq_(rope_inv_freq(c)) {
  set_options(o);
}

template <typename F>
void LlamaGraph<F>::set_options(TrainOptions o) {
  options_ = o;
  // The float64 (gradient-check) path ignores the precision.
  bf16_ = std::is_same_v<F, float> && effective_precision(o.precision) == Precision::Bf16;
  B_ = T_ = 0;  // buffers are sized for the mode; reallocate on the next forward
  have_forward_ = false;
}

template <typename F>
void LlamaGraph<F>::set_lora(const LoraConfig* cfg) {
  if (cfg) lora_ = lora_layout(config_, layout_, *cfg);
  else lora_.reset();
  B_ = T_ = 0;
  have_forward_ = false;
}

template <typename F>
void LlamaGraph<F>::allocate(int64_t B, int64_t T) {
  if (B == B_ && T == T_) return;
  const BufferSizes b = buffer_sizes(config_, options_, B, T, num_threads(), bf16_, lora());
  for (auto [v, n] : {std::pair{&res_, b.res}, {&h1_, b.h1}, {&rstd1_, b.rstd1}, {&qkv_, b.qkv},
                      {&att_, b.att}, {&scores_, b.scores}, {&xmid_, b.xmid}, {&h2_, b.h2},
                      {&rstd2_, b.rstd2}, {&gu_, b.gu}, {&act_, b.act}, {&hf_, b.hf},
                      {&rstdf_, b.rstdf}, {&logits_, b.logits}, {&lse_, b.lse}, {&dres_, b.dres},
                      {&dh_, b.dh}, {&dtmp_, b.dtmp}, {&dqkv_, b.dqkv}, {&dbuf_, b.dbuf},
                      {&dgu_, b.dgu}, {&lora_v_, b.lora_v}, {&lora_x_, b.lora_x},
                      {&lora_dv_, b.lora_dv}})
    *v = std::vector<F>(n);
  for (auto [v, n] : {std::pair{&bf16_inp_, b.bf16_inp}, {&bf16_dout_, b.bf16_dout}, {&bf16_w_, b.bf16_w}})
    *v = std::vector<uint16_t>(n);
  bf16_ops_ = {bf16_inp_, bf16_dout_, bf16_w_};
  rope_ = rope_table<F>(inv_freq_, T);
  B_ = B;
  T_ = T;
}

template <typename F>
ActivationMemory LlamaGraph<F>::memory() const {
  return to_bytes(buffer_sizes(config_, options_, B_, T_, num_threads(), bf16_, lora()), sizeof(F));
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

// The layer's adapter on target t, if any (lora_layout's geometry).
template <typename F>
void LlamaGraph<F>::lora_forward(int64_t l, LoraTarget t, const F* x, F* y) {
  if (!lora_) return;
  const int ai = lora_->index[size_t(l)][size_t(t)];
  if (ai < 0) return;
  const LoraAdapter& ad = lora_->adapters[size_t(ai)];
  const LoraConfig& lc = lora_->config;
  const int64_t N = B_ * T_, r = lc.rank;
  const LoraShape s{N, ad.in, ad.out, r, double(lc.alpha) / double(r), lora_drop_ ? double(lc.dropout) : 0.0,
                    lora_key(lc.seed, drop_step_, drop_micro_, l, int(t))};
  train::lora_forward(y + ad.col, ad.ld, lora_v_.data() + size_t(ai) * size_t(N * r), lora_x_.data(), x,
                      lora_p_ + ad.a, lora_p_ + ad.b, s);
}

template <typename F>
void LlamaGraph<F>::lora_backward(int64_t l, LoraTarget t, const F* x, const F* dy, F* dx) {
  if (!lora_) return;
  const int ai = lora_->index[size_t(l)][size_t(t)];
  if (ai < 0) return;
  const LoraAdapter& ad = lora_->adapters[size_t(ai)];
  const LoraConfig& lc = lora_->config;
  const int64_t N = B_ * T_, r = lc.rank;
  const LoraShape s{N, ad.in, ad.out, r, double(lc.alpha) / double(r), lora_drop_ ? double(lc.dropout) : 0.0,
                    lora_key(lc.seed, drop_step_, drop_micro_, l, int(t))};
  train::lora_backward(dx, lora_g_ + ad.a, lora_g_ + ad.b, dy + ad.col, ad.ld, x,
                       lora_v_.data() + size_t(ai) * size_t(N * r), lora_p_ + ad.a, lora_p_ + ad.b,
                       lora_x_.data(), lora_dv_.data(), s);
}

// The training executor of the one Llama forward (models/llama/forward.h): block l reads its
// input x from the residual stream's buffer and writes its output after it, saving what backward
// needs in its LayerActs. Adapters add to their base matmul's output before anything reads it
// (q and k before RoPE). With recompute (layer checkpointing) a block rebuilds its saved
// activations only, and stops after swiglu: its output is already stored.
template <typename F>
struct LlamaGraph<F>::Step {
  LlamaGraph& g;
  const F* p;
  bool recompute;
  const LlamaConfig& c = g.config_;
  const int64_t N = g.B_ * g.T_, C = c.hidden_size, FF = c.intermediate_size, AO = c.q_dim();
  const int64_t QKV = c.q_dim() + 2 * c.kv_dim(), V = c.vocab_size;
  const AttnShape s = g.attn_shape();
  const Bf16Scratch* bf = g.bf16_scratch();
  const F* none = nullptr;
  // Block l's parameters, saved activations, input and output.
  int64_t cur = -1;
  const LayerOffsets* o = nullptr;
  LayerActs a{};
  const F* x = nullptr;
  F* out = nullptr;

  void at(int64_t l) {
    if (l == cur) return;
    cur = l, o = &g.layout_.layers[size_t(l)], a = g.acts(l);
    x = g.res_.data() + l * N * C;
    out = recompute ? nullptr : g.res_.data() + (l + 1) * N * C;
  }
  void lora(int64_t l, std::initializer_list<LoraTarget> ts, const F* in, F* y) {
    for (LoraTarget t : ts) g.lora_forward(l, t, in, y);
  }

  // Parameter units are announced around their use (LlamaGraph::on_params), except when
  // backward recomputes a layer, whose unit backward has announced.
  void params(int64_t unit, bool done) {
    if (g.on_params && !recompute) g.on_params(unit, done, false);
  }
  void embed() {
    params(0, false);
    embedding_forward(g.res_.data(), g.tokens_.data(), p + g.layout_.embed, N, C, V);
    params(0, true);
  }
  void attn_norm(int64_t l) {
    at(l);
    params(1 + l, false);
    rmsnorm_forward(a.h1, a.rstd1, x, p + o->attn_norm, N, C, c.rms_norm_eps);
  }
  void qkv(int64_t l) {
    at(l);
    matmul_forward(a.qkv, a.h1, p + o->wqkv, o->has_bias ? p + o->bqkv : none, N, C, QKV, bf);
    lora(l, {LoraTarget::Q, LoraTarget::K, LoraTarget::V}, a.h1, a.qkv);
  }
  void rope(int64_t l) {  // q and k heads are adjacent in the row: one pass rotates both
    at(l);
    rope_forward(a.qkv, QKV, N, s.NH + s.NKV, s.HS, g.rope_, g.rope_style_);
  }
  void attention(int64_t l) {
    at(l);
    if (g.options_.attention == AttentionMode::Naive)
      attention_forward_naive(a.att, a.scores, a.qkv, s);
    else
      attention_forward_flash(a.att, a.scores, a.qkv, s);
  }
  void o_proj(int64_t l) {
    at(l);
    matmul_forward(a.xmid, a.att, p + o->wo, none, N, AO, C, bf);
    lora(l, {LoraTarget::O}, a.att, a.xmid);
  }
  void residual_attn(int64_t l) {
    at(l);
    residual_forward(a.xmid, x, a.xmid, N * C);
  }
  void ffn_norm(int64_t l) {
    at(l);
    rmsnorm_forward(a.h2, a.rstd2, a.xmid, p + o->ffn_norm, N, C, c.rms_norm_eps);
  }
  void gate_up(int64_t l) {
    at(l);
    matmul_forward(a.gu, a.h2, p + o->wgu, none, N, C, 2 * FF, bf);
    lora(l, {LoraTarget::Gate, LoraTarget::Up}, a.h2, a.gu);
  }
  void swiglu(int64_t l) {
    at(l);
    swiglu_forward(a.act, a.gu, N, FF);
  }
  void down(int64_t l) {  // recompute: the down adapter's saved v is per layer, still valid
    at(l);
    if (!out) return;
    matmul_forward(out, a.act, p + o->wdown, none, N, FF, C, bf);
    lora(l, {LoraTarget::Down}, a.act, out);
  }
  void residual_ffn(int64_t l) {
    at(l);
    if (out) residual_forward(out, a.xmid, out, N * C);
    params(1 + l, true);
  }
  void final_norm() {
    params(c.num_hidden_layers + 1, false);
    rmsnorm_forward(g.hf_.data(), g.rstdf_.data(), g.res_.data() + c.num_hidden_layers * N * C,
                    p + g.layout_.norm, N, C, c.rms_norm_eps);
  }
  void head() {
    matmul_forward(g.logits_.data(), g.hf_.data(), p + g.layout_.lm_head, none, N, C, V, bf);
    params(c.num_hidden_layers + 1, true);
  }
};

template <typename F>
void LlamaGraph<F>::layer_backward(const F* p, F* g, int64_t l, const F* x, F* dres) {
  const LayerOffsets& o = layout_.layers[size_t(l)];
  const LayerActs a = acts(l);
  const auto& c = config_;
  const int64_t N = B_ * T_, C = c.hidden_size, FF = c.intermediate_size, AO = c.q_dim();
  const int64_t QKV = c.q_dim() + 2 * c.kv_dim();
  const AttnShape s = attn_shape();
  const Bf16Scratch* bf = bf16_scratch();
  auto grad = [g](size_t offset) { return g ? g + offset : nullptr; };  // null: frozen
  F *dbuf = dbuf_.data(), *dh = dh_.data(), *dtmp = dtmp_.data(), *dqkv = dqkv_.data();
  F *dgu = dgu_.data(), *none = nullptr;
  // MLP branch; dres holds d(out) and becomes d(xmid).
  matmul_backward(dbuf, grad(o.wdown), none, dres, a.act, p + o.wdown, N, FF, C, bf);
  lora_backward(l, LoraTarget::Down, a.act, dres, dbuf);
  swiglu_backward(dgu, dbuf, a.gu, N, FF);
  matmul_backward(dh, grad(o.wgu), none, dgu, a.h2, p + o.wgu, N, C, 2 * FF, bf);
  lora_backward(l, LoraTarget::Gate, a.h2, dgu, dh);
  lora_backward(l, LoraTarget::Up, a.h2, dgu, dh);
  rmsnorm_backward(dtmp, grad(o.ffn_norm), dh, a.xmid, p + o.ffn_norm, a.rstd2, N, C);
  residual_backward(dres, dtmp, N * C);
  // Attention branch; dres becomes d(x).
  matmul_backward(dbuf, grad(o.wo), none, dres, a.att, p + o.wo, N, AO, C, bf);
  lora_backward(l, LoraTarget::O, a.att, dres, dbuf);
  if (options_.attention == AttentionMode::Naive)
    attention_backward_naive(dqkv, dbuf, a.qkv, a.scores, s);
  else
    attention_backward_flash(dqkv, dbuf, a.qkv, a.att, a.scores, s);
  rope_backward(dqkv, QKV, N, s.NH + s.NKV, s.HS, rope_, rope_style_);
  matmul_backward(dh, grad(o.wqkv), o.has_bias ? grad(o.bqkv) : none, dqkv, a.h1, p + o.wqkv, N, C,
                  QKV, bf);
  for (LoraTarget t : {LoraTarget::Q, LoraTarget::K, LoraTarget::V}) lora_backward(l, t, a.h1, dqkv, dh);
  rmsnorm_backward(dtmp, grad(o.attn_norm), dh, x, p + o.attn_norm, a.rstd1, N, C);
  residual_backward(dres, dtmp, N * C);
}

template <typename F>
double LlamaGraph<F>::forward(const F* p, std::span<const int32_t> tokens,
                              std::span<const int32_t> targets, int64_t B, int64_t T,
                              const F* adapters) {
  const auto& c = config_;
  GP_CHECK(B > 0 && T > 0, "[train] forward needs a batch of at least 1 x 1 tokens, got ", B, " x ", T);
  GP_CHECK(int64_t(tokens.size()) == B * T && int64_t(targets.size()) == B * T, "[train] ",
           tokens.size(), " tokens and ", targets.size(), " targets for a batch of ", B, " x ", T);
  GP_CHECK(T <= c.max_position_embeddings, "[train] sequences of ", T,
           " tokens exceed max_position_embeddings ", c.max_position_embeddings);
  GP_CHECK(!lora_ || adapters, "[train] LoRA is on: forward needs the adapter buffer");
  allocate(B, T);
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  lora_p_ = lora_ ? adapters : nullptr;
  lora_drop_ = lora_ && training_ && lora_->config.dropout > 0;
  drop_step_ = lora_step_;
  drop_micro_ = lora_micro_;
  if (lora_ && training_) ++lora_micro_;
  const int64_t N = B * T, V = c.vocab_size, L = c.num_hidden_layers;
  have_forward_ = false;
  Step e{*this, p, false};
  llama::forward(e, L);
  const double sum = crossentropy_forward(lse_.data(), logits_.data(), targets_.data(), N, V, &scored_);
  have_forward_ = true;
  return scored_ ? sum / double(scored_) : 0.0;
}

template <typename F>
void LlamaGraph<F>::backward(const F* p, F* g, double loss_scale, const F* adapters,
                             F* adapter_grads) {
  GP_CHECK(have_forward_, "[train] backward needs a forward just before it (one backward per forward)");
  GP_CHECK(!lora_ || (adapters == lora_p_ && adapter_grads), "[train] LoRA is on: backward needs "
           "the forward's adapter buffer and an adapter gradient buffer");
  have_forward_ = false;
  lora_g_ = adapter_grads;
  const auto& c = config_;
  const int64_t N = B_ * T_, C = c.hidden_size, V = c.vocab_size, L = c.num_hidden_layers;
  F* dlogits = logits_.data();  // the logits are not needed after their gradient
  if (on_params) on_params(L + 1, false, true);
  crossentropy_backward(dlogits, logits_.data(), lse_.data(), targets_.data(), N, V,
                        scored_ ? loss_scale / double(scored_) : 0.0);
  matmul_backward(dh_.data(), g ? g + layout_.lm_head : nullptr, static_cast<F*>(nullptr), dlogits,
                  hf_.data(), p + layout_.lm_head, N, C, V, bf16_scratch());
  rmsnorm_backward(dres_.data(), g ? g + layout_.norm : nullptr, dh_.data(), res_.data() + L * N * C,
                   p + layout_.norm, rstdf_.data(), N, C);
  if (on_params) on_params(L + 1, true, true);
  if (on_grads_ready) on_grads_ready(L);
  for (int64_t l = L - 1; l >= 0; --l) {
    const F* x = res_.data() + l * N * C;
    if (on_params) on_params(1 + l, false, true);
    // With checkpointing the shared buffers still hold the last layer from the forward.
    if (options_.checkpoint_layers && l != L - 1) {
      Step e{*this, p, true};
      llama::block_forward(e, l);
    }
    layer_backward(p, g, l, x, dres_.data());
    if (on_params) on_params(1 + l, true, true);
    if (on_grads_ready) on_grads_ready(l);
  }
  if (g) embedding_backward(g + layout_.embed, dres_.data(), tokens_.data(), N, C);
  lora_g_ = nullptr;
  if (on_grads_ready) on_grads_ready(-1);
}

template class LlamaGraph<float>;
template class LlamaGraph<double>;

}  // namespace genperf::train

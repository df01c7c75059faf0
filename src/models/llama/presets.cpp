// Built-in model shapes and random checkpoints, so that speed can be measured and code tested
// without a downloaded checkpoint.
#include <cmath>

#include "genperf/error.h"
#include "genperf/llama.h"

namespace genperf {
namespace {

struct Preset {
  const char* name;
  int64_t vocab, dim, ffn, layers, heads, kv_heads, ctx;
};

// "110m": the ~110M-parameter shape of the benchmarks (untied: 134M with its output head).
// "default": the embedded model's. Its FFN width follows Llama's rule (8/3 of d rounded up to a
// multiple of 256), so that every matrix's rows split into the 256-blocks of the K-quants.
constexpr Preset kPresets[] = {
    {"110m", 32000, 768, 2048, 12, 12, 12, 2048},
    {"default", 4096, 256, 768, 6, 8, 4, 512},
    {"tiny", 256, 64, 176, 2, 4, 2, 256},
};

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> n;
  for (const auto& p : kPresets) n.push_back(p.name);
  return n;
}

LlamaConfig preset_config(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name != p.name) continue;
    LlamaConfig c;
    c.vocab_size = p.vocab;
    c.hidden_size = p.dim;
    c.intermediate_size = p.ffn;
    c.num_hidden_layers = p.layers;
    c.num_attention_heads = p.heads;
    c.num_key_value_heads = p.kv_heads;
    c.head_dim = p.dim / p.heads;
    c.max_position_embeddings = p.ctx;
    c.bos_token_ids = {1};
    c.eos_token_ids = {2};
    return c;
  }
  std::string names;
  for (const auto& p : kPresets) names += cat(names.empty() ? "" : ", ", p.name);
  fail("[llama] unknown built-in shape '", name, "' (known: ", names, ")");
}

Checkpoint random_checkpoint(const LlamaConfig& c, DType dtype, uint64_t seed, double std) {
  c.validate("random:" + std::to_string(seed));
  Checkpoint ck;
  ck.source = cat("random weights (seed ", seed, ")");
  ck.format = "random";
  ck.config = c;
  Rng rng(seed);
  std::vector<float> buf;
  // Drawn a row at a time, so a large random model costs no float copy of its weights.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    const double s = std > 0 ? std : 1.0 / std::sqrt(double(cols));
    buf.resize(size_t(cols));
    Tensor t = Tensor::zeros({rows, cols}, dtype);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : buf) v = float(rng.normal() * s);
      traits(dtype).from_f32(buf.data(), t.row(r), cols);
    }
    ck.tensors[name] = t;
  };
  auto vector = [&](const std::string& name, int64_t n, bool ones) {
    buf.assign(size_t(n), 1.0f);
    if (!ones)
      for (auto& v : buf) v = float(rng.normal() * 0.1);
    Tensor t = Tensor::zeros({n}, dtype);
    traits(dtype).from_f32(buf.data(), t.raw(), n);
    ck.tensors[name] = t;
  };
  const int64_t d = c.hidden_size, F = c.intermediate_size;
  matrix("model.embed_tokens.weight", c.vocab_size, d);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = cat("model.layers.", i, ".");
    vector(p + "input_layernorm.weight", d, true);
    matrix(p + "self_attn.q_proj.weight", c.q_dim(), d);
    matrix(p + "self_attn.k_proj.weight", c.kv_dim(), d);
    matrix(p + "self_attn.v_proj.weight", c.kv_dim(), d);
    matrix(p + "self_attn.o_proj.weight", d, c.q_dim());
    if (c.attention_bias) {
      vector(p + "self_attn.q_proj.bias", c.q_dim(), false);
      vector(p + "self_attn.k_proj.bias", c.kv_dim(), false);
      vector(p + "self_attn.v_proj.bias", c.kv_dim(), false);
    }
    vector(p + "post_attention_layernorm.weight", d, true);
    matrix(p + "mlp.gate_proj.weight", F, d);
    matrix(p + "mlp.up_proj.weight", F, d);
    matrix(p + "mlp.down_proj.weight", d, F);
  }
  vector("model.norm.weight", d, true);
  if (!c.tie_word_embeddings) matrix("lm_head.weight", c.vocab_size, d);
  return ck;
}

}  // namespace genperf

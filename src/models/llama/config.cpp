#include <cmath>

#include "genperf/error.h"
#include "genperf/llama_config.h"

namespace genperf {

int64_t LlamaConfig::num_parameters() const {
  const int64_t d = hidden_size;
  int64_t per_layer = d * q_dim() + 2 * d * kv_dim() + q_dim() * d  // attention
                      + 3 * d * intermediate_size                   // SwiGLU MLP
                      + 2 * d;                                      // two RMSNorm weights
  if (attention_bias) per_layer += q_dim() + 2 * kv_dim();
  int64_t n = per_layer * num_hidden_layers + vocab_size * d + d;
  if (!tie_word_embeddings) n += vocab_size * d;
  return n;
}

void LlamaConfig::validate(const std::string& src) const {
  auto positive = [&](int64_t v, const char* name) {
    GP_CHECK(v > 0, "[config] ", src, ": ", name, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  GP_CHECK(num_attention_heads % num_key_value_heads == 0, "[config] ", src,
           ": num_attention_heads ", num_attention_heads, " is not a multiple of num_key_value_heads ",
           num_key_value_heads);
  GP_CHECK(head_dim % 2 == 0, "[config] ", src, ": head_dim ", head_dim, " must be even for rotary embeddings");
  GP_CHECK(rope_theta > 0, "[config] ", src, ": rope_theta must be positive");
  GP_CHECK(rms_norm_eps > 0, "[config] ", src, ": rms_norm_eps must be positive");
  GP_CHECK(hidden_act == "silu", "[config] ", src, ": hidden_act '", hidden_act,
           "' is not supported (expected silu)");
  GP_CHECK(rope_scaling.type.empty() || rope_scaling.type == "llama3" || rope_scaling.type == "default",
           "[config] ", src, ": rope_scaling type '", rope_scaling.type, "' is not supported (expected llama3)");
  for (int32_t t : bos_token_ids)
    GP_CHECK(t >= 0 && t < vocab_size, "[config] ", src, ": bos_token_id ", t, " outside the vocabulary");
  for (int32_t t : eos_token_ids)
    GP_CHECK(t >= 0 && t < vocab_size, "[config] ", src, ": eos_token_id ", t, " outside the vocabulary");
}

std::vector<float> rope_inv_freq(const LlamaConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  const auto& s = c.rope_scaling;
  for (int64_t i = 0; i < half; ++i) {
    double inv = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
    if (s.type == "llama3") {
      // Llama 3.1: keep high frequencies, divide low ones by `factor`, interpolate between.
      const double low_wavelen = double(s.original_max_position_embeddings) / s.low_freq_factor;
      const double high_wavelen = double(s.original_max_position_embeddings) / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / inv;
      if (wavelen > low_wavelen) {
        inv /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (double(s.original_max_position_embeddings) / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        inv = (1.0 - smooth) * inv / s.factor + smooth * inv;
      }
    }
    f[size_t(i)] = float(inv);
  }
  return f;
}

}  // namespace genperf

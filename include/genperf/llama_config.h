// Hyper-parameters of a Llama-family decoder, as read from a Hugging Face config.json or from
// GGUF metadata. Field names follow config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace genperf {

struct RopeScaling {
  std::string type;  // "" (none) or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string architecture = "LlamaForCausalLM";  // or MistralForCausalLM, Qwen2ForCausalLM
  int64_t vocab_size = 32000;
  int64_t hidden_size = 768;
  int64_t intermediate_size = 2048;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t num_key_value_heads = 12;
  int64_t head_dim = 64;  // hidden_size / num_attention_heads unless config.json says otherwise
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (true for Qwen2)
  std::string hidden_act = "silu";
  std::string torch_dtype = "float32";
  std::vector<int32_t> bos_token_ids;  // may be empty
  std::vector<int32_t> eos_token_ids;  // may be several (Llama 3 instruct)

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  // Number of parameters, counting a tied output head once.
  int64_t num_parameters() const;
  // Throws genperf::Error naming `source` when fields are inconsistent (heads not dividing, ...).
  void validate(const std::string& source) const;
};

// Inverse frequencies of the rotary embedding, one per pair of dimensions (head_dim / 2),
// with rope_theta and, for the `llama3` type, its frequency-dependent scaling applied.
std::vector<float> rope_inv_freq(const LlamaConfig& c);

}  // namespace genperf

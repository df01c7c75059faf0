// A Llama-family decoder (Llama, Mistral, Qwen2): RMSNorm, rotary embeddings, grouped-query
// attention, SwiGLU MLP, tied or untied output head. Weights stay in the checkpoint's types
// (memory-mapped); activations are f32. A Session owns one sequence's KV cache and scratch.
//
// Shape legend: T tokens in a call, d hidden size, V vocabulary, L layers, H query heads,
// Hkv key/value heads, D head dimension, C context capacity of a session.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/llama_config.h"
#include "genperf/ops.h"
#include "genperf/rng.h"
#include "genperf/tensor.h"

namespace genperf {

// Built-in shapes for benchmarks and tests ("random:110m", "random:tiny", ...).
LlamaConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// A checkpoint with random weights drawn from N(0, std^2) (norm weights 1), in `dtype`.
// std <= 0 picks 1/sqrt(fan_in) per matrix, which keeps activations and logits well spread.
Checkpoint random_checkpoint(const LlamaConfig& c, DType dtype, uint64_t seed, double std = 0.0);

// Where a model's memory goes, in bytes.
struct MemoryAccount {
  size_t weights = 0, kv_cache = 0, scratch = 0;
  size_t total() const { return weights + kv_cache + scratch; }
};

class LlamaModel;

// One sequence: its KV cache (per layer head-major [Hkv][C][D], so that each head's keys are one
// stream; f32, f16 or bf16 for half the bytes, as llama.cpp keeps it, or q8_0 for 34 bytes per
// 32 values where the head dimension is a multiple of 32) and the scratch buffers of a forward
// pass.
class Session {
 public:
  // kv: the cache's type; the first form takes the model's (LlamaModel::kv_dtype).
  Session(const LlamaModel& m, int64_t capacity);
  Session(const LlamaModel& m, int64_t capacity, DType kv);
  int64_t position() const { return pos_; }   // tokens already in the cache
  int64_t capacity() const { return capacity_; }
  void reset() { pos_ = 0; }
  // Forgets every cached token after the first n (n <= position()), e.g. to score several
  // continuations of one shared prefix.
  void truncate(int64_t n);
  size_t kv_bytes() const;
  DType kv_dtype() const { return kv_; }
  size_t scratch_bytes() const;

 private:
  friend class LlamaModel;
  void reserve(int64_t T);  // grows the scratch buffers to hold T tokens
  const LlamaModel* model_;
  int64_t capacity_, pos_ = 0, scratch_T_ = 0;
  DType kv_;
  std::vector<Tensor> k_, v_;                       // per layer [Hkv, C, D]
  Tensor x_, h_, q_, attn_, gate_, up_;  // [T, ...] scratch
  Tensor kn_, vn_;  // [T, Hkv*D] new keys and values in f32
  std::vector<int32_t> positions_;
};

enum class LogitsFor { Last, All };

// Sees the f32 input x [T, K] of each weight matmul of a forward pass, with the names of the
// weights that multiply it (q/k/v share one input, gate and up another; the head's input is the
// final norm's output, for the rows whose logits are computed). Calibration statistics
// (collect_activation_stats) are hooks on the one forward pass, not a copy of it.
using MatmulInputHook = std::function<void(std::span<const std::string> weights, const Tensor& x)>;

class LlamaModel {
 public:
  // Takes the checkpoint's tensors (shapes are checked) and keeps its tokenizer.
  explicit LlamaModel(Checkpoint ck);

  const LlamaConfig& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  RopeStyle rope_style() const { return rope_style_; }
  const std::string& source() const { return source_; }
  DType weight_dtype() const { return layers_.front().wq.dtype(); }
  // The matrices' types: "q4_k" when they share one, else "mixed: 20 q4_k, 16 q3_k, ..." (most
  // frequent first), counting the embedding, the head (once when tied) and every layer's matrices.
  std::string weight_types() const;
  size_t weight_bytes() const;
  size_t weight_bytes_of(const std::string& name) const;  // 0 when absent
  MemoryAccount memory(const Session& s) const;
  // The KV cache type of sessions that do not name one: f32 unless set; f16 or bf16 halve the
  // cache, as llama.cpp's default f16 cache does, q8_0 (llama.cpp's --cache-type-k q8_0) takes
  // 0.27 of it. Throws for any other type.
  DType kv_dtype() const { return kv_dtype_; }
  void set_kv_dtype(DType kv);

  // Runs `tokens` at positions s.position() .. +T-1, appends their keys/values to the cache and
  // returns f32 logits: [1, V] for the last token or [T, V] for all of them.
  // hook, when given, sees every matmul's input (MatmulInputHook).
  Tensor forward(Session& s, std::span<const int32_t> tokens, LogitsFor which = LogitsFor::Last,
                 const MatmulInputHook* hook = nullptr) const;

  // Work of a forward pass of T tokens after `past` cached ones, in FLOPs (matmuls + attention).
  double forward_flops(int64_t T, int64_t past, LogitsFor which) const;

 private:
  friend class Session;
  struct Layer {
    Tensor attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
    std::vector<std::string> qkv_names, o_names, gate_up_names, down_names;  // per matmul input
  };
  LlamaConfig config_;
  RopeStyle rope_style_;
  std::string source_;
  std::map<std::string, Tensor> tensors_;  // keeps every weight (and its mapping) alive
  Tensor embed_, norm_, lm_head_;
  std::vector<std::string> head_names_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::unique_ptr<Tokenizer> tokenizer_;
  DType kv_dtype_ = DType::F32;
};

// Sampling: temperature <= 0 is greedy (argmax, lowest id on ties); otherwise softmax of
// logits / temperature, restricted to the top_k most likely (0 = all), then to the smallest set
// whose probability reaches top_p (1 = all), drawn with the Sampler's seeded generator.
struct SamplingOptions {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions o);
  int32_t sample(std::span<const float> logits);
  const SamplingOptions& options() const { return opt_; }

 private:
  SamplingOptions opt_;
  Rng rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
};

struct GenerationResult {
  std::vector<int32_t> prompt_ids, ids;  // ids: generated tokens only
  std::string text;                      // decoded generated text
  double prefill_seconds = 0, decode_seconds = 0;
  bool stopped_at_eos = false;
};

// Encodes the prompt (with BOS as the tokenizer says), prefills, then samples up to max_tokens,
// stopping at an end-of-sequence id. on_token (optional) sees each token's text as it comes.
GenerationResult generate(const LlamaModel& m, const std::string& prompt, int max_tokens,
                          const SamplingOptions& opt,
                          const std::function<void(const std::string&)>& on_token = {});

}  // namespace genperf

// Model checkpoints as users have them: a Hugging Face directory (config.json, model.safetensors
// or a sharded model.safetensors.index.json, tokenizer files) or a GGUF file. Tensors are
// memory-mapped, never copied; GGUF names are mapped to Hugging Face names so the model sees
// one naming scheme.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "genperf/json.h"
#include "genperf/llama_config.h"
#include "genperf/ops.h"
#include "genperf/tensor.h"
#include "genperf/tokenizer.h"

namespace genperf {

struct Checkpoint {
  std::string source;                     // the directory or file it came from
  std::string format;                     // "hf" or "gguf"
  // The architecture (config.json's architectures[0]) and the family that owns it
  // (genperf/model_family.h) parse the config. config_json is the config as read from a HF
  // directory; config is the Llama family's parsed config (empty for other families).
  std::string architecture;
  Json config_json;
  LlamaConfig config;
  RopeStyle rope_style = RopeStyle::Neox;  // Interleaved for GGUF `llama` files
  std::map<std::string, Tensor> tensors;  // Hugging Face names, e.g. model.layers.0.self_attn.q_proj.weight
  std::unique_ptr<Tokenizer> tokenizer;   // null when the checkpoint has none

  // The architecture: `architecture`, or the Llama config's for checkpoints built in code.
  const std::string& arch() const { return architecture.empty() ? config.architecture : architecture; }
};

// A checkpoint that shares ck's tensors (their storage is reference-counted) and copies its
// source, format, configs and rope style, without the tokenizer: what a model built beside ck
// (a variant, a timing) needs.
Checkpoint share_weights(const Checkpoint& ck);

// Weights at rest, as model records state them (bench infer, eval, sr eval): the matrices' types,
// "q4_k" when they share one, else "mixed: 20 q4_k, 16 q3_k, ..." (most frequent first; every
// 2-D tensor counts), and the bytes of every tensor.
std::string weight_types(const std::map<std::string, Tensor>& tensors);
size_t weight_bytes(const std::map<std::string, Tensor>& tensors);

// Reads config.json into a LlamaConfig (architecture LlamaForCausalLM, MistralForCausalLM or
// Qwen2ForCausalLM); errors name the file and field.
LlamaConfig read_hf_config(const std::string& path);
// Serializes a config in Hugging Face's config.json form.
std::string hf_config_json(const LlamaConfig& c);

// Loads a checkpoint from a HF directory or a .gguf file (decided by what `path` is).
// with_tokenizer=false skips the tokenizer (benchmarks of weights alone).
Checkpoint load_checkpoint(const std::string& path, bool with_tokenizer = true);

// Writes a HF directory: config.json, model.safetensors (or shards of at most shard_bytes, with
// model.safetensors.index.json), and copies the files in `extra_files` (tokenizer files) in.
// Files are written under temporary names and renamed, so no partial output is left on error.
void save_hf_checkpoint(const std::string& dir, const LlamaConfig& c,
                        const std::map<std::string, Tensor>& tensors,
                        const std::vector<std::string>& extra_files = {},
                        size_t shard_bytes = 0);

// Writes a GGUF file (architecture `llama`) from a checkpoint: metadata keys llama.*, tensors
// renamed to GGUF names, q/k rows permuted to GGUF's rotary layout, and the tokenizer's vocabulary
// in tokenizer.ggml.* when the checkpoint has one. Tensors keep their types, but for the 1-D ones
// (norms, biases), which are written in F32 as llama.cpp expects.
void save_gguf_checkpoint(const std::string& path, const Checkpoint& ck);

// What llama.cpp will do differently with the GGUF file of this checkpoint (empty when nothing
// known): its SentencePiece tokenizer applies no normalizer, so a tokenizer.model that removes
// extra whitespace or maps characters (NFKC) tokenizes such text differently there.
std::vector<std::string> gguf_llamacpp_notes(const Checkpoint& ck);

}  // namespace genperf

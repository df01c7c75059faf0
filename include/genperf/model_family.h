// The model-family seam: what quant, eval, io and the CLI may know of a family's tensors without
// holding its names. A family (Llama with Mistral and Qwen2 today, the SR UNet next) declares
// which of its tensors are quantizable, in forward order, and the role of each (for the
// sensitivity map and the recipes), and how its checkpoints store them.
#pragma once
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/tensor.h"

namespace genperf {

struct TensorRole {
  std::string name;    // the checkpoint's name (Hugging Face's for Llama)
  int layer = -1;      // block index; -1 outside the blocks
  std::string kind;    // short role: "embed", "head", "q", "k", "v", "o", "gate", "up", "down"
  bool output = false;  // produces the logits (the head, or an embedding tied to it)
  bool lookup = false;  // rows are looked up, never multiplied: no activation statistics
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual const char* name() const = 0;  // "llama", "sr-unet"
  // Whether an architecture (config.json's architectures[0]) is one of this family's.
  virtual bool owns_architecture(const std::string& arch) const = 0;
  bool owns(const Checkpoint& ck) const { return owns_architecture(ck.arch()); }

  // Hugging Face directories (io's loader calls these; errors name `path` and the field):
  // parses config.json `j` into ck (architecture, config_json, the family's own config).
  virtual void read_hf_config(Checkpoint& ck, const Json& j, const std::string& path) const = 0;
  // Checks the tensors read (origin: tensor name -> file) against the config, and puts them in
  // the family's matrix form (e.g. convolution filters as [OC, K*K*IC] views).
  virtual void adopt_hf_tensors(Checkpoint& ck, const std::map<std::string, std::string>& origin) const = 0;
  // Writes ck's config and `tensors` (ck's, possibly quantized) as a HF directory `dir`, with the
  // `extra_files` copied in; temporary names first, so no partial output is left.
  // Whether the family's checkpoints can be GGUF files (save_gguf_checkpoint).
  virtual bool has_gguf() const { return false; }
  virtual void save_hf(const std::string& dir, const Checkpoint& ck, const std::map<std::string, Tensor>& tensors,
                       const std::vector<std::string>& extra_files) const = 0;

  // The role of the tensor `name` when the family quantizes it (a 2-D matrix), else nullopt.
  // Without a checkpoint, `output` and `lookup` describe an untied embedding.
  virtual std::optional<TensorRole> role_of(const std::string& name) const = 0;
  // The quantizable tensors ck holds, in forward order, with their roles in ck.
  virtual std::vector<TensorRole> quantizable(const Checkpoint& ck) const = 0;
  // ck's tensors as the family's Hugging Face checkpoints store them (e.g. a GGUF file's q/k rows
  // put back from interleaved rotary pairs to halves); the same tensors when they already are.
  virtual std::map<std::string, Tensor> hf_tensors(const Checkpoint& ck) const = 0;
};

// Every family genperf knows, and the one a checkpoint belongs to (an error naming the
// checkpoint and its architecture when none owns it).
std::span<const ModelFamily* const> model_families();
const ModelFamily& family_of(const Checkpoint& ck);
// The family that reads config.json `j`: the one owning its architectures[0]; the first family
// (Llama, whose reader names what is unknown or missing) when none does.
const ModelFamily& family_for_config(const Json& j);

}  // namespace genperf

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
  virtual const char* name() const = 0;  // "llama"
  // Whether the checkpoint is one of this family's (by its architecture).
  virtual bool owns(const Checkpoint& ck) const = 0;
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

}  // namespace genperf

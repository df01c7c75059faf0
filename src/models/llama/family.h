// The Llama family (Llama, Mistral, Qwen2) for the model-family registry (src/models/families.cpp).
#pragma once
#include "genperf/model_family.h"

namespace genperf {

const ModelFamily& llama_family();

namespace llama {
// config.json's fields (read from path) as a LlamaConfig; errors name path and the field.
LlamaConfig config_from_json(const Json& j, const std::string& path);
// Checks a checkpoint's tensor names, shapes and types against its config (checkpoint.cpp);
// origin maps a tensor to its file, for the errors.
void check_checkpoint_tensors(const LlamaConfig& c, const std::map<std::string, Tensor>& tensors,
                              const std::map<std::string, std::string>& origin, const std::string& source);
}  // namespace llama

}  // namespace genperf

#include "models/llama/names.h"

#include "genperf/error.h"

namespace genperf::llama {

std::string layer_tensor(int64_t i, std::string_view rest) { return cat("model.layers.", i, ".", rest); }

const std::vector<std::string>& lora_modules() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

const std::vector<std::string>& default_lora_modules() {
  static const std::vector<std::string> names(lora_modules().begin(), lora_modules().begin() + 4);
  return names;
}

std::string module_path(int64_t i, const std::string& module) {
  const bool attn = module == "q_proj" || module == "k_proj" || module == "v_proj" || module == "o_proj";
  return layer_tensor(i, (attn ? "self_attn." : "mlp.") + module);
}

}  // namespace genperf::llama

// Llama's tensor names as Hugging Face checkpoints spell them, in one place for the layers that
// must address Llama's parameters by name (the training graph's flat buffer, LoRA's target
// modules, the benchmarks' byte counts). GGUF's names are mapped in checkpoint.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace genperf::llama {

inline constexpr const char* kEmbed = "model.embed_tokens.weight";
inline constexpr const char* kFinalNorm = "model.norm.weight";
inline constexpr const char* kHead = "lm_head.weight";

// Tensors of block i: layer_tensor(i, kQ) is "model.layers.<i>.self_attn.q_proj.weight".
std::string layer_tensor(int64_t i, std::string_view rest);
inline constexpr const char* kAttnNorm = "input_layernorm.weight";
inline constexpr const char* kQ = "self_attn.q_proj.weight";
inline constexpr const char* kK = "self_attn.k_proj.weight";
inline constexpr const char* kV = "self_attn.v_proj.weight";
inline constexpr const char* kQBias = "self_attn.q_proj.bias";
inline constexpr const char* kKBias = "self_attn.k_proj.bias";
inline constexpr const char* kVBias = "self_attn.v_proj.bias";
inline constexpr const char* kO = "self_attn.o_proj.weight";
inline constexpr const char* kFfnNorm = "post_attention_layernorm.weight";
inline constexpr const char* kGate = "mlp.gate_proj.weight";
inline constexpr const char* kUp = "mlp.up_proj.weight";
inline constexpr const char* kDown = "mlp.down_proj.weight";

// The projections by PEFT's target_modules names, in a block's order (q, k, v, o, gate, up, down),
// and the ones adapted unless the user names others (the attention projections).
const std::vector<std::string>& lora_modules();
const std::vector<std::string>& default_lora_modules();
// The module of block i that holds projection `module` (one of lora_modules()), as PEFT names
// it: "model.layers.<i>.self_attn.q_proj".
std::string module_path(int64_t i, const std::string& module);

}  // namespace genperf::llama

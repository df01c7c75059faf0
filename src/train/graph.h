// The whole Llama model's forward and backward over flat parameter buffers, built from the
// training ops (genperf/ops_train.h) and templated like them: LlamaGraph<float> trains (TrainModel wraps it),
// LlamaGraph<double> checks whole-model gradients against finite differences.
//
// Shape legend: B sequences, T tokens each, N = B*T rows, C hidden size, V vocabulary,
// L layers, NH/NKV query/key-value heads, HS head size, FF MLP hidden size,
// QKV = (NH + 2 NKV) HS.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "genperf/train.h"
#include "genperf/ops_train.h"

namespace genperf::train {

// The training ops this graph is built from.
using ops::AttnShape;
using ops::Bf16Scratch;
using ops::LoraShape;
using ops::RopeTable;
using ops::attention_backward_flash;
using ops::attention_backward_naive;
using ops::attention_forward_flash;
using ops::attention_forward_naive;
using ops::attention_gqa_scratch;
using ops::crossentropy_backward;
using ops::crossentropy_forward;
using ops::embedding_backward;
using ops::embedding_forward;
using ops::lora_backward;
using ops::lora_forward;
using ops::lora_key;
using ops::matmul_backward;
using ops::matmul_forward;
using ops::residual_backward;
using ops::residual_forward;
using ops::rmsnorm_backward;
using ops::rmsnorm_forward;
using ops::rope_backward;
using ops::rope_forward;
using ops::rope_table;
using ops::swiglu_backward;
using ops::swiglu_forward;

// Offsets (elements) of one layer's parameters in the flat buffer. The q, k, v weights are
// adjacent and form one fused [QKV, C] matrix (one GEMM instead of three); so do their biases,
// and gate|up form one [2 FF, C] matrix.
struct LayerOffsets {
  size_t attn_norm = 0, wqkv = 0, bqkv = 0, wo = 0, ffn_norm = 0, wgu = 0, wdown = 0;
  bool has_bias = false;
};

struct ParamLayout {
  std::vector<ParamInfo> params;  // in buffer order
  size_t total = 0;               // elements
  size_t embed = 0, norm = 0, lm_head = 0;  // lm_head == embed when the head is tied
  std::vector<LayerOffsets> layers;
};
ParamLayout param_layout(const LlamaConfig& c);

// LoRA targets in a layer's order (lora_target_names()); q, k, v are row blocks of the fused
// qkv matrix and gate, up of the fused gate|up one.
enum class LoraTarget : uint8_t { Q, K, V, O, Gate, Up, Down };
constexpr int kLoraTargets = 7;

// One adapter: A [r, in] and B [out, r] at offsets a, b of the adapter buffer, adding to output
// columns [col, col + out) of its base matmul (whose row stride is ld) and reading its input.
struct LoraAdapter {
  int64_t layer = 0;
  LoraTarget target = LoraTarget::Q;
  int64_t in = 0, out = 0, col = 0, ld = 0;
  size_t a = 0, b = 0;
  size_t base = 0;  // offset of the base weight's rows [out, in] in the parameter buffer
};

struct LoraLayout {
  LoraConfig config;
  std::vector<ParamInfo> params;     // lora_A, lora_B of each adapter, PEFT names, buffer order
  std::vector<LoraAdapter> adapters; // layer by layer, targets in LoraTarget order
  std::vector<std::array<int, kLoraTargets>> index;  // [layer][target] -> adapter, -1 when none
  size_t total = 0;                  // elements of the adapter buffer
  int64_t max_in = 0;
};
// Validates cfg (LoraConfig::validate) and lays out its adapters for the model of c.
LoraLayout lora_layout(const LlamaConfig& c, const ParamLayout& base, const LoraConfig& cfg);

// Bytes of the buffers a forward/backward of shape [B, T] keeps, for a float graph (bf16: the
// effective precision is Bf16); the graph allocates exactly these, so accounting and
// allocation cannot drift.
// as_requested: o.precision as it is, not this CPU's effective precision.
ActivationMemory activation_bytes(const LlamaConfig& c, const TrainOptions& o, int64_t B,
                                  int64_t T, int threads, const LoraLayout* lora, bool as_requested = false);

template <typename F>
class LlamaGraph {
 public:
  LlamaGraph(const LlamaConfig& c, RopeStyle rope, TrainOptions o);

  const LlamaConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  RopeStyle rope_style() const { return rope_style_; }
  const TrainOptions& options() const { return options_; }
  void set_options(TrainOptions o);  // forgets the saved activations
  // Whether the matmuls run in bf16 (float graph, effective_precision(options().precision)).
  bool bf16() const { return bf16_; }

  // LoRA adapters (null: none); forgets the saved activations.
  void set_lora(const LoraConfig* cfg);
  const LoraLayout* lora() const { return lora_ ? &*lora_ : nullptr; }
  // Dropout masks of a training forward come from (seed, step, micro-batch, layer, target);
  // set_lora_step restarts the micro-batch count; evaluation (training false) has no dropout.
  void set_lora_step(int64_t step, int64_t first_micro = 0) { lora_step_ = step, lora_micro_ = first_micro; }
  int64_t lora_step() const { return lora_step_; }
  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }

  // tokens, targets [B, T]; target -1 marks a row that is not scored. Saves what backward
  // needs; returns the mean loss over scored rows (0 when none is). adapters: the LoRA buffer
  // (needed when LoRA is on).
  double forward(const F* params, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                 int64_t B, int64_t T, const F* adapters = nullptr);
  // grads += d(loss_scale * loss)/d params; grads null: the base is frozen and none of its
  // weight gradients is computed. adapter_grads += the adapters' (LoRA on). Needs the forward
  // just before it (the logits buffer becomes their gradient) with the same adapters.
  void backward(const F* params, F* grads, double loss_scale, const F* adapters = nullptr,
                F* adapter_grads = nullptr);

  // Called during backward as gradients become final, with the stage just done: L (the head and
  // final norm), l (layer l, from L-1 down), -1 (the embedding: every gradient). Data-parallel
  // training starts reducing a gradient bucket as soon as it is complete. Empty: no calls.
  std::function<void(int64_t stage)> on_grads_ready;
  // Around the reads of each unit of parameters, for fully sharded training (FSDP gathers a
  // unit before it runs and frees it after): unit 0 is the embedding, 1 + l layer l, L + 1 the
  // final norm and head. done = false before a unit's parameters are read, true after. Forward:
  // 0, 1 .. L, L + 1; backward: L + 1 (head and norm), L .. 1 (with layer checkpointing the
  // recompute falls inside); the embedding's gradient reads no weights. Empty: no calls.
  std::function<void(int64_t unit, bool done, bool backward)> on_params;

  bool has_forward() const { return have_forward_; }  // a forward waits for its backward
  const F* logits() const { return logits_.data(); }  // [N, V], valid between forward and backward
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }
  int64_t scored_rows() const { return scored_; }
  ActivationMemory memory() const;  // bytes held for the current shape

 private:
  struct LayerActs {
    F *h1, *rstd1, *qkv, *att, *scores, *xmid, *h2, *rstd2, *gu, *act;
  };
  void allocate(int64_t B, int64_t T);
  LayerActs acts(int64_t l);
  AttnShape attn_shape() const;
  // The executor of the one Llama forward (models/llama/forward.h) over these buffers.
  struct Step;
  // dres holds d(layer output) on entry and d(layer input) on return; g null: frozen base.
  void layer_backward(const F* p, F* g, int64_t l, const F* x, F* dres);
  // The layer's adapter on target t, if any: y (its base matmul's output) += the low-rank
  // term; backward adds to dx and the adapter gradients.
  void lora_forward(int64_t l, LoraTarget t, const F* x, F* y);
  void lora_backward(int64_t l, LoraTarget t, const F* x, const F* dy, F* dx);
  const Bf16Scratch* bf16_scratch() { return bf16_ ? &bf16_ops_ : nullptr; }

  LlamaConfig config_;
  RopeStyle rope_style_;
  TrainOptions options_;
  bool bf16_ = false;
  ParamLayout layout_;
  std::optional<LoraLayout> lora_;
  int64_t lora_step_ = 0, lora_micro_ = 0;
  bool training_ = true;
  // The last forward's adapters, dropout step and micro-batch, and whether dropout ran
  // (backward and checkpointing's recompute repeat them).
  const F* lora_p_ = nullptr;
  int64_t drop_step_ = 0, drop_micro_ = 0;
  bool lora_drop_ = false;
  std::vector<float> inv_freq_;
  RopeTable<F> rope_;
  int64_t B_ = 0, T_ = 0, scored_ = 0;
  bool have_forward_ = false;
  std::vector<int32_t> tokens_, targets_;
  // Forward: residual stream [L+1, N, C]; per-layer buffers (one layer's worth when
  // checkpointing); final norm and logits.
  std::vector<F> res_, h1_, rstd1_, qkv_, att_, scores_, xmid_, h2_, rstd2_, gu_, act_;
  std::vector<F> hf_, rstdf_, logits_, lse_;
  // Backward scratch, reused by every layer.
  std::vector<F> dres_, dh_, dtmp_, dqkv_, dbuf_, dgu_;
  // bf16 matmul operands (Bf16Scratch views them).
  std::vector<uint16_t> bf16_inp_, bf16_dout_, bf16_w_;
  Bf16Scratch bf16_ops_;
  // LoRA: v = s·dropout(x)·A^T per adapter [N, r], for every layer even when checkpointing;
  // dropout(x) [N, max_in] and dv [N, r] scratch.
  std::vector<F> lora_v_, lora_x_, lora_dv_;
  F* lora_g_ = nullptr;  // adapter gradients during backward
};

}  // namespace genperf::train

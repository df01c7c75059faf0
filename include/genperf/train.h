// Training Llama-family models on the CPU, in f32 or mixed precision (bf16 matmul operands, f32
// accumulation, master weights and optimizer state): a trainable model whose master parameters
// and gradients live in one contiguous buffer each (named views with Hugging Face names), AdamW
// with decoupled weight decay, warm-up plus cosine learning-rate schedule, gradient clipping by
// global norm, gradient accumulation over micro-batches, and LoRA fine-tuning (adapters in a
// buffer of their own, base frozen, PEFT-compatible export).
//
// Attention runs naive (scores materialized, memory quadratic in T) or flash (tiled online
// softmax, backward recomputes from the saved log-sum-exp, memory linear in T). Gradient
// checkpointing keeps only each layer's input and recomputes the layer in backward.
// Results are deterministic for a fixed thread count (genperf::num_threads()).
//
// Shape legend: B sequences per micro-batch, T tokens per sequence, V vocabulary, d hidden size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/json.h"
#include "genperf/llama_config.h"
#include "genperf/ops.h"
#include "genperf/tensor.h"

namespace genperf {

enum class AttentionMode : uint8_t { Naive = 0, Flash = 1 };
const char* attention_mode_name(AttentionMode m);
// "naive" or "flash"; throws genperf::Error otherwise.
AttentionMode parse_attention_mode(std::string_view s);

// Compute precision of the training matmuls. Bf16: the operands of every large matmul (q|k|v,
// o, gate|up, down, lm_head; forward and both backward products) rounded to bf16, products
// accumulated in f32; master weights, gradients (+=) and optimizer state stay f32, and attention
// tiles, norms and LoRA adapters run in f32 (mixed precision). Where the CPU lacks AVX512-BF16
// or genperf::isa() is below AVX-512, Bf16 falls back to F32 (effective_precision says which
// runs). The float64 gradient-check graph ignores the precision.
enum class Precision : uint8_t { F32 = 0, Bf16 = 1 };
const char* precision_name(Precision p);
// "f32" or "bf16"; throws genperf::Error otherwise.
Precision parse_precision(std::string_view s);
// The precision that actually runs on this CPU for a requested one.
Precision effective_precision(Precision requested);

// The projections LoRA can target, in a layer's order (PEFT's target_modules names of the model
// family), and those adapted unless others are named (the attention projections).
const std::vector<std::string>& lora_target_names();
const std::vector<std::string>& default_lora_targets();

// LoRA, low-rank adaptation as Hugging Face PEFT does it: each targeted projection W [out, in]
// gains adapters A [r, in] (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in)), drawn
// from a generator seeded by (seed, layer, target), so the same for any thread count) and
// B [out, r] (zeros), and computes y = W x + (alpha / r) B A dropout(x). The base weights are
// frozen. Dropout (inverted: kept inputs scaled by 1 / (1 - dropout)) draws a fresh mask per
// target, layer and training forward from a counter-based hash of (seed, step, micro-batch,
// layer, target, element), so a resumed run reproduces the masks (see TrainModel::set_lora_step).
struct LoraConfig {
  int rank = 8;
  float alpha = 16;
  float dropout = 0;
  // Among lora_target_names() (PEFT's target_modules); by default the attention projections.
  std::vector<std::string> targets = default_lora_targets();
  uint64_t seed = 1;  // A's initialization and the dropout masks
  float scale() const { return alpha / float(rank); }
  // Throws genperf::Error naming the bad field: rank < 1, alpha not finite, dropout outside
  // [0, 1), an unknown, repeated or missing target.
  void validate() const;
};

// Reads a PEFT adapter directory's adapter_config.json (r, lora_alpha, lora_dropout,
// target_modules; the seed stays 1); refuses what genperf cannot run (DoRA, rsLoRA, bias
// training, per-module ranks, a regex target) with an error naming the field.
LoraConfig read_lora_config(const std::string& dir);

struct TrainOptions {
  AttentionMode attention = AttentionMode::Flash;
  bool checkpoint_layers = false;  // recompute each layer's forward in backward
  Precision precision = Precision::F32;
};

// One parameter tensor inside the flat buffers (offset and numel in floats).
struct ParamInfo {
  std::string name;  // e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<int64_t> shape;
  size_t offset = 0, numel = 0;
  bool decay = false;  // weight decay applies: matrices yes, norm weights and biases no
};

// A range of the flat buffer and whether weight decay applies to it.
struct ParamSegment {
  size_t offset = 0, count = 0;
  bool decay = true;
};

// Bytes held between forward and backward, by component, for one micro-batch shape.
struct ActivationMemory {
  size_t residual = 0;          // layer inputs [L+1, B*T, d] and mid-layer residuals
  size_t norms = 0;             // RMSNorm outputs and 1/rms per row
  size_t qkv = 0;               // rotated q|k|v rows
  size_t attention = 0;         // attention outputs
  size_t attention_scores = 0;  // naive: probabilities [B, H, T, T]; flash: lse [B, H, T]
  size_t mlp = 0;               // gate|up pre-activations and silu(gate)*up
  size_t logits = 0;            // [B*T, V] (their gradient reuses them) and lse per row
  size_t backward = 0;          // gradient scratch of one layer
  size_t attention_backward = 0;  // naive: per-thread [T, T] scratch; GQA: per-head dk/dv
  size_t bf16_operands = 0;  // Precision::Bf16: matmul operands rounded to bf16 (genperf/ops_train.h)
  size_t lora = 0;           // LoRA: s·dropout(x)·A^T per adapter [N, r] and adapter scratch
  size_t total() const;
  Json to_json() const;
};

// A Llama-family model for training. The random initialization draws matrices from N(0, 0.02^2),
// scales the residual projections (o_proj, down_proj) by 1/sqrt(2 L), sets norm weights to 1 and
// biases to 0; each chunk of 65536 elements of a tensor draws from a generator seeded by
// (seed, tensor, chunk), so the weights are the same for any thread count.
// When a TrainModel writes its parameters: at construction, or on request (sharded
// initialization, as FSDP's meta-device init; see TrainModel::init_params).
enum class InitMode : uint8_t { Eager, Deferred };

class TrainModel {
 public:
  // Initialized from `seed`: matrices N(0, 0.02) (residual projections 0.02 / sqrt(2 L)), norm
  // weights 1, biases 0; each block of 65536 values of a tensor draws from its own generator, so
  // any range can be drawn alone.
  TrainModel(const LlamaConfig& c, uint64_t seed, TrainOptions o = {},
             RopeStyle rope = RopeStyle::Neox, InitMode init = InitMode::Eager);
  // Copies a checkpoint's weights (any float type) to f32; shapes are checked. Deferred, the
  // model keeps the checkpoint's tensors (mapped files) to copy from.
  explicit TrainModel(const Checkpoint& ck, TrainOptions o = {}, InitMode init = InitMode::Eager);
  ~TrainModel();
  TrainModel(TrainModel&&) noexcept;
  TrainModel& operator=(TrainModel&&) noexcept;

  const LlamaConfig& config() const;
  RopeStyle rope_style() const;
  const TrainOptions& options() const;
  void set_options(TrainOptions o);  // forgets saved activations

  // Flat buffers and their named views (views share the buffers).
  size_t num_params() const;
  std::span<float> params();
  std::span<const float> params() const;
  std::span<float> grads();
  std::span<const float> grads() const;
  const std::vector<ParamInfo>& param_info() const;
  Tensor param(const std::string& name) const;  // throws when absent
  Tensor grad(const std::string& name) const;

  // What the optimizer updates: all parameters in full training; only the adapters once LoRA
  // is on (their buffer, in lora_param_info() order; every adapter segment decays, as PEFT's
  // adapters do under AdamW's weight_decay). Checkpoints save these with the optimizer state.
  std::span<float> trainable_params();
  std::span<float> trainable_grads();
  std::vector<ParamSegment> trainable_segments() const;

  // LoRA (see LoraConfig). enable_lora adds zero-effect adapters (B = 0) and freezes the base:
  // backward then skips every base weight gradient (the largest third of the matmul work) and
  // frees the base gradient buffer, so grads() is empty and grad() throws. Call once, before
  // training; forgets saved activations. Throws when already enabled or cfg is invalid.
  void enable_lora(const LoraConfig& cfg);
  bool lora_enabled() const;
  const LoraConfig& lora_config() const;  // throws when LoRA is off
  // A and B of each adapter under PEFT names, offsets into the adapter buffer (empty when off).
  const std::vector<ParamInfo>& lora_param_info() const;
  // Adapter weights in `dtype` under PEFT's names:
  // base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight [r, in], ...lora_B.weight
  // [out, r]. q/k rows of B follow the model's rotary pairing, as tensors() does.
  std::map<std::string, Tensor> lora_tensors(DType dtype = DType::F32) const;
  // Writes a PEFT adapter directory: adapter_model.safetensors (lora_tensors in `dtype`) and
  // adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout, target_modules,
  // base_model_name_or_path, ...), built in a temporary directory beside it and renamed into
  // place (an existing adapter directory is replaced only once the new one is complete).
  void save_lora_adapter(const std::string& dir, const std::string& base_model_name = "",
                         DType dtype = DType::F32) const;
  // Reads such a directory: with LoRA off, enables it with the directory's configuration (the
  // dropout seed from `seed`); with LoRA on, the configuration must match (rank, alpha,
  // targets). Then copies the adapter weights in (any float type; names and shapes checked).
  void load_lora_adapter(const std::string& dir, uint64_t seed = 1);
  // Dropout masks: each forward in training mode uses (seed, step, micro-batch, layer, target),
  // where set_lora_step(step) sets the step and restarts the micro-batch count at 0, and each
  // training forward counts one micro-batch. train_step sets the step to the optimizer's
  // step_count() before its micro-batches, so restoring AdamW's step count on resume
  // reproduces the masks.
  // first_micro: the micro-batch count to start from (a data-parallel rank's first micro-batch
  // of the step, so that every rank draws the masks a single rank would).
  void set_lora_step(int64_t step, int64_t first_micro = 0);
  int64_t lora_step() const;
  // Training mode (default) applies LoRA dropout; evaluation mode (false) does not and leaves
  // the micro-batch count alone: switch it off around validation forwards.
  void set_training(bool on);
  bool training() const;

  // tokens and targets are [B, T] row-major; target -1 excludes a position from the loss (e.g.
  // prompt tokens). Returns the mean cross-entropy over scored positions (0 when none is) and
  // saves the activations backward needs.
  float forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                int64_t T);
  // Logits [B*T, V] of the last forward, copied; only valid before backward.
  Tensor logits() const;
  // grads += d(loss_scale * loss)/d params for the last forward. With micro-batches, pass
  // 1 / count so the accumulated gradient is that of the mean of their losses.
  void backward(float loss_scale = 1.0f);
  void zero_grad();
  // Called during each backward as trainable gradients become final, with an offset into
  // trainable_grads(): every gradient at and after it is final for this backward (the offsets
  // fall to 0, the last call). Data-parallel training reduces gradient buckets from it while
  // backward goes on. Empty: no calls.
  void set_grads_ready_hook(std::function<void(size_t trainable_offset)> hook);

  // Fully sharded training (genperf/dist.h). The parameters come in units, each read as a
  // whole: unit 0 the embedding, 1 + l layer l, L + 1 the final norm and head (with a tied
  // head, the embedding's range too); param_units gives each unit's ranges of params(). The
  // hook is called with done = false before a unit is read and true after (forward: 0, 1 .. L,
  // L + 1; backward: L + 1, L .. 1). Empty: no calls.
  // trainable_units gives the same units' ranges of trainable_params(): param_units in full
  // training; with LoRA, unit 1 + l holds layer l's adapters and units 0 and L + 1 none.
  std::vector<std::vector<std::pair<size_t, size_t>>> param_units() const;
  std::vector<std::vector<std::pair<size_t, size_t>>> trainable_units() const;
  void set_params_hook(std::function<void(int64_t unit, bool done, bool backward)> hook);
  // Moves the parameters and gradients into buffers of num_params() f32 the caller provides (for
  // sharded training: windows whose pages are filled and freed as units run), copying nothing;
  // an undefined tensor keeps that buffer. With LoRA the base is frozen: only its parameters
  // may move (grads must be undefined).
  void adopt_buffers(Tensor params, Tensor grads);
  // The same for trainable_params() and trainable_grads(): adopt_buffers in full training, the
  // adapters' buffers with LoRA.
  void adopt_trainable_buffers(Tensor params, Tensor grads);

  // Deferred initialization (InitMode::Deferred): the constructor checks everything but writes
  // no parameter, and reserves the parameter and gradient buffers without making any of their
  // pages resident. init_params(lo, hi, dst) writes values [lo, hi) of params() as an eager
  // constructor would (any range, in any order, without the rest); materialize() writes them
  // all into params(). Data-parallel training (genperf/dist.h) does one or the other: a fully
  // sharded rank writes only its shard, so no rank ever holds the whole model. Until then the
  // model refuses forward and tensors(). On a model already written, init_params copies from
  // params() and materialize does nothing. adopt_buffers with parameters ends the deferral.
  bool init_deferred() const;
  void init_params(size_t lo, size_t hi, float* dst) const;
  void materialize();

  ActivationMemory activation_memory() const;  // of the last forward's shape
  // For a shape, at the precision this CPU runs for o.precision (effective_precision), or with
  // as_requested at o.precision itself (plans for a device that runs it).
  static ActivationMemory activation_memory(const LlamaConfig& c, const TrainOptions& o,
                                            int64_t B, int64_t T,
                                            const LoraConfig* lora = nullptr, bool as_requested = false);

  // Copies of the weights in `dtype` under Hugging Face names (no lm_head when tied), ready for
  // save_hf_checkpoint; and as a Checkpoint that LlamaModel accepts. q/k rows stay in the
  // model's rotary pairing: a model loaded from GGUF (Interleaved) is not in HF's Neox order.
  // With LoRA on, targeted projections are merged: W + (alpha / r) B A, summed in double.
  std::map<std::string, Tensor> tensors(DType dtype = DType::F32) const;
  Checkpoint to_checkpoint(DType dtype = DType::F32) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ------------------------------------------------------------------------------------------
// Optimization

// Segments of a model's parameters (from ParamInfo::decay).
std::vector<ParamSegment> param_segments(const TrainModel& m);

struct AdamWOptions {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// AdamW as in PyTorch: p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps), with bias-corrected
// moments m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t); wd only on decaying segments.
class AdamW {
 public:
  AdamW(size_t num_params, AdamWOptions o = {});
  void step(std::span<float> params, std::span<const float> grads,
            std::span<const ParamSegment> segments, float lr);
  int64_t step_count() const { return t_; }
  const AdamWOptions& options() const { return o_; }
  // State, for checkpoints: moments and step count.
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }
  void set_step_count(int64_t t) { t_ = t; }
  size_t state_bytes() const { return (m_.size() + v_.size()) * sizeof(float); }

 private:
  AdamWOptions o_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

// Linear warm-up from max_lr / warmup_steps to max_lr over steps 0 .. warmup_steps - 1, then
// cosine decay to min_lr at total_steps, min_lr after.
struct LrSchedule {
  float max_lr = 3e-4f, min_lr = 3e-5f;
  int64_t warmup_steps = 0, total_steps = 1;
  float at(int64_t step) const;  // step counts from 0
};

// Global L2 norm of a gradient buffer, summed in double over fixed chunks in a fixed order (the
// same bits for any thread count).
double grad_norm(std::span<const float> grads);
// Scales grads by max_norm / (norm + 1e-6) when the norm exceeds max_norm (as PyTorch's
// clip_grad_norm_); returns the norm before clipping. max_norm <= 0 only measures.
double clip_grad_norm(std::span<float> grads, double max_norm);

// One micro-batch: tokens and targets [B, T].
struct MicroBatch {
  std::span<const int32_t> tokens, targets;
  int64_t B = 0, T = 0;
};
struct StepResult {
  double loss = 0;       // mean of the micro-batches' losses
  double grad_norm = 0;  // before clipping
  float lr = 0;
};
// One optimizer step with gradient accumulation: zero the gradients, forward and backward each
// micro-batch (scaled by 1 / count), clip to max_grad_norm (<= 0: no clipping), AdamW at lr.
// Sets the model's LoRA dropout step to opt.step_count() first (TrainModel::set_lora_step).
StepResult train_step(TrainModel& m, AdamW& opt, std::span<const MicroBatch> micro, float lr,
                      double max_grad_norm);

// FLOPs of one training step on B x T tokens: 6 per matmul parameter per token (forward and
// both backward products) plus three times the causal attention forward (4 H D per visible key).
// With LoRA, 4 per frozen matmul parameter (no weight gradient) plus 6 per adapter parameter
// (the dropout and scaling passes are not counted).
double train_step_flops(const LlamaConfig& c, int64_t B, int64_t T, const LoraConfig* lora = nullptr);
// Trainable parameters of LoRA's adapters on a model of c (validates lora).
int64_t lora_parameters(const LlamaConfig& c, const LoraConfig& lora);

}  // namespace genperf

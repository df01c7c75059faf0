// The whole Llama model's forward and backward over flat parameter buffers, built from the layer
// functions of layers.h and templated like them: LlamaGraph<float> trains (TrainModel wraps it),
// LlamaGraph<double> checks whole-model gradients against finite differences.
//
// Shape legend: B sequences, T tokens each, N = B*T rows, C hidden size, V vocabulary,
// L layers, NH/NKV query/key-value heads, HS head size, FF MLP hidden size,
// QKV = (NH + 2 NKV) HS.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "genperf/train.h"
#include "train/layers.h"

namespace genperf::train {

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

// Element counts of the buffers a forward/backward of shape [B, T] keeps (ActivationMemory in
// elements); the graph allocates exactly these, so accounting and allocation cannot drift.
ActivationMemory activation_elements(const LlamaConfig& c, const TrainOptions& o, int64_t B,
                                     int64_t T, int threads);

template <typename F>
class LlamaGraph {
 public:
  LlamaGraph(const LlamaConfig& c, RopeStyle rope, TrainOptions o);

  const LlamaConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  RopeStyle rope_style() const { return rope_style_; }
  const TrainOptions& options() const { return options_; }
  void set_options(TrainOptions o);  // forgets the saved activations

  // tokens, targets [B, T]; target -1 marks a row that is not scored. Saves what backward
  // needs; returns the mean loss over scored rows (0 when none is).
  double forward(const F* params, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                 int64_t B, int64_t T);
  // grads += d(loss_scale * loss)/d params. Needs the forward just before it (the logits buffer
  // becomes their gradient).
  void backward(const F* params, F* grads, double loss_scale);

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
  // Runs layer l from its input x; writes its output to out unless out is null (recompute).
  void layer_forward(const F* p, int64_t l, const F* x, F* out);
  // dres holds d(layer output) on entry and d(layer input) on return.
  void layer_backward(const F* p, F* g, int64_t l, const F* x, F* dres);

  LlamaConfig config_;
  RopeStyle rope_style_;
  TrainOptions options_;
  ParamLayout layout_;
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
};

}  // namespace genperf::train

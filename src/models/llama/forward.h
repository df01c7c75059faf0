// The Llama decoder, stated once. An executor E owns the storage and runs each step with the
// ops; the inference model (LlamaModel::forward: tensors of any weight type, a KV cache, hooks
// for calibration statistics) and the training graph (train::LlamaGraph: flat float or double
// buffers, activations saved for backward, LoRA adapters) are two executors of this one
// forward, so the architecture (the order of the steps, where the norms and residuals sit) is
// changed here, for both. Steps of block l, x its input:
//   attn_norm(l)      h = rms_norm(x)
//   qkv(l)            q | k | v = h · Wq | Wk | Wv^T (+ bias; adapters add here)
//   rope(l)           q, k rotated at their positions
//   attention(l)      a = causal grouped-query attention(q, k, v)
//   o_proj(l)         y = a · Wo^T
//   residual_attn(l)  xmid = x + y
//   ffn_norm(l)       h = rms_norm(xmid)
//   gate_up(l)        g | u = h · Wgate | Wup^T
//   swiglu(l)         m = silu(g) * u
//   down(l)           y = m · Wdown^T
//   residual_ffn(l)   x' = xmid + y, the next block's input
// and around the blocks: embed() (x = the tokens' rows of the embedding table), final_norm()
// and head() (logits = rms_norm(x) · Wlm^T).
#pragma once
#include <cstdint>

namespace genperf::llama {

template <class E>
void block_forward(E& e, int64_t l) {
  e.attn_norm(l);
  e.qkv(l);
  e.rope(l);
  e.attention(l);
  e.o_proj(l);
  e.residual_attn(l);
  e.ffn_norm(l);
  e.gate_up(l);
  e.swiglu(l);
  e.down(l);
  e.residual_ffn(l);
}

template <class E>
void forward(E& e, int64_t layers) {
  e.embed();
  for (int64_t l = 0; l < layers; ++l) block_forward(e, l);
  e.final_norm();
  e.head();
}

}  // namespace genperf::llama

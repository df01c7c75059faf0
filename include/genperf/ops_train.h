// The training ops: forward and backward of each op family, one plain pair per op in the manner
// of llm.c, on row-major arrays of one device (dev: the CPU unless named). Templated on the float
// type: float runs the kernel of dev's backend table (ops/backend.h; on the CPU, oneDNN GEMMs,
// SIMD tiles and OpenMP threads at the ISA level genperf::isa() selects), double is the float64
// reference (the same algorithms with scalar loops, on the CPU), so a gradient check in float64
// covers the code that trains. A backend without a kernel throws "[op] has no CUDA kernel".
//
// Shape legend: B sequences, T tokens per sequence, N = B*T rows (row n is token n % T of
// sequence n / T), C hidden size (channels), IC/OC input/output channels of a matmul,
// V vocabulary, NH query heads, NKV key/value heads, HS head size, FF MLP hidden size,
// QKV = (NH + 2*NKV)*HS the fused row q | k | v.
//
// Invariant: backward functions add to parameter gradients (+=) and overwrite activation
// gradients (=). Parameter gradients thus accumulate over micro-batches, and the residual
// stream's gradient is summed explicitly (residual_backward), the one place two paths meet.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "genperf/ops.h"
#include "genperf/tensor.h"

namespace genperf {

// Compute precision of a network's matmuls and convolutions (the LLM trainer, genperf/train.h;
// the SR UNet, genperf/unet.h). F32: f32 operands. Bf16 (mixed precision): the operands of
// matmuls and convolutions rounded to bf16, products accumulated in f32, f32 outputs; weights,
// gradients, optimizer state and every other op stay f32. Bf16 runs where the CPU has
// AVX512-BF16 and genperf::isa() is the AVX-512 level; elsewhere it falls back to F32
// (effective_precision says which runs).
enum class Precision : uint8_t { F32 = 0, Bf16 = 1 };
const char* precision_name(Precision p);
// "f32" or "bf16"; throws genperf::Error otherwise.
Precision parse_precision(std::string_view s);
// The precision that actually runs on this CPU for a requested one.
Precision effective_precision(Precision requested);

}  // namespace genperf

namespace genperf::ops {

// out[N,C] = wte[tokens[n], :]; ids are checked against V.
template <typename F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C, int64_t V,
                       Device dev = Device::CPU);
// dwte[tokens[n], :] += dout[n, :], summed in token order (deterministic).
template <typename F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C,
                        Device dev = Device::CPU);

// out[N,C] = inp * rstd * w with rstd[N] = 1/sqrt(mean(inp^2) + eps), saved for backward.
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int64_t N, int64_t C, double eps,
                     Device dev = Device::CPU);
// dinp[N,C] =, dw[C] += (skipped when dw is null: a frozen weight).
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd,
                      int64_t N, int64_t C, Device dev = Device::CPU);

// cos/sin[T, HS/2] of position t times inv_freq[i]. In float the angle is float(t) * inv_freq,
// as the inference kernels compute it, so trained and served models rotate identically.
template <typename F>
struct RopeTable {
  int64_t T = 0, half = 0;
  std::vector<F> cos, sin;
};
template <typename F>
RopeTable<F> rope_table(std::span<const float> inv_freq, int64_t T);
// Rotates, in place, `heads` heads of HS at the start of each row of x[N, ldx] (row n at
// position n % T). Neox pairs (i, i + HS/2), Interleaved pairs (2i, 2i + 1).
template <typename F>
void rope_forward(F* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS, const RopeTable<F>& rt,
                  RopeStyle style, Device dev = Device::CPU);
// The rotation is orthogonal: its backward rotates dx in place by the opposite angle.
template <typename F>
void rope_backward(F* dx, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                   const RopeTable<F>& rt, RopeStyle style, Device dev = Device::CPU);

// out[N,FF] = silu(gu[:, :FF]) * gu[:, FF:] (gate and up projections fused in one row).
template <typename F>
void swiglu_forward(F* out, const F* gu, int64_t N, int64_t FF, Device dev = Device::CPU);
// dgu[N, 2FF] =.
template <typename F>
void swiglu_backward(F* dgu, const F* dout, const F* gu, int64_t N, int64_t FF,
                     Device dev = Device::CPU);

// Mixed precision (Precision::Bf16, float path only): buffers for operands rounded to bf16,
// owned by the caller (the graph counts them in its activation memory). A matmul runs over
// blocks of ocb output channels, ocb = min(OC, w.size() / IC, dout.size() / N), so that the
// lm_head's [N, V] gradient needs no [N, V] copy; inp holds the rounded input, N * IC.
// Products accumulate in f32; parameter gradients, biases and outputs stay f32.
struct Bf16Scratch {
  std::span<uint16_t> inp, dout, w;
};

// out[N,OC] = inp[N,IC] · w[OC,IC]^T (+ bias[OC]; bias may be null). bf16 (float only; null:
// f32 products) rounds inp and w to bf16.
template <typename F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t IC,
                    int64_t OC, const Bf16Scratch* bf16 = nullptr, Device dev = Device::CPU);
// dinp[N,IC] = dout · w (skipped when dinp is null); dw[OC,IC] += dout^T · inp (skipped when dw
// is null: a frozen weight); dbias[OC] += column sums of dout (when dbias is not null).
// bf16 rounds dout, w and inp to bf16 for both products; dbias sums the f32 dout.
template <typename F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N,
                     int64_t IC, int64_t OC, const Bf16Scratch* bf16 = nullptr,
                     Device dev = Device::CPU);

// LoRA adapter of one projection (PEFT): with s = alpha / r,
//   y[n, 0:out] += v[n, :] · B^T,  v[N, r] = s · dropout(x) · A^T (saved for backward),
// x [N, in], A [r, in], B [out, r], y rows ldy apart (a column block of a fused matmul's
// output). Dropout keeps element (n, i) when lora_keep(key, n * in + i, p) and scales it by
// 1 / (1 - p); the mask is recomputed in backward, never stored. p = 0: no dropout.
struct LoraShape {
  int64_t N = 0, in = 0, out = 0, r = 0;
  double scale = 1, p = 0;
  uint64_t key = 0;  // mixes (seed, step, micro-batch, layer, target)
};
// Counter-based uniform draw in [0, 1) for element idx: the same for any thread count.
bool lora_keep(uint64_t key, uint64_t idx, double p);
uint64_t lora_key(uint64_t seed, int64_t step, int64_t micro, int64_t layer, int target);
// xd [N, in]: scratch for dropout(x) (unused when p = 0).
template <typename F>
void lora_forward(F* y, int64_t ldy, F* v, F* xd, const F* x, const F* A, const F* B,
                  const LoraShape& s, Device dev = Device::CPU);
// dx[N, in] += the adapter's input gradient; dA[r, in] +=, dB[out, r] +=; dy rows ldy apart.
// xd [N, in] and dv [N, r]: scratch.
template <typename F>
void lora_backward(F* dx, F* dA, F* dB, const F* dy, int64_t ldy, const F* x, const F* v,
                   const F* A, const F* B, F* xd, F* dv, const LoraShape& s,
                   Device dev = Device::CPU);

// lse[N] = log sum_v exp(logits[n, v]). Returns the sum over scored rows (targets[n] >= 0;
// -1 means "not scored") of lse - logits[n, target]; *count receives their number.
template <typename F>
double crossentropy_forward(F* lse, const F* logits, const int32_t* targets, int64_t N, int64_t V,
                            int64_t* count, Device dev = Device::CPU);
// dlogits[N,V] = dloss * (softmax(logits) - onehot(target)) on scored rows, 0 on the others.
// dlogits may alias logits (the logits buffer is reused for their gradient).
template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int32_t* targets,
                           int64_t N, int64_t V, double dloss, Device dev = Device::CPU);

// out[n] = a[n] + b[n] (out may alias a or b).
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n, Device dev = Device::CPU);
// dres[n] += dbranch[n]: the residual stream's gradient collects its branch's.
template <typename F>
void residual_backward(F* dres, const F* dbranch, int64_t n, Device dev = Device::CPU);

// Grouped-query self-attention over qkv[N, QKV] (q and k already rotated): query head h reads
// key/value head h / (NH / NKV); scores are scaled by 1/sqrt(HS). Causal (a language model: query
// t sees keys 0..t) or not (every query sees every key of its sequence: an image's pixels).
struct AttnShape {
  int64_t B = 1, T = 1, NH = 1, NKV = 1, HS = 1;
  int64_t q_tile = 64, k_tile = 64;  // flash tiles: query rows and keys per block
  bool causal = true;
  int64_t qkv_cols() const { return (NH + 2 * NKV) * HS; }
  int64_t rows() const { return B * T; }
};
// Checks the shape (heads dividing, positive sizes); throws genperf::Error naming `op`.
void check_attn_shape(const char* op, const AttnShape& s);

// Naive: scores materialized. out[N, NH*HS] =; probs[B, NH, T, T] = softmax rows (causal: zero
// above the diagonal), saved for backward.
template <typename F>
void attention_forward_naive(F* out, F* probs, const F* qkv, const AttnShape& s,
                             Device dev = Device::CPU);
// dqkv[N, QKV] =.
template <typename F>
void attention_backward_naive(F* dqkv, const F* dout, const F* qkv, const F* probs,
                              const AttnShape& s, Device dev = Device::CPU);
// Flash: tiles of q_tile queries against k_tile keys with an online softmax; saves only
// lse[B, NH, T] (log-sum-exp of each query's scaled scores), memory linear in T.
template <typename F>
void attention_forward_flash(F* out, F* lse, const F* qkv, const AttnShape& s,
                             Device dev = Device::CPU);
// Recomputes each tile's probabilities from q, k and lse; dqkv[N, QKV] =.
template <typename F>
void attention_backward_flash(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse,
                              const AttnShape& s, Device dev = Device::CPU);

// The optimizer's ops, over n floats (float only; results independent of the thread count).
// One AdamW update: p *= keep; m, v moments; p -= step_size m / (sqrt(v) inv_bc2_sqrt + eps).
struct AdamWStep {
  float keep, beta1, beta2, step_size, inv_bc2_sqrt, eps;
};
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s,
                Device dev = Device::CPU);
// Sum of x[i]^2 in double, over fixed chunks added in order.
double sum_squares(const float* x, int64_t n, Device dev = Device::CPU);
// x[i] *= k.
void scale(float* x, int64_t n, float k, Device dev = Device::CPU);

// Floats of scratch both backwards need with GQA (key/value gradients per query head, summed
// over each group afterwards); 0 without GQA. For memory accounting.
int64_t attention_gqa_scratch(const AttnShape& s);

}  // namespace genperf::ops

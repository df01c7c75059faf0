// The CPU kernels of the training ops (genperf/ops_train.h), the entries of the CPU backend's
// training table: ops::X<float> runs cpu::X<float> through the table, ops::X<double> (the float64
// reference) runs cpu::X<double>, the same algorithm with scalar loops. Same arguments as ops::X,
// without the device. Threads: OpenMP over rows, heads and tiles (num_threads()); results depend
// only on the thread count.
#pragma once
#include <cstdint>

#include "genperf/ops_train.h"

namespace genperf::cpu {

using ops::AdamWStep;
using ops::AttnShape;
using ops::Bf16Scratch;
using ops::LoraShape;
using ops::RopeTable;

template <typename F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C, int64_t V);
template <typename F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C);
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int64_t N, int64_t C, double eps);
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd,
                      int64_t N, int64_t C);
template <typename F>
void rope_forward(F* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS, const RopeTable<F>& rt,
                  RopeStyle style);
template <typename F>
void rope_backward(F* dx, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                   const RopeTable<F>& rt, RopeStyle style);
template <typename F>
void swiglu_forward(F* out, const F* gu, int64_t N, int64_t FF);
template <typename F>
void swiglu_backward(F* dgu, const F* dout, const F* gu, int64_t N, int64_t FF);
template <typename F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t IC,
                    int64_t OC, const Bf16Scratch* bf16);
template <typename F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N,
                     int64_t IC, int64_t OC, const Bf16Scratch* bf16);
template <typename F>
void lora_forward(F* y, int64_t ldy, F* v, F* xd, const F* x, const F* A, const F* B,
                  const LoraShape& s);
template <typename F>
void lora_backward(F* dx, F* dA, F* dB, const F* dy, int64_t ldy, const F* x, const F* v,
                   const F* A, const F* B, F* xd, F* dv, const LoraShape& s);
template <typename F>
double crossentropy_forward(F* lse, const F* logits, const int32_t* targets, int64_t N, int64_t V,
                            int64_t* count);
template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int32_t* targets,
                           int64_t N, int64_t V, double dloss);
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n);
template <typename F>
void residual_backward(F* dres, const F* dbranch, int64_t n);
template <typename F>
void attention_forward_naive(F* out, F* probs, const F* qkv, const AttnShape& s);
template <typename F>
void attention_backward_naive(F* dqkv, const F* dout, const F* qkv, const F* probs,
                              const AttnShape& s);
template <typename F>
void attention_forward_flash(F* out, F* lse, const F* qkv, const AttnShape& s);
template <typename F>
void attention_backward_flash(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse,
                              const AttnShape& s);

// The optimizer's kernels, over n elements in fixed chunks (float only).
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);
double sum_squares_chunked(const float* x, int64_t n);
void scale_chunked(float* x, int64_t n, float k);

}  // namespace genperf::cpu

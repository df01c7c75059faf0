// The work of each op family, for benchmarks and the op harness's perf mode: floating-point
// operations (a multiply-add is 2) and the bytes the op must move at least (each operand read
// once, each result written once; weights and caches at their encoded size, traits(dtype)), so
// that achieved FLOP/s and GB/s can be set against the machine's GEMM peak and read bandwidth.
// Elementwise transcendental functions count as a few FLOPs each (exp: 1, silu: 4); the figures
// are conventions for comparison, not instruction counts.
//
// Shape legend as in ops.h and ops_train.h: T tokens, K input features, N output features,
// H query heads, Hkv key/value heads, D head dimension, S keys; N rows, C channels, IC/OC,
// V vocabulary, FF MLP hidden size.
#pragma once
#include <cstdint>

#include "genperf/dtype.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"

namespace genperf::ops {

struct OpCost {
  double flops = 0, bytes = 0;
};

// --- Inference ops (ops.h) ---
// y[T,N] = x[T,K] w[N,K]^T (+ bias): the weight read at its encoded size.
OpCost linear_cost(int64_t T, int64_t K, int64_t N, DType weight, bool bias = false);
// Causal attention of T queries at positions q_pos0.. over a cache of type kv (keys 0..q_pos0+t);
// causal = false: every query sees all q_pos0 + T keys.
OpCost attention_cost(int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t q_pos0, DType kv,
                      bool causal = true);
OpCost rms_norm_cost(int64_t T, int64_t K);
OpCost rope_cost(int64_t T, int64_t H, int64_t D);
OpCost silu_mul_cost(int64_t T, int64_t F);
OpCost add_cost(int64_t T, int64_t K);
OpCost embedding_cost(int64_t T, int64_t K, DType table);
OpCost store_rows_cost(int64_t T, int64_t N, DType dst);

// --- Training ops (ops_train.h), float; forward and backward ---
OpCost embedding_forward_cost(int64_t N, int64_t C);
OpCost embedding_backward_cost(int64_t N, int64_t C);
OpCost rmsnorm_forward_cost(int64_t N, int64_t C);
OpCost rmsnorm_backward_cost(int64_t N, int64_t C);
OpCost rope_train_cost(int64_t N, int64_t heads, int64_t HS);  // forward or backward
OpCost swiglu_forward_cost(int64_t N, int64_t FF);
OpCost swiglu_backward_cost(int64_t N, int64_t FF);
OpCost matmul_forward_cost(int64_t N, int64_t IC, int64_t OC, bool bias);
// Both products (dinp and dw) and, with bias, the column sums.
OpCost matmul_backward_cost(int64_t N, int64_t IC, int64_t OC, bool bias);
OpCost lora_forward_cost(const LoraShape& s);
OpCost lora_backward_cost(const LoraShape& s);
OpCost crossentropy_forward_cost(int64_t N, int64_t V);
OpCost crossentropy_backward_cost(int64_t N, int64_t V);
OpCost residual_forward_cost(int64_t n);
OpCost residual_backward_cost(int64_t n);
// Naive and flash differ in bytes (the naive one stores probs[B, NH, T, T]) and in backward
// FLOPs (flash recomputes the scores: 5 products of T x T x HS instead of 4).
OpCost attention_forward_cost(const AttnShape& s, bool flash);
OpCost attention_backward_cost(const AttnShape& s, bool flash);
OpCost adamw_cost(int64_t n);
OpCost sum_squares_cost(int64_t n);
OpCost scale_cost(int64_t n);

// 2-D convolution: 2 FLOPs per multiply-add of the patches inside the padded image (the
// padding's zeros counted, as cuDNN and oneDNN count them); backward twice forward (dx and dw).
OpCost conv2d_forward_cost(const ConvShape& s);
OpCost conv2d_backward_cost(const ConvShape& s);
// The arithmetic of the same 3 x 3 convolution (stride 1, padding 1) by Winograd's F(4 x 4, 3 x 3):
// 36 products per 4 x 4 block of outputs and channel pair where the direct sum takes 144, and the
// input and output transforms (the filters' transform, once per weights, is not counted). The
// model's FLOPs stay conv2d_forward_cost's; this is what a floor holds a Winograd kernel to.
OpCost conv2d_winograd_forward_cost(const ConvShape& s);
// Image ops (ops_image.h), on [B, HW, C] images (f32; two passes over x for the statistics).
OpCost group_norm_forward_cost(int64_t B, int64_t HW, int64_t C);
OpCost group_norm_backward_cost(int64_t B, int64_t HW, int64_t C);
OpCost silu_forward_cost(int64_t n);
OpCost silu_backward_cost(int64_t n);
OpCost group_norm_silu_forward_cost(int64_t B, int64_t HW, int64_t C);
OpCost group_norm_silu_backward_cost(int64_t B, int64_t HW, int64_t C);
// Resampling by 2 of a [B, H, W, C] input (up: 4x the pixels out; pool: a quarter).
OpCost upsample2x_cost(int64_t B, int64_t H, int64_t W, int64_t C);  // forward or backward
OpCost avgpool2x_cost(int64_t B, int64_t H, int64_t W, int64_t C);   // forward or backward
OpCost concat_channels_cost(int64_t N, int64_t Ca, int64_t Cb);      // forward or backward
OpCost add_image_bias_forward_cost(int64_t B, int64_t HW, int64_t C);
OpCost add_image_bias_backward_cost(int64_t B, int64_t HW, int64_t C);
OpCost mse_forward_cost(int64_t n);
OpCost mse_backward_cost(int64_t n);

}  // namespace genperf::ops

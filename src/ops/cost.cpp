// The op costs of genperf/ops_cost.h. Bytes are the compulsory traffic (each operand read once,
// each result written once) in the operands' encoded sizes; FLOPs count a multiply-add as 2.
#include "genperf/ops_cost.h"

namespace genperf::ops {
namespace {

constexpr double kF = 4;  // bytes of an f32 activation
double d(int64_t v) { return double(v); }
double enc(DType t, int64_t n) { return double(bytes_for(t, n)); }

// Query-key pairs attention scores: causal rows t see q_pos0 + t + 1 keys.
double attended_pairs(int64_t T, int64_t q_pos0, bool causal) {
  return causal ? d(T) * d(q_pos0) + d(T) * d(T + 1) / 2.0 : d(T) * d(q_pos0 + T);
}

}  // namespace

OpCost linear_cost(int64_t T, int64_t K, int64_t N, DType weight, bool bias) {
  OpCost c;
  c.flops = 2.0 * d(T) * d(K) * d(N) + (bias ? d(T) * d(N) : 0.0);
  c.bytes = enc(weight, N * K) + kF * (d(T) * d(K) + d(T) * d(N) + (bias ? d(N) : 0.0));
  return c;
}

OpCost attention_cost(int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t q_pos0, DType kv,
                      bool causal) {
  OpCost c;
  // Per attended pair and head: a dot product for the score and an axpy of the value (2D each),
  // plus the exp and the softmax's scaling, counted as 3.
  c.flops = (4.0 * d(D) + 3.0) * d(H) * attended_pairs(T, q_pos0, causal);
  const int64_t S = q_pos0 + T;
  c.bytes = 2.0 * enc(kv, S * Hkv * D) + kF * 2.0 * d(T) * d(H) * d(D);
  return c;
}

OpCost rms_norm_cost(int64_t T, int64_t K) {
  return {4.0 * d(T) * d(K), kF * (2.0 * d(T) * d(K) + d(K))};
}

OpCost rope_cost(int64_t T, int64_t H, int64_t D) {
  // Each pair: 4 multiplies and 2 adds; the angles' sin and cos, one pair per frequency and row.
  return {3.0 * d(T) * d(H) * d(D) + 2.0 * d(T) * d(D / 2), kF * 2.0 * d(T) * d(H) * d(D)};
}

OpCost silu_mul_cost(int64_t T, int64_t F) {
  return {5.0 * d(T) * d(F), kF * 3.0 * d(T) * d(F)};
}

OpCost add_cost(int64_t T, int64_t K) { return {d(T) * d(K), kF * 3.0 * d(T) * d(K)}; }

OpCost embedding_cost(int64_t T, int64_t K, DType table) {
  return {0.0, enc(table, T * K) + kF * d(T) * d(K)};
}

OpCost store_rows_cost(int64_t T, int64_t N, DType dst) {
  // Rounding or quantizing: about 2 FLOPs per element (scale, round).
  return {traits(dst).block_size > 1 ? 2.0 * d(T) * d(N) : 0.0, kF * d(T) * d(N) + enc(dst, T * N)};
}

OpCost embedding_forward_cost(int64_t N, int64_t C) { return {0.0, kF * 2.0 * d(N) * d(C)}; }
OpCost embedding_backward_cost(int64_t N, int64_t C) {
  return {d(N) * d(C), kF * 3.0 * d(N) * d(C)};  // dout read, dwte rows read and written
}

OpCost rmsnorm_forward_cost(int64_t N, int64_t C) {
  return {4.0 * d(N) * d(C), kF * (2.0 * d(N) * d(C) + d(C) + d(N))};
}
OpCost rmsnorm_backward_cost(int64_t N, int64_t C) {
  // dot(dout * w, x) per row, then dinp and dw: about 8 FLOPs per element.
  return {8.0 * d(N) * d(C), kF * (3.0 * d(N) * d(C) + 3.0 * d(C) + d(N))};
}

OpCost rope_train_cost(int64_t N, int64_t heads, int64_t HS) {
  return {3.0 * d(N) * d(heads) * d(HS), kF * (2.0 * d(N) * d(heads) * d(HS) + d(HS))};
}

OpCost swiglu_forward_cost(int64_t N, int64_t FF) {
  return {5.0 * d(N) * d(FF), kF * 3.0 * d(N) * d(FF)};
}
OpCost swiglu_backward_cost(int64_t N, int64_t FF) {
  return {10.0 * d(N) * d(FF), kF * 5.0 * d(N) * d(FF)};
}

OpCost matmul_forward_cost(int64_t N, int64_t IC, int64_t OC, bool bias) {
  OpCost c;
  c.flops = 2.0 * d(N) * d(IC) * d(OC) + (bias ? d(N) * d(OC) : 0.0);
  c.bytes = kF * (d(N) * d(IC) + d(OC) * d(IC) + d(N) * d(OC) + (bias ? d(OC) : 0.0));
  return c;
}
OpCost matmul_backward_cost(int64_t N, int64_t IC, int64_t OC, bool bias) {
  OpCost c;
  c.flops = 4.0 * d(N) * d(IC) * d(OC) + (bias ? d(N) * d(OC) : 0.0);
  // dout, inp, w read; dinp written; dw read and written (+=); dbias read and written.
  c.bytes = kF * (d(N) * d(OC) + 2.0 * d(N) * d(IC) + 3.0 * d(OC) * d(IC) +
                  (bias ? 2.0 * d(OC) : 0.0));
  return c;
}

OpCost lora_forward_cost(const LoraShape& s) {
  OpCost c;
  c.flops = 2.0 * d(s.N) * d(s.r) * (d(s.in) + d(s.out)) + d(s.N) * d(s.out);
  c.bytes = kF * (d(s.N) * d(s.in) + d(s.r) * (d(s.in) + d(s.out)) + d(s.N) * d(s.r) +
                  2.0 * d(s.N) * d(s.out));
  return c;
}
OpCost lora_backward_cost(const LoraShape& s) {
  OpCost c;
  // dv = dy B, dB += dy^T v, dA += dv^T x, dx += dv A.
  c.flops = 4.0 * d(s.N) * d(s.r) * (d(s.in) + d(s.out));
  c.bytes = kF * (d(s.N) * d(s.out) + 3.0 * d(s.N) * d(s.in) + d(s.N) * d(s.r) +
                  3.0 * d(s.r) * (d(s.in) + d(s.out)));
  return c;
}

OpCost crossentropy_forward_cost(int64_t N, int64_t V) {
  return {3.0 * d(N) * d(V), kF * (d(N) * d(V) + d(N))};  // max, exp, sum per logit
}
OpCost crossentropy_backward_cost(int64_t N, int64_t V) {
  return {3.0 * d(N) * d(V), kF * (2.0 * d(N) * d(V) + d(N))};
}

OpCost residual_forward_cost(int64_t n) { return {d(n), kF * 3.0 * d(n)}; }
OpCost residual_backward_cost(int64_t n) { return {d(n), kF * 3.0 * d(n)}; }

OpCost attention_forward_cost(const AttnShape& s, bool flash) {
  const double pairs = d(s.B) * d(s.NH) * attended_pairs(s.T, 0, s.causal);
  OpCost c;
  c.flops = (4.0 * d(s.HS) + 3.0) * pairs;
  c.bytes = kF * (d(s.rows()) * d(s.qkv_cols()) + d(s.rows()) * d(s.NH) * d(s.HS));
  c.bytes += flash ? kF * d(s.B) * d(s.NH) * d(s.T) : kF * d(s.B) * d(s.NH) * d(s.T) * d(s.T);
  return c;
}
OpCost attention_backward_cost(const AttnShape& s, bool flash) {
  const double pairs = d(s.B) * d(s.NH) * attended_pairs(s.T, 0, s.causal);
  OpCost c;
  c.flops = ((flash ? 10.0 : 8.0) * d(s.HS) + 4.0) * pairs;
  // qkv read, dqkv written, dout read; naive reads probs, flash reads out and lse.
  c.bytes = kF * (2.0 * d(s.rows()) * d(s.qkv_cols()) + d(s.rows()) * d(s.NH) * d(s.HS));
  c.bytes += flash ? kF * (d(s.rows()) * d(s.NH) * d(s.HS) + d(s.B) * d(s.NH) * d(s.T))
                   : kF * d(s.B) * d(s.NH) * d(s.T) * d(s.T);
  return c;
}

OpCost adamw_cost(int64_t n) { return {12.0 * d(n), kF * 7.0 * d(n)}; }  // p, g, m, v in; p, m, v out
OpCost sum_squares_cost(int64_t n) { return {2.0 * d(n), kF * d(n)}; }
OpCost scale_cost(int64_t n) { return {d(n), kF * 2.0 * d(n)}; }

OpCost conv2d_forward_cost(const ConvShape& s) {
  const double out = d(s.B) * d(s.Ho()) * d(s.Wo()) * d(s.OC);
  return {2.0 * out * d(s.filter()) + out,
          kF * (d(s.B) * d(s.H) * d(s.W) * d(s.IC) + d(s.OC) * d(s.filter()) + out + d(s.OC))};
}
OpCost conv2d_winograd_forward_cost(const ConvShape& s) {
  const double tiles = d(s.B) * d((s.H + 3) / 4) * d((s.W + 3) / 4);
  // Per tile: 36 products per channel pair (multiply and add); per input channel 12 one-
  // dimensional transforms of 19 operations; per output channel 10 of 13, and the bias.
  const double flops = tiles * (72.0 * d(s.IC) * d(s.OC) + 228.0 * d(s.IC) + 146.0 * d(s.OC));
  return {flops, conv2d_forward_cost(s).bytes};
}
OpCost conv2d_backward_cost(const ConvShape& s) {
  const OpCost f = conv2d_forward_cost(s);
  return {2.0 * f.flops, 2.0 * f.bytes};
}

OpCost group_norm_forward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {7.0 * n, kF * (3.0 * n + 2.0 * d(C))};  // sum, squared deviations, scale and shift
}
OpCost group_norm_backward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {14.0 * n, kF * (5.0 * n + 3.0 * d(C))};  // two passes over x and dout, dx written
}
OpCost silu_forward_cost(int64_t n) { return {4.0 * d(n), kF * 2.0 * d(n)}; }
OpCost silu_backward_cost(int64_t n) { return {8.0 * d(n), kF * 3.0 * d(n)}; }
// Fused: the norm's passes with SiLU's arithmetic, and no round trip of y through memory.
OpCost group_norm_silu_forward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {11.0 * n, kF * (3.0 * n + 2.0 * d(C))};
}
OpCost group_norm_silu_backward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {25.0 * n, kF * (7.0 * n + 3.0 * d(C))};  // y recomputed, dy written and read back
}
OpCost upsample2x_cost(int64_t B, int64_t H, int64_t W, int64_t C) {
  const double n = d(B) * d(H) * d(W) * d(C);
  return {3.0 * n, kF * 5.0 * n};  // backward's adds; forward copies
}
OpCost avgpool2x_cost(int64_t B, int64_t H, int64_t W, int64_t C) {
  const double n = d(B) * d(H) * d(W) * d(C);
  return {n, kF * 1.25 * n};
}
OpCost concat_channels_cost(int64_t N, int64_t Ca, int64_t Cb) {
  return {0.0, kF * 2.0 * d(N) * d(Ca + Cb)};  // copies
}
OpCost add_image_bias_forward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {n, kF * (2.0 * n + d(B) * d(C))};  // x read and written in place
}
OpCost add_image_bias_backward_cost(int64_t B, int64_t HW, int64_t C) {
  const double n = d(B) * d(HW) * d(C);
  return {n, kF * (n + d(B) * d(C))};
}
OpCost mse_forward_cost(int64_t n) { return {3.0 * d(n), kF * 2.0 * d(n)}; }
OpCost mse_backward_cost(int64_t n) { return {2.0 * d(n), kF * 3.0 * d(n)}; }

}  // namespace genperf::ops

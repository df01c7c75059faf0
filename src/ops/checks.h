// Argument checks of the ops in ops.h, shared by ops::X and ops::ref::X so that either entry point
// rejects bad shapes with the same message ("[linear] x f32[7, 64] and w bf16[32, 48]: inner
// dimensions differ"). Each returns the sizes the op works on.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>

#include "genperf/ops.h"
#include "genperf/tensor.h"

namespace genperf::ops::detail {

// An activation of any rank is a matrix of rows: [..., K] is [rows, K] with rows the product of
// its leading dimensions (1 for a 1-D tensor), which the checks require to be collapsible (each
// leading stride is the next one times its size), so that row i starts at i times the row stride.
inline int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim(); ++d) rows *= t.size(d);
  return rows;
}
// Row stride in bytes (meaningless, but harmless, for a single row).
inline size_t ld_of(const Tensor& t) { return t.ndim() == 1 ? 0 : t.stride(-2); }

// The scalar references read memory directly: their tensors must be on the CPU (null: skipped).
void check_on_cpu(const char* op, std::initializer_list<const Tensor*> ts);

struct LinearDims {
  int64_t T, K, N;
};
LinearDims check_linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);
void check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out);
void check_rms_norm(const Tensor& x, const Tensor& w, const Tensor& y);
// Returns D, the head dimension.
int64_t check_rope(const Tensor& x, int64_t nheads, std::span<const int32_t> pos,
                   std::span<const float> inv_freq);
void check_silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void check_add(const Tensor& x, const Tensor& y);
void check_store_rows(const Tensor& src, const Tensor& dst);
struct AttentionDims {
  int64_t T, S, D;
};
AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                              int64_t nkv_heads, int64_t q_pos0, const Tensor& out);

}  // namespace genperf::ops::detail

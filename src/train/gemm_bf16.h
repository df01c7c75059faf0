// Mixed-precision products of training: operands rounded to bf16 (round to nearest even),
// products accumulated in f32 into an f32 destination, on oneDNN matmul primitives (AVX512-BF16
// brgemm) created once per shape and strides and cached. Used by matmul_forward/backward when
// the graph trains in Precision::Bf16 (layers.h); callers check effective_precision first.
//
// Shape legend: C[M, N] = op(A)[M, K] · op(B)[K, N], row-major with leading dimensions in
// elements; a transposed operand is stored as its transpose (A as [K, M], B as [N, K]).
#pragma once
#include <cstdint>

namespace genperf::train {

// dst[rows, cols] = bf16(src[rows, cols]), src rows ld_src apart, dst contiguous; rows in
// parallel for large inputs. Subnormal inputs may become zero (as the inference path's).
void round_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, uint16_t* dst);

// C = (accumulate ? C : 0) + op(A) · op(B). oneDNN's brgemm kernels run when each operand's
// leading dimension equals its row length (contiguous), which is how the layers call it.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc,
               const char* what);

}  // namespace genperf::train

// The kernels that training's layers (src/train, templated on float and double) call: the float
// versions run the kernels of the level genperf::isa() selects (kernels.h; GENPERF_ISA lowers
// them as it lowers inference's), the double versions (float64 gradient checks) are portable
// loops (train_kernels.cpp). Single-threaded: callers parallelize over rows, heads and tiles.
//
// Shape legend: tile products C[M,N] = (accumulate ? C : 0) + alpha · A[M,K] · B[K,N], row-major,
// leading dimensions in elements (gemm_tile_tn reads A stored as [K, M]); n elements of a row.
#pragma once
#include <cstdint>

#include "backend/cpu/kernels.h"

namespace genperf::cpu {

void gemm_tile(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);
void gemm_tile(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc);
// The same with A stored transposed: C[M,N] (+)= alpha · A^T · B where A is [K, M] (lda >= M).
void gemm_tile_tn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);
void gemm_tile_tn(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc);

// dst[cols, rows] = src[rows, cols]^T.
template <typename F>
void transpose_tile(const F* src, int64_t lds, int64_t rows, int64_t cols, F* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// out[i] = exp(x[i] - shift) (out may be x, or null to only sum); returns the sum of the terms.
float exp_sum(const float* x, float* out, int64_t n, float shift);
double exp_sum(const double* x, double* out, int64_t n, double shift);
// out[i] = scale * exp(x[i] - shift) (out may be x).
void exp_scale(const float* x, float* out, int64_t n, float shift, float scale);
void exp_scale(const double* x, double* out, int64_t n, double shift, double scale);

// out = silu(g) * u (Kernels::silu_mul_row); and its backward dg = d u s (1 + g (1 - s)),
// du = d g s with s = sigmoid(g).
void swiglu_row(const float* g, const float* u, float* out, int64_t n);
void swiglu_row(const double* g, const double* u, double* out, int64_t n);
void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du,
                         int64_t n);
void swiglu_backward_row(const double* g, const double* u, const double* d, double* dg,
                         double* du, int64_t n);

// One AdamW update of n elements (AdamWStep, kernels.h).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);
// Sum of squares, accumulated in double.
double sum_squares(const float* x, int64_t n);

}  // namespace genperf::cpu

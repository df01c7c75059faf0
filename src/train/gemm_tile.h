// Small dense products for attention tiles (and the per-head products of naive attention):
// C[M,N] = (accumulate ? C : 0) + alpha · A[M,K] · B[K,N], all row-major with leading
// dimensions in elements (gemm_tile_tn reads A transposed, which spares callers a copy). The float version runs the AVX-512 kernel when genperf::isa() selects
// AVX-512 and a portable loop otherwise; the double version (gradient checks) is the portable
// loop. Single-threaded: callers parallelize over heads and tiles.
#pragma once
#include <cstdint>

namespace genperf::train {

void gemm_tile(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);
void gemm_tile(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc);
// The same with A stored transposed: C[M,N] (+)= alpha · A^T · B where A is [K, M] (lda >= M).
void gemm_tile_tn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);
void gemm_tile_tn(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc);

// The AVX-512 kernel (gemm_tile_avx512.cpp); call only where the CPU has AVX-512.
void gemm_tile_avx512(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                      int64_t ldc);

// dst[cols, rows] = src[rows, cols]^T.
template <typename F>
void transpose_tile(const F* src, int64_t lds, int64_t rows, int64_t cols, F* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

}  // namespace genperf::train

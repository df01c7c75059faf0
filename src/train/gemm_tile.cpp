// Portable tile product and the run-time choice of the AVX-512 kernel (see gemm_tile.h).
#include "train/gemm_tile.h"

#include "genperf/runtime.h"

namespace genperf::train {
namespace {

// Row by row, c[i, :] += alpha·a[i, k] · b[k, :]: the inner loop is a contiguous axpy that the
// compiler vectorizes (omp simd), with no reduction to reorder. TransA reads a[i, k] at A[k, i].
template <bool TransA, typename F>
void gemm_portable(int64_t M, int64_t N, int64_t K, F alpha, const F* A, int64_t lda, const F* B,
                   int64_t ldb, bool accumulate, F* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    F* c = C + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < N; ++j) c[j] = F(0);
    for (int64_t k = 0; k < K; ++k) {
      const F a = alpha * (TransA ? A[k * lda + i] : A[i * lda + k]);
      const F* b = B + k * ldb;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

}  // namespace

void gemm_tile(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (isa() == Isa::Avx512)
    gemm_tile_avx512(false, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
  else
    gemm_portable<false>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tile(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc) {
  gemm_portable<false>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tile_tn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (isa() == Isa::Avx512)
    gemm_tile_avx512(true, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
  else
    gemm_portable<true>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tile_tn(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc) {
  gemm_portable<true>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

}  // namespace genperf::train

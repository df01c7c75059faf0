// General matrix products of the CPU backend, on oneDNN (gemm_onednn.cpp: one engine, one cache
// of matmul primitives, oneDNN's ISA capped by GENPERF_ISA as genperf's kernels are), for the
// training layers; linear's prefill path (cpu_ops.h, linear_gemm) runs on the same engine.
// Multi-threaded over genperf::num_threads() (oneDNN's OpenMP), unless called inside a
// parallel region.
//
// Shape legend: C[M, N] = op(A)[M, K] · op(B)[K, N], row-major with leading dimensions in
// elements; a transposed operand is stored as its transpose (A as [K, M], B as [N, K]).
#pragma once
#include <algorithm>
#include <cstdint>

#include "genperf/runtime.h"

namespace genperf::cpu {

// C = alpha · op(A) · op(B) + beta · C (C is not read when beta is 0), oneDNN's sgemm. `what`
// names the caller's op in errors.
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc, const char* what);
// The same in float64, a scalar loop (the gradient checks' path; train_kernels.cpp).
void gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
              int64_t ldc);

// The same on the calling thread alone (oneDNN's sgemm at one thread), for callers that split
// C's rows among threads themselves: its bits do not depend on genperf's thread count, where
// gemm_f32's may (oneDNN splits the sums by the thread count; at the AVX2 level the bits change).
void gemm_f32_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc, const char* what);

// Both float types under one name, for kernels templated on the float type.
inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                 int64_t ldc, const char* what) {
  gemm_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, what);
}
inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                 const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
                 int64_t ldc, const char*) {
  gemm_f64(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                        int64_t ldc, const char* what) {
  gemm_f32_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, what);
}
inline void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                        const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                        double* C, int64_t ldc, const char*) {
  gemm_f64(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);  // one thread already
}

// C[rows, N] = A[rows, K] · op(B), A and C contiguous: fixed tiles of kGemmTileRows rows in
// parallel, each a GEMM on one thread, so that a row's sums run in one order for any thread
// count (the convolutions' GEMMs and matmul_forward: sampling gives the same image on any
// thread count at every ISA level).
inline constexpr int64_t kGemmTileRows = 128;
template <typename F>
void gemm_rows(bool trans_b, int64_t rows, int64_t N, int64_t K, const F* A, const F* B, int64_t ldb, F* C,
               const char* what) {
  const int64_t tiles = (rows + kGemmTileRows - 1) / kGemmTileRows;
#pragma omp parallel for num_threads(tiles > 1 ? num_threads() : 1) schedule(static)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r0 = t * kGemmTileRows;
    gemm_serial(false, trans_b, std::min(kGemmTileRows, rows - r0), N, K, F(1), A + r0 * K, K, B, ldb, F(0),
                C + r0 * N, N, what);
  }
}

// Mixed precision: C = (accumulate ? C : 0) + op(A) · op(B) with bf16 operands and products
// accumulated in f32 into an f32 destination. oneDNN's brgemm kernels run (AVX512-BF16 at the
// AVX-512 level) when each operand's leading dimension equals its row length (contiguous), which
// is how the training layers call it. Where oneDNN has no bf16 matmul (a CPU without AVX-512,
// or GENPERF_ISA below it), the operands are widened to f32, which is exact, and gemm_f32
// multiplies them: the same products, only slower (train's effective_precision keeps training
// in f32 there).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc,
               const char* what);

// dst[rows, cols] = bf16(src[rows, cols]) by the level's f32_to_bf16 (round to nearest even;
// subnormal inputs may become zero), src rows ld_src apart, dst contiguous; rows in parallel for
// large inputs.
void round_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, uint16_t* dst);

}  // namespace genperf::cpu

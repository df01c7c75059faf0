// General matrix products of the CPU backend, on oneDNN (gemm_onednn.cpp: one engine, one cache
// of matmul primitives, oneDNN's ISA capped by GENPERF_ISA as genperf's kernels are), for the
// training layers; linear's prefill path (cpu_ops.h, linear_gemm) runs on the same engine.
// Multi-threaded over genperf::num_threads() (oneDNN's OpenMP), unless called inside a
// parallel region.
//
// Shape legend: C[M, N] = op(A)[M, K] · op(B)[K, N], row-major with leading dimensions in
// elements; a transposed operand is stored as its transpose (A as [K, M], B as [N, K]).
#pragma once
#include <cstdint>

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

// Mixed precision: C = (accumulate ? C : 0) + op(A) · op(B) with bf16 operands and products
// accumulated in f32 into an f32 destination. Needs AVX512-BF16 at the AVX-512 level (callers
// check; train's effective_precision). oneDNN's brgemm kernels run when each operand's leading
// dimension equals its row length (contiguous), which is how the training layers call it.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc,
               const char* what);

// dst[rows, cols] = bf16(src[rows, cols]) by the level's f32_to_bf16 (round to nearest even;
// subnormal inputs may become zero), src rows ld_src apart, dst contiguous; rows in parallel for
// large inputs.
void round_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, uint16_t* dst);

}  // namespace genperf::cpu

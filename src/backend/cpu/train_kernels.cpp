// train_kernels.h: float through the level's table (kernels()), double as portable loops, and
// the float64 GEMM of gemm.h. Compiled with the baseline flags: the generic level's tile
// product (gemm_tile_portable) is the float instance of the same loop.
#include "backend/cpu/train_kernels.h"

#include <cmath>

#include "backend/cpu/gemm.h"

namespace genperf::cpu {
namespace {

// Row by row, c[i, :] += alpha·a[i, k] · b[k, :]: the inner loop is a contiguous axpy that the
// compiler vectorizes (omp simd), with no reduction to reorder. TransA reads a[i, k] at A[k, i].
template <bool TransA, typename F>
void tile_portable(int64_t M, int64_t N, int64_t K, F alpha, const F* A, int64_t lda, const F* B,
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

void gemm_tile_portable(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                        int64_t ldc) {
  if (trans_a)
    tile_portable<true>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
  else
    tile_portable<false>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tile(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  kernels().gemm_tile(false, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}
void gemm_tile(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc) {
  tile_portable<false>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tile_tn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  kernels().gemm_tile(true, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}
void gemm_tile_tn(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, bool accumulate, double* C, int64_t ldc) {
  tile_portable<true>(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

float exp_sum(const float* x, float* out, int64_t n, float shift) {
  return kernels().exp_sum(x, out, n, shift);
}
double exp_sum(const double* x, double* out, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    sum += e;
  }
  return sum;
}

void exp_scale(const float* x, float* out, int64_t n, float shift, float scale) {
  kernels().exp_scale(x, out, n, shift, scale);
}
void exp_scale(const double* x, double* out, int64_t n, double shift, double scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = scale * std::exp(x[i] - shift);
}

void swiglu_row(const float* g, const float* u, float* out, int64_t n) {
  kernels().silu_mul_row(g, u, out, n);
}
void swiglu_row(const double* g, const double* u, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
}

void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du,
                         int64_t n) {
  kernels().silu_mul_backward_row(g, u, d, dg, du, n);
}
void swiglu_backward_row(const double* g, const double* u, const double* d, double* dg,
                         double* du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-g[i]));
    du[i] = d[i] * g[i] * s;
    dg[i] = d[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
  }
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  kernels().adamw_update(p, g, m, v, n, s);
}

double sum_squares(const float* x, int64_t n) { return kernels().sum_squares(x, n); }

void gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
              int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
      }
      C[i * ldc + j] = (beta == 0.0 ? 0.0 : beta * C[i * ldc + j]) + alpha * s;
    }
}

}  // namespace genperf::cpu

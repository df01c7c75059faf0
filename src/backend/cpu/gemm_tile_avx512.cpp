// AVX-512 tile product C = (accumulate ? C : 0) + alpha · op(A) · B (kernels.h). A register
// block of MR rows by NV vectors of 16 columns accumulates over K: each step broadcasts MR
// values of A and loads NV vectors of one row of B, so B streams from cache once per MR rows.
#include <immintrin.h>

#include "backend/cpu/kernels.h"

namespace genperf::cpu {
namespace {

constexpr int kMaxRows = 4;     // MR
constexpr int kMaxVectors = 4;  // NV: 64 columns

// Loops over MR and NV are unrolled by pragma so that the accumulators stay in registers
// (without it GCC 12 keeps acc[][] in memory and stores it on every k).
template <bool TransA, int MR, int NV>
void block(int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
           bool accumulate, float* C, int64_t ldc, __mmask16 last) {
  __m512 acc[MR][NV];
  __mmask16 mask[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mask[v] = v == NV - 1 ? last : __mmask16(0xFFFF);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm512_maskz_loadu_ps(mask[v], B + k * ldb + 16 * v);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(TransA ? A[k * lda + r] : A[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  const __m512 s = _mm512_set1_ps(alpha);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* c = C + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(acc[r][v], s);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], c));
      _mm512_mask_storeu_ps(c, mask[v], x);
    }
}

using BlockFn = void (*)(int64_t, float, const float*, int64_t, const float*, int64_t, bool, float*,
                         int64_t, __mmask16);

template <bool TransA, int MR>
BlockFn pick(int nv) {
  switch (nv) {
    case 1: return block<TransA, MR, 1>;
    case 2: return block<TransA, MR, 2>;
    case 3: return block<TransA, MR, 3>;
    default: return block<TransA, MR, 4>;
  }
}

template <bool TransA>
BlockFn pick(int mr, int nv) {
  switch (mr) {
    case 1: return pick<TransA, 1>(nv);
    case 2: return pick<TransA, 2>(nv);
    case 3: return pick<TransA, 3>(nv);
    default: return pick<TransA, 4>(nv);
  }
}

BlockFn pick(bool trans_a, int mr, int nv) {
  return trans_a ? pick<true>(mr, nv) : pick<false>(mr, nv);
}

}  // namespace

void gemm_tile_avx512(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                      int64_t ldc) {
  // Row block i0 of A starts at row i0 (plain) or at column i0 (transposed).
  const auto a_rows = [&](int64_t i0) { return trans_a ? A + i0 : A + i0 * lda; };
  for (int64_t j0 = 0; j0 < N; j0 += 16 * kMaxVectors) {
    const int64_t n = N - j0 < 16 * kMaxVectors ? N - j0 : 16 * kMaxVectors;
    const int nv = int((n + 15) / 16);
    const int rem = int(n % 16);
    const __mmask16 last = rem ? __mmask16((1u << rem) - 1) : __mmask16(0xFFFF);
    const BlockFn full = pick(trans_a, kMaxRows, nv);
    int64_t i0 = 0;
    for (; i0 + kMaxRows <= M; i0 += kMaxRows)
      full(K, alpha, a_rows(i0), lda, B + j0, ldb, accumulate, C + i0 * ldc + j0, ldc, last);
    if (i0 < M)
      pick(trans_a, int(M - i0), nv)(K, alpha, a_rows(i0), lda, B + j0, ldb, accumulate,
                                     C + i0 * ldc + j0, ldc, last);
  }
}

}  // namespace genperf::cpu

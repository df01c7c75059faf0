// The 36 matrix products of Winograd's convolution (conv_winograd_avx2.cpp) with AVX-512: the
// same products, 16 columns to a register. Each output value is the same chain of fused
// multiply-adds over k, in the same order, as the AVX2 kernel's, so the bits are the same too; only
// the width changes (up to 6 x 64 a micro-kernel: 24 accumulators of AVX-512's 32 registers,
// each broadcast of A feeding four of them). And the tile transforms (conv_winograd_transforms.h)
// at 16 lanes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/conv_winograd_transforms.h"
#include "backend/cpu/image_ops.h"

namespace genperf::cpu {
namespace {

constexpr int kRows = 6;

// Sixteen floats a register (conv_winograd_transforms.h's V).
struct Avx512Lanes {
  using reg = __m512;
  static constexpr int kLanes = 16;
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg r) { _mm512_storeu_ps(p, r); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float f) { return _mm512_set1_ps(f); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  // As Avx2Lanes::round_bf16 (f32_to_bf16's bits, subnormals kept: not vcvtneps2bf16, which
  // reads them as zero).
  static reg round_bf16(reg r) {
    // (The shift zero-masked over all lanes: GCC 12 warns that the unmasked shift's intrinsic
    // reads an undefined register. A mask test for the bit instead measured 0.983 of this in bf16
    // sampling, 0.951-0.995 over 6 interleaved pairs.)
    const __m512i u = _mm512_castps_si512(r), top = _mm512_set1_epi32(int32_t(0xffff0000u));
    const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(__mmask16(0xffff), u, 16), _mm512_set1_epi32(1));
    const __m512i near = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), top);
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)), top);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, near, quiet));
  }
};

// C[R, 16 NV] (+)= A[R, K] B[K, 16 NV]: A[r, k] at A + r lda + k ldk, rows of B and C at stride
// ldb and ldc; Acc: C += (else C =). Named accumulators, as in the AVX2 kernel (GCC 12 keeps an
// array of them in memory).
template <int R, int NV, bool Acc>
void micro(const float* A, int64_t lda, int64_t ldk, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t K) {
  const __m512 z = _mm512_setzero_ps();
  __m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z, c23 = z,
         c30 = z, c31 = z, c32 = z, c33 = z, c40 = z, c41 = z, c42 = z, c43 = z, c50 = z, c51 = z, c52 = z, c53 = z;
#define GP_LOAD(r, v) \
  if constexpr (Acc && R > r && NV > v) c##r##v = _mm512_loadu_ps(C + r * ldc + 16 * v);
#define GP_LOAD_ROW(r) GP_LOAD(r, 0) GP_LOAD(r, 1) GP_LOAD(r, 2) GP_LOAD(r, 3)
  GP_LOAD_ROW(0) GP_LOAD_ROW(1) GP_LOAD_ROW(2) GP_LOAD_ROW(3) GP_LOAD_ROW(4) GP_LOAD_ROW(5)
#undef GP_LOAD_ROW
#undef GP_LOAD
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = B + k * ldb;
    const __m512 b0 = _mm512_loadu_ps(bk);
    const __m512 b1 = NV > 1 ? _mm512_loadu_ps(bk + 16) : b0;
    const __m512 b2 = NV > 2 ? _mm512_loadu_ps(bk + 32) : b0;
    const __m512 b3 = NV > 3 ? _mm512_loadu_ps(bk + 48) : b0;
    const float* ak = A + k * ldk;
#define GP_FMA(r, v) \
  if constexpr (NV > v) c##r##v = _mm512_fmadd_ps(a, b##v, c##r##v);
#define GP_ROW(r)                                        \
  if constexpr (R > r) {                                 \
    const __m512 a = _mm512_set1_ps(ak[r * lda]);        \
    GP_FMA(r, 0) GP_FMA(r, 1) GP_FMA(r, 2) GP_FMA(r, 3) \
  }
    GP_ROW(0) GP_ROW(1) GP_ROW(2) GP_ROW(3) GP_ROW(4) GP_ROW(5)
#undef GP_ROW
#undef GP_FMA
  }
#define GP_STORE(r, v) \
  if constexpr (R > r && NV > v) _mm512_storeu_ps(C + r * ldc + 16 * v, c##r##v);
#define GP_STORE_ROW(r) GP_STORE(r, 0) GP_STORE(r, 1) GP_STORE(r, 2) GP_STORE(r, 3)
  GP_STORE_ROW(0) GP_STORE_ROW(1) GP_STORE_ROW(2) GP_STORE_ROW(3) GP_STORE_ROW(4) GP_STORE_ROW(5)
#undef GP_STORE_ROW
#undef GP_STORE
}

template <int NV, bool Acc>
void rows_of(int64_t rows, const float* A, int64_t lda, int64_t ldk, const float* B, int64_t ldb, float* C,
             int64_t ldc, int64_t K) {
  for (int64_t r = 0; r < rows; r += kRows) {
    const float* a = A + r * lda;
    float* c = C + r * ldc;
    switch (std::min<int64_t>(kRows, rows - r)) {
      case 1: micro<1, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
      case 2: micro<2, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
      case 3: micro<3, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
      case 4: micro<4, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
      case 5: micro<5, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
      default: micro<6, NV, Acc>(a, lda, ldk, B, ldb, c, ldc, K); break;
    }
  }
}

}  // namespace

template <bool Acc>
void winograd_product_avx512(int64_t rows, int64_t cols, int64_t K, const float* A, int64_t lda, int64_t ldk,
                             const float* B, int64_t ldb, float* C, int64_t ldc) {
  for (int64_t j = 0; j < cols; j += 64) {
    const float* b = B + j;
    float* c = C + j;
    switch (std::min<int64_t>(4, (cols - j) / 16)) {
      case 1: rows_of<1, Acc>(rows, A, lda, ldk, b, ldb, c, ldc, K); break;
      case 2: rows_of<2, Acc>(rows, A, lda, ldk, b, ldb, c, ldc, K); break;
      case 3: rows_of<3, Acc>(rows, A, lda, ldk, b, ldb, c, ldc, K); break;
      default: rows_of<4, Acc>(rows, A, lda, ldk, b, ldb, c, ldc, K); break;
    }
  }
}

template void winograd_product_avx512<false>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                                             int64_t, float*, int64_t);
template void winograd_product_avx512<true>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                                            int64_t, float*, int64_t);

void winograd_transform_input_avx512(const float* x, const ops::ConvShape& s, int64_t t0, int64_t n, int64_t ld,
                                     float* V) {
  winograd::transform_input<Avx512Lanes>(x, s, winograd::Tiling(s), t0, n, ld, V);
}
void winograd_transform_output_avx512(const float* M, const float* bias, const ops::ConvShape& s, int64_t t0,
                                      int64_t n, float* out) {
  winograd::transform_output<Avx512Lanes>(M, bias, s, winograd::Tiling(s), t0, n, out);
}
void winograd_transform_output_grad_avx512(const float* dy, const ops::ConvShape& s, int64_t t0, int64_t n,
                                           int64_t ld, float* dM) {
  winograd::transform_output_grad<Avx512Lanes>(dy, s, winograd::Tiling(s), t0, n, ld, dM);
}

}  // namespace genperf::cpu

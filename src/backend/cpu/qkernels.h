// Kernels for weights in the block-quantized formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K; layouts in src/core/codec.h), reading the packed blocks as stored.
//
// Decode (few rows) runs as integer dot products, as llama.cpp does: each activation row is
// quantized once per call to 8-bit blocks of 32 (QAct), every weight block is unpacked in
// registers to unsigned bytes, multiplied with the activation bytes into exact int32 sums per
// block of 32 (maddubs/madd on AVX2, vpdpbusd on AVX-512 VNNI), and only those sums are scaled
// in f32. The integer sums are identical at every ISA level; the f32 sums differ in order only.
//
// Activation quantization, per block of 32 (the same bits at every level):
//   amax = max |x|;  q = round_half_even(x * (127 / amax)) in [-127, 127];  d = amax / 127;
//   s = sum of q; h[0], h[1] = sums of q over elements 0..15 and 16..31 (the sub-blocks of 16 of
//   Q2_K, Q3_K and Q6_K).
// An all-zero block has q = 0, d = 0; a block holding Inf or NaN has q = 0, d = NaN (its row's
// outputs become NaN, as an f32 product would). Rows are padded with zero blocks to a multiple
// of 256 elements, so kernels may run whole super-blocks of 8 blocks.
//
// Per output (weight row w, activation row t), with i the 32-block index, u the unsigned stored
// quant (2- to 6-bit value, Q8_0's signed byte) and dot_i = sum of u * q over the block:
//   Q8_0  y = sum_i dw_i dx_i dot_i
//   Q4_0  y = sum_i dw_i dx_i (dot_i - 8 s_i)          Q5_0: 16 in place of 8
//   Q4_1  y = sum_i dw_i dx_i dot_i + mw_i dx_i s_i    Q5_1: the same
//   Q4_K  y = sum_i d sc_i dx_i dot_i - dmin mn_i dx_i s_i   (sub-block i of 32)   Q5_K: the same
//   Q6_K  y = sum_i d dx_i sum_{j in i} sc_j (dot_j - 32 h_j)   (sub-blocks j of 16)
//   Q3_K  y = sum_i d dx_i sum_{j in i} sc_j (dot_j - 4 h_j)    (sc_j signed 6-bit)
//   Q2_K  y = sum_i d dx_i sum_{j in i} sc_j dot_j - dmin dx_i sum_{j in i} mn_j h_j
//
// Shape legend: T activation rows, K input features, N output rows (weights [N, K]).
#pragma once
#include <cstddef>
#include <cstdint>

#include "genperf/dtype.h"

// The SIMD files' small helpers must inline into the kernels: an out-of-line call costs a
// vzeroupper and a struct returned through memory per chunk (measured 10% on Q4_K, GCC 12).
#define GP_QINLINE inline __attribute__((always_inline))

namespace genperf::cpu {

// Activation rows quantized for the integer kernels. Row t of each array starts at
// t * (its per-row count); Kp = K rounded up to 256, nb = Kp / 32.
struct QAct {
  int8_t* qs;  // [T][Kp]     quants
  float* d;    // [T][nb]     block scales
  int32_t* s;  // [T][nb]     block sums of q
  int16_t* h;  // [T][2 * nb] half-block sums of q
  float* ds;   // [T][nb]     d * float(s), for the formats with an offset or min
  int64_t K, Kp, nb;
};

// Bytes of a QAct buffer for T rows of K, and the view of such a buffer (64-byte aligned).
size_t qact_bytes(int64_t T, int64_t K);
QAct qact_view(void* buf, int64_t T, int64_t K);

// Quantizes x[0..K) into row t of a (the padding blocks of the row are zeroed).
using QuantizeActFn = void (*)(const float* x, const QAct& a, int64_t t);

// y[t, n] = (row n of w) . (row t of a) (+ bias[n]) for t < T and n0 <= n < n1; w rows are ldw
// bytes apart, each a.K / block_size packed blocks. y points at row 0, column 0 of the output.
using QGemvFn = void (*)(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0,
                         int64_t n1, const float* bias, float* y, size_t ldy);

// The scalar level, which is also the reference of the SIMD levels: integer block sums in exact
// integer arithmetic, their scaled sum in double.
void quantize_act_generic(const float* x, const QAct& a, int64_t t);
QGemvFn qgemv_generic(DType wt);

// The SIMD levels' kernels, null for a type without one. AVX-512 has a VNNI variant (vpdpbusd)
// and one in AVX-512BW alone (vpmaddubsw + vpmaddwd); so do the AVX2 level's GEMM and packed
// kernels (vpdpbusd on 256-bit registers with AVX-VNNI, qkernels_avxvnni.cpp; its row GEMV has
// one variant). The table takes the one the CPU runs (avx_vnni() at AVX2), tests may call either
// where the CPU has VNNI.
void quantize_act_avx2(const float* x, const QAct& a, int64_t t);
QGemvFn qgemv_avx2(DType wt);
void quantize_act_avx512(const float* x, const QAct& a, int64_t t);
QGemvFn qgemv_avx512(DType wt, bool vnni);

// The integer GEMM for many activation rows (prefill), under the QGemvFn contract: the same
// exact integer block sums, scaled in f32 (in another order than the GEMV). Each call unpacks
// its weight rows once, 32 at a time, into a lane-per-row panel reused by every activation row
// (qgemm_avx512.cpp). Null for Q8_0 on AVX-512 without VNNI (its flipped bytes would
// saturate vpmaddubsw).
QGemvFn qgemm_avx512(DType wt, bool vnni);
// The same in AVX2 (vpmaddubsw + vpmaddwd, or vpdpbusd; panels of 16 rows; Q8_0 through the
// sign trick).
QGemvFn qgemm_avx2(DType wt, bool vnni);

// A thread's scratch buffer number `slot` (0 to 3) of at least n bytes, 64-byte aligned; valid
// until the thread's next call with the same slot. Kept apart from the SIMD files (compiled with
// their own flags), which share it.
uint8_t* thread_scratch(int slot, size_t n);

// Weights packed for these kernels (qpack.h: groups of 16 rows interleaved; w is the packed
// tensor's bytes, ldw its bytes per row, n0 and n1 multiples of 16): the GEMV and the GEMM under
// the QGemvFn contract, with the same integer block sums (null for a type without a packed
// layout). AVX-512 VNNI (vpdpbusd) and AVX2 (vpmaddubsw + vpmaddwd, a piece of 16 rows as two
// vectors of 8; its GEMM's 16-row panels are one packed group each); the scalar level unpacks 16
// rows at a time and runs qgemv_generic.
QGemvFn qgemv_packed_avx512(DType wt);
QGemvFn qgemm_packed_avx512(DType wt);
QGemvFn qgemv_packed_avx2(DType wt, bool vnni);
QGemvFn qgemm_packed_avx2(DType wt, bool vnni);
QGemvFn qgemv_packed_generic(DType wt);

// Row dequantization to f32 (vectorized), the same values as traits(wt).to_f32 within one
// rounding of the last operation (the compiler may fuse a multiply and an add); null: none.
using DequantFn = void (*)(const void* src, float* dst, int64_t n);
DequantFn dequant_avx2(DType wt);
DequantFn dequant_avx512(DType wt);
// The same values rounded to bf16 (nearest even), for CPUs with AVX512-BF16 only.
using Bf16DequantFn = void (*)(const void* src, uint16_t* dst, int64_t n);
Bf16DequantFn dequant_bf16_avx512(DType wt);

}  // namespace genperf::cpu

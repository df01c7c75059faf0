// The per-ISA kernel table of the CPU backend, for inference and training alike. Each ISA level
// (generic, AVX2, AVX-512) fills one Kernels struct in its own file, compiled with its own flags
// (kernels_generic.cpp, kernels_avx2.cpp, kernels_avx512.cpp); kernels() returns the one
// genperf::isa() selects, so one binary runs on any x86-64 machine. Kernels work on plain
// pointers, single-threaded; the drivers in cpu_ops.cpp (and training's layers, src/train) split
// the work over threads. Row strides (ld*) are in elements for f32 arrays
// and in bytes for weights (whose rows may be blocks of a packed format).
//
// Shape legend: T rows (tokens), K input features, N output features, D head dimension,
// S keys, Bq query rows of an attention tile.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/qkernels.h"
#include "genperf/dtype.h"
#include "genperf/ops_train.h"

namespace genperf::cpu {

// y[t, n] = dot(x[t, :K], w[n, :K]) (+ bias[n]) for t < T and n0 <= n < n1.
// bias is null or f32 indexed by n. y points at row 0, column 0 of the output.
using GemvFn = void (*)(const float* x, size_t ldx, int64_t T, const void* w, size_t ldw_bytes,
                        int64_t K, int64_t n0, int64_t n1, const float* bias, float* y, size_t ldy);
using ToF32Fn = void (*)(const void* src, float* dst, int64_t n);

// One attention work item: query rows [t0, t1) of heads [h0, h1) (which share kv head hk) against
// keys [j0, j1) of the cache. Row t sits at position q_pos0 + t and sees keys <= its position.
// A task of one head and at least kAttnTileMinRows rows (at most kAttnQueryBlock) runs as a tile.
// The cache (k, v) holds kv elements: f32, or f16 / bf16 (half the bytes) or Q8_0 (head dimension
// a multiple of 32), converted to f32 as they are loaded (prefill tiles: a key block's rows at a
// time, into stage). Key j of kv head hk starts at k + hk * kv_head + j * ldk (bytes): rows of
// all heads ([S, Hkv*D], kv_head = one head's D values) or head-major ([Hkv, S, D]).
struct AttentionTask {
  const float* q;
  size_t ldq;  // q[T, H*D]
  const void* k;
  size_t ldk;  // k[S, Hkv*D]
  const void* v;
  size_t ldv;  // v[S, Hkv*D]
  size_t kv_head;
  DType kv;
  int64_t D, q_pos0, hk, h0, h1, t0, t1, j0, j1;
  float scale;
  // Output of query (h, t): acc + (t - t0) * acc_ldt + (h - h0) * acc_ldh, D floats.
  // normalize: acc = softmax-weighted sum of values (final). Otherwise acc is that sum scaled by
  // l, and m[qi], l[qi] (qi = (t - t0) * (h1 - h0) + (h - h0)) are the softmax's max and sum of
  // exp(s - m), for merging key ranges; a query that sees no key gets m = -FLT_MAX, l = 0.
  float* acc;
  size_t acc_ldt, acc_ldh;
  bool normalize;
  float* m;
  float* l;        // per query; required by the row path even when normalizing
  float* scratch;  // attention_scratch_floats(D) floats
  float* stage;    // tiles: 2 * kAttnKeyBlock * D floats where kv is not f32 (k rows, then v rows)
};
// Keys per block of the online softmax, query rows per prefill tile, and the fewest rows for
// which a tile pays for its transposes.
constexpr int64_t kAttnKeyBlock = 64;
constexpr int64_t kAttnQueryBlock = 32;
constexpr int64_t kAttnTileMinRows = 8;
// Floats of scratch one task with head dimension D needs.
inline size_t attention_scratch_floats(int64_t D) {
  return size_t((D + kAttnKeyBlock + 3) * kAttnQueryBlock + kAttnKeyBlock);
}

using ops::AdamWStep;  // one AdamW update (genperf/ops_train.h)

// Small dense products (attention tiles of training, per-head products of naive attention):
// C[M,N] = (accumulate ? C : 0) + alpha · op(A) · B[K,N], row-major, leading dimensions in
// elements; op(A) is A[M,K], or A^T where trans_a and A is stored [K,M] (lda >= M).
using GemmTileFn = void (*)(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha,
                            const float* A, int64_t lda, const float* B, int64_t ldb,
                            bool accumulate, float* C, int64_t ldc);

struct Kernels {
  const char* name;
  // GEMV by weight type; null where the level has no kernel for that type.
  GemvFn gemv[size_t(DType::COUNT)];
  // Row conversion to f32 by type (vectorized where it pays); null: use traits().to_f32.
  ToF32Fn to_f32[size_t(DType::COUNT)];
  // Row conversion straight to bf16 (decoded panels of block formats for the bf16 GEMM);
  // null: to_f32, then f32_to_bf16.
  Bf16DequantFn to_bf16[size_t(DType::COUNT)];
  // Block-quantized weights (qkernels.h): activation rows to 8-bit blocks, and the integer GEMV
  // over them by weight type (null where the level has no kernel for the type).
  QuantizeActFn quantize_act;
  QGemvFn qgemv[size_t(DType::COUNT)];
  // dst = bf16(src), round to nearest even (activations for the bf16 GEMM); f32 subnormals may
  // become zero.
  void (*f32_to_bf16)(const float* src, uint16_t* dst, int64_t n);
  // dst = f16(src), round to nearest even (a KV cache of f16).
  void (*f32_to_f16)(const float* src, uint16_t* dst, int64_t n);
  // n values (a multiple of 32) to Q8_0 blocks, bit for bit as the reference quantizer
  // (traits(Q8_0).from_f32) writes them (a KV cache of Q8_0); null: use the reference.
  void (*quantize_q8_0)(const float* src, void* dst, int64_t n);
  // y = x * (1 / sqrt(mean(x^2) + eps)) * w; y may alias x.
  void (*rms_norm_row)(const float* x, const float* w, int64_t K, float eps, float* y);
  // Rotates nheads heads of D in x with per-pair cos/sin (D/2 each); style as RopeStyle.
  void (*rope_row)(float* x, int64_t nheads, int64_t D, const float* cos, const float* sin,
                   bool interleaved);
  void (*silu_mul_row)(const float* gate, const float* up, float* out, int64_t n);
  void (*add_row)(float* x, const float* y, int64_t n);
  // Sum of n floats, full-width loads (the bandwidth probe of src/bench/peaks.cpp).
  float (*sum_row)(const float* x, int64_t n);
  // Unnormalized flash attention over one task (see AttentionTask).
  void (*attention)(const AttentionTask& task);

  // The kernels of training's layers (train_kernels.h wraps them with their float64 twins).
  GemmTileFn gemm_tile;
  // out[i] = exp(x[i] - shift) (out may be x, or null to only sum); returns the sum of the terms.
  float (*exp_sum)(const float* x, float* out, int64_t n, float shift);
  // out[i] = scale * exp(x[i] - shift) (out may be x).
  void (*exp_scale)(const float* x, float* out, int64_t n, float shift, float scale);
  // The backward of silu_mul_row: dg = d u s (1 + g (1 - s)), du = d g s with s = sigmoid(g).
  void (*silu_mul_backward_row)(const float* g, const float* u, const float* d, float* dg,
                                float* du, int64_t n);
  void (*adamw_update)(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamWStep& s);
  // Sum of squares, accumulated in double.
  double (*sum_squares)(const float* x, int64_t n);

  // The kernels of the image ops' float path (image_ops_float.cpp).
  // out[i] = x[i] sigmoid(x[i]) (out may be x).
  void (*silu_row)(const float* x, float* out, int64_t n);
  // dx[i] = d[i] s (1 + x[i] (1 - s)), s = sigmoid(x[i]) (dx may be d).
  void (*silu_backward_row)(const float* x, const float* d, float* dx, int64_t n);
  // Group norm's passes over a block x[P, C] of P pixels (rows of C channels); per-channel
  // vectors have C entries. Moments: shift = the block's mean in float, s1 = sum(x - shift),
  // s2 = sum((x - shift)^2), from which the caller combines blocks exactly (in double).
  void (*group_norm_moments)(const float* x, int64_t P, int64_t C, float* shift, float* s1,
                             float* s2);
  // out = (x - mu) a + b, channel by channel (out may be x).
  void (*group_norm_apply)(const float* x, const float* mu, const float* a, const float* b,
                           int64_t P, int64_t C, float* out);
  // The backward's sums: sd = sum(d), sdx = sum(d (x - mu)).
  void (*group_norm_grad_sums)(const float* x, const float* d, const float* mu, int64_t P,
                               int64_t C, float* sd, float* sdx);
  // dx = a d - ((x - mu) e + b), channel by channel (dx may be d).
  void (*group_norm_dx)(const float* x, const float* d, const float* mu, const float* a,
                        const float* e, const float* b, int64_t P, int64_t C, float* dx);
  // Output row oy [Wo, OC] of a convolution with 1 to 4 output channels (image_conv.cpp's direct
  // path): out[ox, o] = bias[o] (when not null) + the sum over the K x K taps inside the image
  // and the IC channels of x[y, xx, c] w[o, ky, kx, c]; x one image [H, Wx, IC], w [OC, K, K, IC].
  void (*conv_few_oc_row)(const float* x, const float* w, const float* bias, int64_t H, int64_t Wx,
                          int64_t IC, int64_t OC, int64_t K, int64_t stride, int64_t pad, int64_t oy,
                          int64_t Wo, float* out);
};

const Kernels& kernels_generic();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
// The tile products of the generic level (train_kernels.cpp, a loop the compiler vectorizes) and
// of AVX-512 (gemm_tile_avx512.cpp; call only where the CPU has AVX-512).
void gemm_tile_portable(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                        int64_t ldc);
void gemm_tile_avx512(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, bool accumulate, float* C,
                      int64_t ldc);
// The table of the level genperf::isa() currently selects.
const Kernels& kernels();

}  // namespace genperf::cpu

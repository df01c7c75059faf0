// The ops models are built from, each declared once. `ops::X` validates its arguments and runs
// the kernel of its tensors' device from that device's backend table (src/ops/backend.h): on the
// CPU the fastest kernel for the tensors' types and the machine's ISA (src/backend/cpu/); a device
// without a kernel for the op throws "[X] has no CUDA kernel". `ops::ref::X` is the scalar
// reference: the fallback, and the test oracle.
//
// Shape legend: T tokens (rows), K input features, N output features, H query heads,
// Hkv key/value heads, D head dimension, S keys visible in the cache.
// Activations are f32 and row-major; a row stride may exceed the row length (views of a
// larger buffer). Weights are [N, K] as in Hugging Face checkpoints, in any type that has a kernel.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "genperf/tensor.h"

namespace genperf {

// How rotary embeddings pair the dimensions of a head. Hugging Face checkpoints rotate halves
// (dimension i with i + d/2, "NeoX" style); GGUF's `llama` architecture stores q/k permuted so
// that adjacent dimensions (2i, 2i+1) pair ("normal" style in ggml). The model supports both so
// that GGUF weights run as stored.
enum class RopeStyle : uint8_t { Neox = 0, Interleaved = 1 };

}  // namespace genperf

namespace genperf::ops {

// y[T,N] = x[T,K] · w[N,K]^T (+ bias[N]).  y is overwritten.
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);

// Several linears of one input, y_i = x · w_i^T (+ bias_i), the same values as calling linear
// for each (bit for bit). For few rows (decode) they run as one parallel region over all their
// output rows, with x quantized once for the block-quantized weights: one fork and join instead
// of one per weight (a Llama layer's q, k, v and its gate and up projections).
struct LinearOut {
  const Tensor* w;
  const Tensor* bias;  // may be null
  Tensor* y;
};
void linear_many(const Tensor& x, std::span<const LinearOut> outs);

// A linear weight in the layout the machine's fastest kernels read: for Q4_0, Q8_0, Q4_K, Q5_K
// and Q6_K weights of a multiple of 16 rows on AVX-512 VNNI (Q4_0, Q4_K and Q5_K on AVX2), a
// copy with rows interleaved in groups of 16 (Layout::kRows16, src/backend/cpu/qpack.h; the same
// bytes, so the same size); otherwise w itself. A packed result is only a weight for linear and
// linear_many, which give it the same values as w (the same integer block sums, f32 sums in
// another order). Pages of w borrowed from a file mapping are dropped once copied.
// GENPERF_PACK=0 in the environment turns packing off.
Tensor prepare_weight(const Tensor& w);

// out[T,K] = f32(table[ids[t], :]); ids are checked against the table's rows.
void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out);

// y[T,K] = x / sqrt(mean(x^2) + eps) * w[K].  y may alias x.
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);

// Rotates x[T, nheads*D] in place; row t is at position pos[t]. inv_freq has D/2 entries.
void rope(Tensor& x, int64_t nheads, std::span<const int32_t> pos, std::span<const float> inv_freq,
          RopeStyle style);

// out[T,F] = silu(gate) * up.  out may alias gate or up.
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);

// x[T,K] += y[T,K].
void add_inplace(Tensor& x, const Tensor& y);

// dst[T, N] = src[T, N] in dst's type: f32, f16 / bf16 rounded to nearest even, or Q8_0 blocks
// (ggml's quantizer; N a multiple of 32) (rows of a KV cache).
void store_rows(const Tensor& src, Tensor& dst);

// Causal grouped-query attention. q[T, H*D]; k, v[S, Hkv*D] hold keys for positions 0..S-1, in
// f32, f16, bf16 or Q8_0 (D a multiple of 32) (one type for both: a smaller KV cache);
// query row t sits at position q_pos0 + t and attends to keys 0..q_pos0+t (so q_pos0 + T <= S).
// out[T, H*D] = softmax(q k^T * scale) v per head; query head h uses kv head h / (H / Hkv).
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out);

namespace ref {
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);
void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
void rope(Tensor& x, int64_t nheads, std::span<const int32_t> pos, std::span<const float> inv_freq,
          RopeStyle style);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void add_inplace(Tensor& x, const Tensor& y);
void store_rows(const Tensor& src, Tensor& dst);
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out);
}  // namespace ref

// Work counts, for benchmarks: FLOPs of linear and attention as called above.
inline double linear_flops(int64_t T, int64_t K, int64_t N) { return 2.0 * double(T) * double(K) * double(N); }
double attention_flops(int64_t T, int64_t nheads, int64_t D, int64_t q_pos0);

}  // namespace genperf::ops

// The CPU kernels of the non-attention training ops (genperf/ops_train.h) and of the optimizer.
// Rows are split over OpenMP threads with static schedules; sums that cross rows (norm weight and
// bias gradients) go through per-thread partials added in thread order, so results depend only
// on the thread count. The optimizer's loops are elementwise or reduce over fixed chunks in a
// fixed order, so its results do not depend on the thread count at all.
#include "backend/cpu/train_ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/train_kernels.h"
#include "genperf/error.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

// Elements below which a loop stays on the calling thread (a parallel region costs more).
constexpr int64_t kParallelElems = int64_t(1) << 14;
int threads_for(int64_t elems) { return elems >= kParallelElems ? num_threads() : 1; }

// Per-thread partial sums of C values, reduced in thread order into out (+=).
template <typename F>
void reduce_partials(const std::vector<double>& part, int nt, int64_t C, F* out) {
  for (int t = 0; t < nt; ++t)
    for (int64_t c = 0; c < C; ++c) out[c] += F(part[size_t(t * C + c)]);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// embedding

template <typename F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    GP_CHECK(tokens[n] >= 0 && tokens[n] < V, "[embedding_forward] token ", tokens[n], " at row ", n,
             " is outside the vocabulary of ", V);
#pragma omp parallel for num_threads(threads_for(N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) std::copy_n(wte + int64_t(tokens[n]) * C, C, out + n * C);
}

// Threads own column ranges and walk the tokens in order, so repeated tokens add in one order.
template <typename F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C) {
  const int nt = threads_for(N * C);
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), n_th = omp_get_num_threads();
    const int64_t c0 = C * id / n_th, c1 = C * (id + 1) / n_th;
    for (int64_t n = 0; n < N; ++n) {
      F* d = dwte + int64_t(tokens[n]) * C;
      const F* g = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

// ------------------------------------------------------------------------------------------
// RMSNorm

template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int64_t N, int64_t C, double eps) {
#pragma omp parallel for num_threads(threads_for(N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* x = inp + n * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += double(x[c]) * double(x[c]);
    const F r = F(1.0 / std::sqrt(ss / double(C) + eps));
    rstd[n] = r;
    F* y = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * w[c];
  }
}

// y = x r w with r = (mean(x^2) + eps)^(-1/2): with g = dy w,
// dx = r g - r^3 x (g . x) / C, and dw = sum over rows of dy x r.
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd,
                      int64_t N, int64_t C) {
  const int nt = threads_for(N * C);
  std::vector<double> part(dw ? size_t(nt * C) : 0, 0.0);
#pragma omp parallel num_threads(nt)
  {
    double* pw = dw ? part.data() + omp_get_thread_num() * C : nullptr;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const F *x = inp + n * C, *dy = dout + n * C;
      const double r = double(rstd[n]);
      double gx = 0;
      for (int64_t c = 0; c < C; ++c) gx += double(dy[c]) * double(w[c]) * double(x[c]);
      const F a = F(r), b = F(r * r * r * gx / double(C));
      F* dx = dinp + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dx[c] = a * dy[c] * w[c] - b * x[c];
      if (dw)
        for (int64_t c = 0; c < C; ++c) pw[c] += double(dy[c]) * double(x[c]) * r;
    }
  }
  if (dw) reduce_partials(part, nt, C, dw);
}

// ------------------------------------------------------------------------------------------
// RoPE

namespace {

// Rotates each pair (a, b) by +angle (sign 1: forward) or -angle (sign -1: backward).
template <typename F>
void rope_rotate(F* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS, const RopeTable<F>& rt,
                 RopeStyle style, F sign, const char* op) {
  GP_CHECK(HS == 2 * rt.half, "[", op, "] head size ", HS, " does not match ", rt.half,
           " rotary frequencies");
  GP_CHECK(rt.T > 0 && N % rt.T == 0, "[", op, "] ", N, " rows are not whole sequences of ", rt.T);
  const int64_t half = rt.half;
  const bool neox = style == RopeStyle::Neox;
#pragma omp parallel for num_threads(threads_for(N * heads * HS)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* cs = rt.cos.data() + (n % rt.T) * half;
    const F* sn = rt.sin.data() + (n % rt.T) * half;
    for (int64_t h = 0; h < heads; ++h) {
      F* v = x + n * ldx + h * HS;
      for (int64_t i = 0; i < half; ++i) {
        F& a = neox ? v[i] : v[2 * i];
        F& b = neox ? v[i + half] : v[2 * i + 1];
        const F c = cs[i], s = sign * sn[i], a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = b0 * c + a0 * s;
      }
    }
  }
}

}  // namespace

template <typename F>
void rope_forward(F* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS, const RopeTable<F>& rt,
                  RopeStyle style) {
  rope_rotate(x, ldx, N, heads, HS, rt, style, F(1), "rope_forward");
}

template <typename F>
void rope_backward(F* dx, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                   const RopeTable<F>& rt, RopeStyle style) {
  rope_rotate(dx, ldx, N, heads, HS, rt, style, F(-1), "rope_backward");
}

// ------------------------------------------------------------------------------------------
// SwiGLU (row kernels in backend/cpu/train_kernels.h)

template <typename F>
void swiglu_forward(F* out, const F* gu, int64_t N, int64_t FF) {
#pragma omp parallel for num_threads(threads_for(N * FF)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* g = gu + n * 2 * FF;
    swiglu_row(g, g + FF, out + n * FF, FF);
  }
}

// silu(g) = g s with s = sigmoid(g): d silu/dg = s (1 + g (1 - s)).
template <typename F>
void swiglu_backward(F* dgu, const F* dout, const F* gu, int64_t N, int64_t FF) {
#pragma omp parallel for num_threads(threads_for(N * FF)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* g = gu + n * 2 * FF;
    F* dg = dgu + n * 2 * FF;
    swiglu_backward_row(g, g + FF, dout + n * FF, dg, dg + FF, FF);
  }
}

// ------------------------------------------------------------------------------------------
// matmul

namespace {

// Output channels per block of a bf16 matmul (Bf16Scratch); the scratch must hold at least one.
int64_t bf16_block(const Bf16Scratch& s, int64_t N, int64_t IC, int64_t OC, bool backward,
                   const char* op) {
  int64_t ocb = std::min<int64_t>(OC, int64_t(s.w.size()) / std::max<int64_t>(IC, 1));
  if (backward) ocb = std::min<int64_t>(ocb, int64_t(s.dout.size()) / std::max<int64_t>(N, 1));
  GP_CHECK(ocb >= 1 && int64_t(s.inp.size()) >= N * IC, "[", op, "] the bf16 scratch (inp ",
           s.inp.size(), ", dout ", s.dout.size(), ", w ", s.w.size(), ") is too small for N ", N,
           ", IC ", IC, ", OC ", OC);
  return ocb;
}

// out[:, o0:o0+ob] per block: inp and each block of weight rows rounded to bf16.
void matmul_forward_bf16(float* out, const float* inp, const float* w, int64_t N, int64_t IC,
                         int64_t OC, const Bf16Scratch& s) {
  const int64_t ocb = bf16_block(s, N, IC, OC, false, "matmul_forward");
  round_to_bf16(inp, IC, N, IC, s.inp.data());
  for (int64_t o0 = 0; o0 < OC; o0 += ocb) {
    const int64_t ob = std::min(ocb, OC - o0);
    round_to_bf16(w + o0 * IC, IC, ob, IC, s.w.data());
    gemm_bf16(false, true, N, ob, IC, s.inp.data(), IC, s.w.data(), IC, false, out + o0, OC,
                   "matmul_forward");
  }
}

// Per block of output channels: dout[:, block] rounded once serves both products; dinp sums
// the blocks' contributions (sum post-op from the second block on).
void matmul_backward_bf16(float* dinp, float* dw, const float* dout, const float* inp,
                          const float* w, int64_t N, int64_t IC, int64_t OC, const Bf16Scratch& s) {
  const int64_t ocb = bf16_block(s, N, IC, OC, true, "matmul_backward");
  if (dw) round_to_bf16(inp, IC, N, IC, s.inp.data());
  for (int64_t o0 = 0; o0 < OC; o0 += ocb) {
    const int64_t ob = std::min(ocb, OC - o0);
    round_to_bf16(dout + o0, OC, N, ob, s.dout.data());
    if (dinp) {
      round_to_bf16(w + o0 * IC, IC, ob, IC, s.w.data());
      gemm_bf16(false, false, N, IC, ob, s.dout.data(), ob, s.w.data(), IC, o0 > 0, dinp, IC,
                     "matmul_backward");
    }
    if (dw)
      gemm_bf16(true, false, ob, IC, N, s.dout.data(), ob, s.inp.data(), IC, true,
                     dw + o0 * IC, IC, "matmul_backward");
  }
}

}  // namespace

template <typename F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t IC,
                    int64_t OC, const Bf16Scratch* bf16) {
  if (N == 0 || OC == 0) return;
  if constexpr (std::is_same_v<F, float>) {
    if (bf16) matmul_forward_bf16(out, inp, w, N, IC, OC, *bf16);
    else gemm_rows(true, N, OC, IC, inp, w, IC, out, "matmul_forward");  // thread-count free
  } else {
    gemm(false, true, N, OC, IC, F(1), inp, IC, w, IC, F(0), out, OC, "matmul_forward");
  }
  if (!bias) return;
#pragma omp parallel for num_threads(threads_for(N * OC)) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) out[n * OC + o] += bias[o];
}

template <typename F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N,
                     int64_t IC, int64_t OC, const Bf16Scratch* bf16) {
  if (N == 0) return;
  bool done = false;
  if constexpr (std::is_same_v<F, float>) {
    if (bf16 && OC > 0) {
      matmul_backward_bf16(dinp, dw, dout, inp, w, N, IC, OC, *bf16);
      done = true;
    }
  }
  if (!done) {
    if (dinp) gemm(false, false, N, IC, OC, F(1), dout, OC, w, IC, F(0), dinp, IC, "matmul_backward");
    if (dw) gemm(true, false, OC, IC, N, F(1), dout, OC, inp, IC, F(1), dw, IC, "matmul_backward");
  }
  if (!dbias) return;
  // Threads own column ranges; each sums its columns over the rows in order.
#pragma omp parallel num_threads(threads_for(N * OC))
  {
    const int id = omp_get_thread_num(), n_th = omp_get_num_threads();
    const int64_t o0 = OC * id / n_th, o1 = OC * (id + 1) / n_th;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = o0; o < o1; ++o) dbias[o] += dout[n * OC + o];
  }
}

// ------------------------------------------------------------------------------------------
// LoRA adapters

namespace {

// xd = x · mask / (1 - p) (apply) or dx += t · mask / (1 - p) (accumulate), rows in parallel.
template <typename F>
void lora_dropout(F* dst, const F* src, const LoraShape& s, bool accumulate) {
  const F inv = F(1.0 / (1.0 - s.p));
#pragma omp parallel for num_threads(threads_for(s.N * s.in)) schedule(static)
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t i = 0; i < s.in; ++i) {
      const int64_t e = n * s.in + i;
      const F kept = ops::lora_keep(s.key, uint64_t(e), s.p) ? src[e] * inv : F(0);
      dst[e] = accumulate ? dst[e] + kept : kept;
    }
}

template <typename F>
void scale_in_place(F* x, int64_t n, double scale) {
  const F k = F(scale);
#pragma omp parallel for simd num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= k;
}

}  // namespace

template <typename F>
void lora_forward(F* y, int64_t ldy, F* v, F* xd, const F* x, const F* A, const F* B,
                  const LoraShape& s) {
  if (s.N == 0) return;
  const F* xin = x;
  if (s.p > 0) {
    lora_dropout(xd, x, s, false);
    xin = xd;
  }
  gemm(false, true, s.N, s.r, s.in, F(1), xin, s.in, A, s.in, F(0), v, s.r, "lora_forward");
  scale_in_place(v, s.N * s.r, s.scale);
  gemm(false, true, s.N, s.out, s.r, F(1), v, s.r, B, s.r, F(1), y, ldy, "lora_forward");
}

// With u = s · xd · A^T = v: dB += dy^T v, dv = s · dy B, dA += dv^T xd, dxd = dv A.
template <typename F>
void lora_backward(F* dx, F* dA, F* dB, const F* dy, int64_t ldy, const F* x, const F* v,
                   const F* A, const F* B, F* xd, F* dv, const LoraShape& s) {
  if (s.N == 0) return;
  gemm(true, false, s.out, s.r, s.N, F(1), dy, ldy, v, s.r, F(1), dB, s.r, "lora_backward");
  gemm(false, false, s.N, s.r, s.out, F(1), dy, ldy, B, s.r, F(0), dv, s.r, "lora_backward");
  scale_in_place(dv, s.N * s.r, s.scale);
  const F* xin = x;
  if (s.p > 0) {
    lora_dropout(xd, x, s, false);
    xin = xd;
  }
  gemm(true, false, s.r, s.in, s.N, F(1), dv, s.r, xin, s.in, F(1), dA, s.in, "lora_backward");
  if (s.p > 0) {
    gemm(false, false, s.N, s.in, s.r, F(1), dv, s.r, A, s.in, F(0), xd, s.in, "lora_backward");
    lora_dropout(dx, xd, s, true);
  } else {
    gemm(false, false, s.N, s.in, s.r, F(1), dv, s.r, A, s.in, F(1), dx, s.in, "lora_backward");
  }
}

// ------------------------------------------------------------------------------------------
// cross-entropy

template <typename F>
double crossentropy_forward(F* lse, const F* logits, const int32_t* targets, int64_t N, int64_t V,
                            int64_t* count) {
  for (int64_t n = 0; n < N; ++n)
    GP_CHECK(targets[n] >= -1 && targets[n] < V, "[crossentropy_forward] target ", targets[n],
             " at row ", n, " is outside -1..", V - 1);
  std::vector<double> row_loss(size_t(N), 0.0);
#pragma omp parallel for num_threads(threads_for(N * V)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* x = logits + n * V;
    F mx = x[0];
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, x[v]);
    const F s = exp_sum(x, static_cast<F*>(nullptr), V, mx);
    lse[n] = mx + std::log(s);
    if (targets[n] >= 0) row_loss[size_t(n)] = double(lse[n]) - double(x[targets[n]]);
  }
  double sum = 0;
  int64_t scored = 0;
  for (int64_t n = 0; n < N; ++n) {
    sum += row_loss[size_t(n)];
    scored += targets[n] >= 0;
  }
  *count = scored;
  return sum;
}

template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int32_t* targets,
                           int64_t N, int64_t V, double dloss) {
  const F dl = F(dloss);
#pragma omp parallel for num_threads(threads_for(N * V)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const F* x = logits + n * V;
    F* d = dlogits + n * V;
    if (targets[n] < 0) {
      std::fill_n(d, V, F(0));
      continue;
    }
    exp_scale(x, d, V, lse[n], dl);
    d[targets[n]] -= dl;
  }
}

// ------------------------------------------------------------------------------------------
// residual

template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n) {
#pragma omp parallel for simd num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename F>
void residual_backward(F* dres, const F* dbranch, int64_t n) {
#pragma omp parallel for simd num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dres[i] += dbranch[i];
}

// ------------------------------------------------------------------------------------------
// optimizer

namespace {
constexpr int64_t kOptChunk = int64_t(1) << 16;  // elements per task and per partial sum
constexpr int64_t kOptParallel = int64_t(1) << 15;
int threads_for_opt(int64_t n) { return n >= kOptParallel ? num_threads() : 1; }
}  // namespace

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  const int64_t chunks = (n + kOptChunk - 1) / kOptChunk;
#pragma omp parallel for num_threads(threads_for_opt(n)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i = c * kOptChunk;
    adamw_update(p + i, g + i, m + i, v + i, std::min(kOptChunk, n - i), s);
  }
}

void scale_chunked(float* x, int64_t n, float k) {
#pragma omp parallel for simd num_threads(threads_for_opt(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= k;
}

double sum_squares_chunked(const float* x, int64_t n) {
  const int64_t chunks = (n + kOptChunk - 1) / kOptChunk;
  std::vector<double> part(size_t(chunks), 0.0);
#pragma omp parallel for num_threads(threads_for_opt(n)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c)
    part[size_t(c)] = sum_squares(x + c * kOptChunk, std::min(kOptChunk, n - c * kOptChunk));
  double total = 0;
  for (double s : part) total += s;
  return total;
}

// ------------------------------------------------------------------------------------------

#define GENPERF_TRAIN_LAYERS(F)                                                                   \
  template void embedding_forward<F>(F*, const int32_t*, const F*, int64_t, int64_t, int64_t);   \
  template void embedding_backward<F>(F*, const F*, const int32_t*, int64_t, int64_t);           \
  template void rmsnorm_forward<F>(F*, F*, const F*, const F*, int64_t, int64_t, double);        \
  template void rmsnorm_backward<F>(F*, F*, const F*, const F*, const F*, const F*, int64_t,     \
                                    int64_t);                                                    \
  template void rope_forward<F>(F*, int64_t, int64_t, int64_t, int64_t, const RopeTable<F>&,     \
                                RopeStyle);                                                      \
  template void rope_backward<F>(F*, int64_t, int64_t, int64_t, int64_t, const RopeTable<F>&,    \
                                 RopeStyle);                                                     \
  template void swiglu_forward<F>(F*, const F*, int64_t, int64_t);                               \
  template void swiglu_backward<F>(F*, const F*, const F*, int64_t, int64_t);                    \
  template void matmul_forward<F>(F*, const F*, const F*, const F*, int64_t, int64_t, int64_t,   \
                                  const Bf16Scratch*);                                           \
  template void matmul_backward<F>(F*, F*, F*, const F*, const F*, const F*, int64_t, int64_t,   \
                                   int64_t, const Bf16Scratch*);                                 \
  template double crossentropy_forward<F>(F*, const F*, const int32_t*, int64_t, int64_t,        \
                                          int64_t*);                                             \
  template void crossentropy_backward<F>(F*, const F*, const F*, const int32_t*, int64_t,        \
                                         int64_t, double);                                       \
  template void residual_forward<F>(F*, const F*, const F*, int64_t);                            \
  template void residual_backward<F>(F*, const F*, int64_t);                                  \
  template void lora_forward<F>(F*, int64_t, F*, F*, const F*, const F*, const F*,               \
                                const LoraShape&);                                               \
  template void lora_backward<F>(F*, F*, F*, const F*, int64_t, const F*, const F*, const F*,    \
                                 const F*, F*, F*, const LoraShape&);

GENPERF_TRAIN_LAYERS(float)
GENPERF_TRAIN_LAYERS(double)
#undef GENPERF_TRAIN_LAYERS

}  // namespace genperf::cpu

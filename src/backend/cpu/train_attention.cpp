// The CPU kernels of grouped-query attention forward and backward (genperf/ops_train.h), two ways:
//   naive: per (sequence, head) the full score matrix S = q k^T / sqrt(HS) and its softmax P are
//          materialized in probs[B, NH, T, T] and kept for backward;
//   flash: query tiles meet key tiles with an online softmax (running max m and sum l rescale
//          the partial output), so only lse = m + log l per query is kept; backward recomputes
//          each tile's P = exp(S - lse) and uses D = rowsum(dO * O) in place of rowsum(dP * P).
// Both are built from the backend's tile products (gemm_tile, backend/cpu/train_kernels.h) on
// tiles (a transposed copy of k or v where a product needs k^T or v^T; gemm_tile_tn where it
// needs P^T or dS^T). Work is split over (sequence, head[, query tile]) tasks; each task writes
// its own head's columns, and GQA key/value gradients are summed over the group in head order
// afterwards, so results do not depend on which thread ran which task.
//
// Shape legend: B sequences, T tokens, NH query heads, NKV key/value heads, HS head size,
// ld = (NH + 2 NKV) HS the qkv row, ldo = NH HS the output row, Bq/Bk flash tile sizes,
// M/Nk rows/keys in the current tile.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/train_kernels.h"
#include "backend/cpu/train_ops.h"
#include "genperf/runtime.h"

namespace genperf::cpu {

namespace {

// Pointers to the rows of one sequence's head inside the packed buffers.
struct Heads {
  AttnShape s;
  int64_t ld, ldo, group;
  explicit Heads(const AttnShape& sh)
      : s(sh), ld(sh.qkv_cols()), ldo(sh.NH * sh.HS), group(sh.NH / sh.NKV) {}
  // P is F* or const F*: q, k, v of query head h in a qkv-shaped buffer, o in an output one.
  template <typename P> P q(P qkv, int64_t b, int64_t h) const { return qkv + b * s.T * ld + h * s.HS; }
  template <typename P> P k(P qkv, int64_t b, int64_t h) const {
    return qkv + b * s.T * ld + (s.NH + h / group) * s.HS;
  }
  template <typename P> P v(P qkv, int64_t b, int64_t h) const {
    return qkv + b * s.T * ld + (s.NH + s.NKV + h / group) * s.HS;
  }
  template <typename P> P o(P out, int64_t b, int64_t h) const { return out + b * s.T * ldo + h * s.HS; }
};

// Scratch that persists across calls, per thread and slot: tile buffers (and the naive T x T
// ones) would otherwise be allocated and page-faulted on every call, which costs more than the
// arithmetic on a virtual machine. It grows to the largest size asked for and is kept until the
// thread ends; the accounting (ActivationMemory::attention_backward) includes it.
enum ScratchSlot { kTiles = 0, kKvGrads = 1 };
template <typename F>
F* persistent_scratch(ScratchSlot slot, size_t n) {
  thread_local std::vector<F> bufs[2];
  std::vector<F>& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// Carves consecutive buffers out of one scratch block.
template <typename F>
class Carver {
 public:
  explicit Carver(F* base) : p_(base) {}
  F* take(int64_t n) {
    F* r = p_;
    p_ += n;
    return r;
  }

 private:
  F* p_;
};

// Threads for attention work of this size: one for the tiny shapes of tests.
int threads_for_attention(const AttnShape& s) {
  const double work = double(s.B) * double(s.NH) * double(s.T) * double(s.T) * double(s.HS);
  return work >= double(1 << 16) ? num_threads() : 1;
}

// Where each query head's key/value gradients go: straight into dqkv without GQA; with GQA into
// per-head buffers [B, NH, T, HS] that reduce() sums over each group, in head order, into dqkv.
template <typename F>
class KvGradSink {
 public:
  KvGradSink(F* dqkv, const Heads& hd) : hd_(hd), dqkv_(dqkv) {
    if (hd.group > 1) buf_ = persistent_scratch<F>(kKvGrads, size_t(ops::attention_gqa_scratch(hd.s)));
  }
  int64_t ld() const { return hd_.group > 1 ? hd_.s.HS : hd_.ld; }
  F* dk(int64_t b, int64_t h) { return hd_.group > 1 ? per_head(0, b, h) : hd_.k(dqkv_, b, h); }
  F* dv(int64_t b, int64_t h) { return hd_.group > 1 ? per_head(1, b, h) : hd_.v(dqkv_, b, h); }

  void reduce() {
    if (hd_.group == 1) return;
    const AttnShape& s = hd_.s;
#pragma omp parallel for num_threads(threads_for_attention(s)) schedule(static)
    for (int64_t bt = 0; bt < s.B * s.T; ++bt) {
      const int64_t b = bt / s.T, t = bt % s.T;
      for (int64_t which = 0; which < 2; ++which)
        for (int64_t h = 0; h < s.NH; ++h) {
          const F* src = per_head(which, b, h) + t * s.HS;
          F* dst = (which ? hd_.v(dqkv_, b, h) : hd_.k(dqkv_, b, h)) + t * hd_.ld;
          const bool first = h % hd_.group == 0;
          for (int64_t d = 0; d < s.HS; ++d) dst[d] = first ? src[d] : dst[d] + src[d];
        }
    }
  }

 private:
  F* per_head(int64_t which, int64_t b, int64_t h) {
    const AttnShape& s = hd_.s;
    return buf_ + ((which * s.B + b) * s.NH + h) * s.T * s.HS;
  }
  Heads hd_;
  F* dqkv_;
  F* buf_ = nullptr;
};

// Keys visible to query row i within keys [j0, j0 + Nk): causal, those at positions <= i;
// otherwise all of them.
inline int64_t visible(bool causal, int64_t i, int64_t j0, int64_t Nk) {
  return causal ? std::clamp<int64_t>(i - j0 + 1, 0, Nk) : Nk;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// naive

template <typename F>
void attention_forward_naive(F* out, F* probs, const F* qkv, const AttnShape& s) {
  const Heads hd(s);
  const int64_t T = s.T, HS = s.HS;
  const F scale = F(1.0 / std::sqrt(double(HS)));
#pragma omp parallel num_threads(threads_for_attention(s))
  {
    F* kt = persistent_scratch<F>(kTiles, size_t(HS * T));
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
      const int64_t b = bh / s.NH, h = bh % s.NH;
      F* S = probs + bh * T * T;
      transpose_tile(hd.k(qkv, b, h), hd.ld, T, HS, kt, T);
      gemm_tile(T, T, HS, scale, hd.q(qkv, b, h), hd.ld, kt, T, false, S, T);
      for (int64_t i = 0; i < T; ++i) {
        F* p = S + i * T;
        const int64_t cnt = visible(s.causal, i, 0, T);
        const F mx = *std::max_element(p, p + cnt);
        const F inv = F(1) / exp_sum(p, p, cnt, mx);
        for (int64_t j = 0; j < cnt; ++j) p[j] *= inv;
        std::fill(p + cnt, p + T, F(0));
      }
      gemm_tile(T, HS, T, F(1), S, T, hd.v(qkv, b, h), hd.ld, false, hd.o(out, b, h), hd.ldo);
    }
  }
}

// dP = dO v^T; dS = P * (dP - rowsum(P * dP)); dq = dS k / sqrt(HS); dk = dS^T q / sqrt(HS);
// dv = P^T dO.
template <typename F>
void attention_backward_naive(F* dqkv, const F* dout, const F* qkv, const F* probs,
                              const AttnShape& s) {
  const Heads hd(s);
  const int64_t T = s.T, HS = s.HS;
  const F scale = F(1.0 / std::sqrt(double(HS)));
  KvGradSink<F> sink(dqkv, hd);
#pragma omp parallel num_threads(threads_for_attention(s))
  {
    Carver<F> buf(persistent_scratch<F>(kTiles, size_t(HS * T + T * T)));
    F *vt = buf.take(HS * T), *ds = buf.take(T * T);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
      const int64_t b = bh / s.NH, h = bh % s.NH;
      const F* P = probs + bh * T * T;
      const F* dO = hd.o(dout, b, h);
      transpose_tile(hd.v(qkv, b, h), hd.ld, T, HS, vt, T);
      gemm_tile(T, T, HS, F(1), dO, hd.ldo, vt, T, false, ds, T);
      for (int64_t i = 0; i < T; ++i) {
        const F* p = P + i * T;
        F* d = ds + i * T;
        double dot = 0;
        for (int64_t j = 0, cnt = visible(s.causal, i, 0, T); j < cnt; ++j)
          dot += double(p[j]) * double(d[j]);
        for (int64_t j = 0; j < T; ++j) d[j] = p[j] * (d[j] - F(dot));
      }
      gemm_tile(T, HS, T, scale, ds, T, hd.k(qkv, b, h), hd.ld, false, hd.q(dqkv, b, h), hd.ld);
      gemm_tile_tn(T, HS, T, scale, ds, T, hd.q(qkv, b, h), hd.ld, false, sink.dk(b, h),
                        sink.ld());
      gemm_tile_tn(T, HS, T, F(1), P, T, dO, hd.ldo, false, sink.dv(b, h), sink.ld());
    }
  }
  sink.reduce();
}

// ------------------------------------------------------------------------------------------
// flash

template <typename F>
void attention_forward_flash(F* out, F* lse, const F* qkv, const AttnShape& s) {
  const Heads hd(s);
  const int64_t T = s.T, HS = s.HS, Bq = s.q_tile, Bk = s.k_tile;
  const int64_t tiles = (T + Bq - 1) / Bq;
  const F scale = F(1.0 / std::sqrt(double(HS)));
  const F neg_inf = -std::numeric_limits<F>::infinity();
#pragma omp parallel num_threads(threads_for_attention(s))
  {
    Carver<F> buf(persistent_scratch<F>(kTiles, size_t(HS * Bk + Bq * Bk + Bq * HS + 2 * Bq)));
    F *kt = buf.take(HS * Bk), *sc = buf.take(Bq * Bk), *acc = buf.take(Bq * HS), *m = buf.take(Bq),
      *l = buf.take(Bq);
    // Latest (heaviest) query tiles first, so the dynamic schedule ends balanced.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < s.B * s.NH * tiles; ++task) {
      const int64_t bh = task / tiles, i0 = (tiles - 1 - task % tiles) * Bq;
      const int64_t b = bh / s.NH, h = bh % s.NH, M = std::min(Bq, T - i0);
      const F* Q = hd.q(qkv, b, h) + i0 * hd.ld;
      std::fill_n(acc, Bq * HS, F(0));
      std::fill_n(m, Bq, neg_inf);
      std::fill_n(l, Bq, F(0));
      const int64_t keys = s.causal ? i0 + M : T;  // keys any row of this tile sees
      for (int64_t j0 = 0; j0 < keys; j0 += Bk) {
        const int64_t Nk = std::min(Bk, keys - j0);
        transpose_tile(hd.k(qkv, b, h) + j0 * hd.ld, hd.ld, Nk, HS, kt, Bk);
        gemm_tile(M, Nk, HS, scale, Q, hd.ld, kt, Bk, false, sc, Bk);
        for (int64_t r = 0; r < M; ++r) {
          F* p = sc + r * Bk;
          const int64_t cnt = visible(s.causal, i0 + r, j0, Nk);
          std::fill(p + cnt, p + Nk, F(0));
          if (cnt == 0) continue;
          const F mx = std::max(m[r], *std::max_element(p, p + cnt));
          const F corr = std::exp(m[r] - mx);
          l[r] = l[r] * corr + exp_sum(p, p, cnt, mx);
          m[r] = mx;
          F* a = acc + r * HS;
          for (int64_t d = 0; d < HS; ++d) a[d] *= corr;
        }
        gemm_tile(M, HS, Nk, F(1), sc, Bk, hd.v(qkv, b, h) + j0 * hd.ld, hd.ld, true,
                  acc, HS);
      }
      F* O = hd.o(out, b, h) + i0 * hd.ldo;
      for (int64_t r = 0; r < M; ++r) {
        const F inv = F(1) / l[r];
        for (int64_t d = 0; d < HS; ++d) O[r * hd.ldo + d] = acc[r * HS + d] * inv;
        lse[bh * T + i0 + r] = m[r] + std::log(l[r]);
      }
    }
  }
}

// Key tiles outside, query tiles inside: a key tile's dk, dv accumulate in tile-sized
// buffers while dq accumulates in place (one task owns one head, so no two threads share rows).
template <typename F>
void attention_backward_flash(F* dqkv, const F* dout, const F* qkv, const F* out,
                              const F* lse, const AttnShape& s) {
  const Heads hd(s);
  const int64_t T = s.T, HS = s.HS, Bq = s.q_tile, Bk = s.k_tile;
  const F scale = F(1.0 / std::sqrt(double(HS)));
  KvGradSink<F> sink(dqkv, hd);
#pragma omp parallel num_threads(threads_for_attention(s))
  {
    Carver<F> buf(persistent_scratch<F>(kTiles, size_t(2 * HS * Bk + 2 * Bq * Bk + 2 * Bk * HS + T)));
    F *kt = buf.take(HS * Bk), *vt = buf.take(HS * Bk), *p = buf.take(Bq * Bk), *dp = buf.take(Bq * Bk),
      *dk = buf.take(Bk * HS), *dv = buf.take(Bk * HS), *D = buf.take(T);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
      const int64_t b = bh / s.NH, h = bh % s.NH;
      const F *Q = hd.q(qkv, b, h), *K = hd.k(qkv, b, h), *V = hd.v(qkv, b, h);
      const F *dO = hd.o(dout, b, h), *O = hd.o(out, b, h), *L = lse + bh * T;
      F* dQ = hd.q(dqkv, b, h);
      for (int64_t t = 0; t < T; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < HS; ++d) dot += double(dO[t * hd.ldo + d]) * double(O[t * hd.ldo + d]);
        D[t] = F(dot);
        std::fill_n(dQ + t * hd.ld, HS, F(0));
      }
      for (int64_t j0 = 0; j0 < T; j0 += Bk) {
        const int64_t Nk = std::min(Bk, T - j0);
        transpose_tile(K + j0 * hd.ld, hd.ld, Nk, HS, kt, Bk);
        transpose_tile(V + j0 * hd.ld, hd.ld, Nk, HS, vt, Bk);
        std::fill_n(dk, Bk * HS, F(0));
        std::fill_n(dv, Bk * HS, F(0));
        for (int64_t i0 = s.causal ? j0 / Bq * Bq : 0; i0 < T; i0 += Bq) {
          const int64_t M = std::min(Bq, T - i0);
          gemm_tile(M, Nk, HS, scale, Q + i0 * hd.ld, hd.ld, kt, Bk, false, p, Bk);
          for (int64_t r = 0; r < M; ++r) {
            F* pr = p + r * Bk;
            const int64_t cnt = visible(s.causal, i0 + r, j0, Nk);
            exp_scale(pr, pr, cnt, L[i0 + r], F(1));
            std::fill(pr + cnt, pr + Nk, F(0));
          }
          gemm_tile_tn(Nk, HS, M, F(1), p, Bk, dO + i0 * hd.ldo, hd.ldo, true, dv, HS);
          gemm_tile(M, Nk, HS, F(1), dO + i0 * hd.ldo, hd.ldo, vt, Bk, false, dp, Bk);
          for (int64_t r = 0; r < M; ++r) {
            const F* pr = p + r * Bk;
            F* d = dp + r * Bk;
            const F Dr = D[i0 + r];
            for (int64_t c = 0; c < Nk; ++c) d[c] = pr[c] * (d[c] - Dr);
          }
          gemm_tile(M, HS, Nk, scale, dp, Bk, K + j0 * hd.ld, hd.ld, true, dQ + i0 * hd.ld,
                         hd.ld);
          gemm_tile_tn(Nk, HS, M, scale, dp, Bk, Q + i0 * hd.ld, hd.ld, true, dk, HS);
        }
        F *dK = sink.dk(b, h) + j0 * sink.ld(), *dV = sink.dv(b, h) + j0 * sink.ld();
        for (int64_t c = 0; c < Nk; ++c) {
          std::copy_n(dk + c * HS, HS, dK + c * sink.ld());
          std::copy_n(dv + c * HS, HS, dV + c * sink.ld());
        }
      }
    }
  }
  sink.reduce();
}

#define GENPERF_TRAIN_ATTENTION(F)                                                               \
  template void attention_forward_naive<F>(F*, F*, const F*, const AttnShape&);                 \
  template void attention_backward_naive<F>(F*, const F*, const F*, const F*, const AttnShape&); \
  template void attention_forward_flash<F>(F*, F*, const F*, const AttnShape&);                 \
  template void attention_backward_flash<F>(F*, const F*, const F*, const F*, const F*,         \
                                            const AttnShape&);

GENPERF_TRAIN_ATTENTION(float)
GENPERF_TRAIN_ATTENTION(double)
#undef GENPERF_TRAIN_ATTENTION

}  // namespace genperf::cpu

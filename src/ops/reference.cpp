// Scalar reference of every op in ops.h: the CPU fallback and the oracle the fast kernels are
// tested against. Plain loops, no threads; sums in double where that is cheap, so that the
// reference is closer to the exact result than any kernel it judges. Weights of any type are
// read through the traits table (traits(dtype).to_f32), one row at a time.
//
// Shape legend: T tokens, K input features, N output features, H query heads, Hkv key/value
// heads, D head dimension, S keys in the cache.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/qpack.h"
#include "genperf/error.h"
#include "ops/checks.h"
#include "genperf/ops.h"

namespace genperf::ops::ref {

using detail::ld_of;
using detail::rows_of;

namespace {
const char* row_ptr(const Tensor& t, int64_t i) {
  return static_cast<const char*>(t.raw()) + size_t(i) * ld_of(t);
}
char* row_ptr(Tensor& t, int64_t i) { return static_cast<char*>(t.raw()) + size_t(i) * ld_of(t); }

// Converts row i of a (possibly 1-D) tensor of any type to f32; a packed weight's row is first
// put back in the stored layout.
void row_to_f32(const Tensor& t, int64_t i, float* dst, int64_t n) {
  if (t.layout() == Layout::kRows16) {
    std::vector<uint8_t> row(t.stride(0));
    cpu::unpack_row16(t.dtype(), t.data<uint8_t>(), i, n, row.data());
    traits(t.dtype()).to_f32(row.data(), dst, n);
    return;
  }
  traits(t.dtype()).to_f32(row_ptr(t, i), dst, n);
}
}  // namespace

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  const auto [T, K, N] = detail::check_linear(x, w, bias, y);
  detail::check_on_cpu("linear", {&x, &w, bias, &y});
  std::vector<float> wrow(static_cast<size_t>(K)), b(static_cast<size_t>(N), 0.0f);
  if (bias) traits(bias->dtype()).to_f32(bias->raw(), b.data(), N);
  for (int64_t n = 0; n < N; ++n) {
    row_to_f32(w, n, wrow.data(), K);
    for (int64_t t = 0; t < T; ++t) {
      const auto* xr = reinterpret_cast<const float*>(row_ptr(x, t));
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(xr[k]) * double(wrow[size_t(k)]);
      reinterpret_cast<float*>(row_ptr(y, t))[n] = float(acc + double(b[size_t(n)]));
    }
  }
}

void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) {
  detail::check_embedding(table, ids, out);
  detail::check_on_cpu("embedding", {&table, &out});
  const int64_t K = table.size(1);
  for (size_t t = 0; t < ids.size(); ++t)
    row_to_f32(table, ids[t], reinterpret_cast<float*>(row_ptr(out, int64_t(t))), K);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  detail::check_rms_norm(x, w, y);
  detail::check_on_cpu("rms_norm", {&x, &w, &y});
  const int64_t T = rows_of(x), K = x.size(-1);
  std::vector<float> wf(static_cast<size_t>(K));
  traits(w.dtype()).to_f32(w.raw(), wf.data(), K);
  for (int64_t t = 0; t < T; ++t) {
    const auto* xr = reinterpret_cast<const float*>(row_ptr(x, t));
    auto* yr = reinterpret_cast<float*>(row_ptr(y, t));
    double ss = 0.0;
    for (int64_t k = 0; k < K; ++k) ss += double(xr[k]) * double(xr[k]);
    const float scale = float(1.0 / std::sqrt(ss / double(K) + double(eps)));
    for (int64_t k = 0; k < K; ++k) yr[k] = xr[k] * scale * wf[size_t(k)];
  }
}

// The angle is float(pos) * inv_freq in f32, as PyTorch's rotary embedding computes it
// (inv_freq[None, :] * position_ids[:, None] in float32), then cos and sin in f32.
void rope(Tensor& x, int64_t nheads, std::span<const int32_t> pos, std::span<const float> inv_freq,
          RopeStyle style) {
  const int64_t D = detail::check_rope(x, nheads, pos, inv_freq);
  detail::check_on_cpu("rope", {&x});
  const int64_t half = D / 2, T = rows_of(x);
  for (int64_t t = 0; t < T; ++t) {
    auto* xr = reinterpret_cast<float*>(row_ptr(x, t));
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(pos[size_t(t)]) * inv_freq[size_t(i)];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < nheads; ++h) {
        float* head = xr + h * D;
        float& a = style == RopeStyle::Neox ? head[i] : head[2 * i];
        float& b = style == RopeStyle::Neox ? head[i + half] : head[2 * i + 1];
        const float a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = b0 * c + a0 * s;
      }
    }
  }
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  detail::check_silu_mul(gate, up, out);
  detail::check_on_cpu("silu_mul", {&gate, &up, &out});
  const int64_t T = rows_of(gate), K = gate.size(-1);
  for (int64_t t = 0; t < T; ++t) {
    const auto* g = reinterpret_cast<const float*>(row_ptr(gate, t));
    const auto* u = reinterpret_cast<const float*>(row_ptr(up, t));
    auto* o = reinterpret_cast<float*>(row_ptr(out, t));
    for (int64_t k = 0; k < K; ++k) {
      const double gk = g[k];
      o[k] = float(gk / (1.0 + std::exp(-gk)) * double(u[k]));
    }
  }
}

void add_inplace(Tensor& x, const Tensor& y) {
  detail::check_add(x, y);
  detail::check_on_cpu("add_inplace", {&x, &y});
  const int64_t T = rows_of(x), K = x.size(-1);
  for (int64_t t = 0; t < T; ++t) {
    auto* a = reinterpret_cast<float*>(row_ptr(x, t));
    const auto* b = reinterpret_cast<const float*>(row_ptr(y, t));
    for (int64_t k = 0; k < K; ++k) a[k] += b[k];
  }
}

void store_rows(const Tensor& src, Tensor& dst) {
  detail::check_store_rows(src, dst);
  detail::check_on_cpu("store_rows", {&src, &dst});
  // dst [T, N] is one head of N values; head-major [H, T, D] takes head h of row t at dst[h, t].
  const auto& tr = traits(dst.dtype());
  const bool heads = dst.ndim() == 3;
  const int64_t H = heads ? dst.size(0) : 1, D = heads ? dst.size(2) : src.size(-1);
  const size_t lh = heads ? dst.stride(0) : 0, lt = heads ? dst.stride(1) : ld_of(dst);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < rows_of(src); ++t)
      tr.from_f32(reinterpret_cast<const float*>(row_ptr(src, t)) + h * D,
                  static_cast<char*>(dst.raw()) + size_t(h) * lh + size_t(t) * lt, D);
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out) {
  // Named variables, not a structured binding: the lambda below captures S and D, which clang
  // before 16 rejects for structured bindings (C++20 allows it).
  const detail::AttentionDims dims = detail::check_attention(q, k, v, nheads, nkv_heads, q_pos0, out);
  detail::check_on_cpu("attention", {&q, &k, &v, &out});
  const int64_t T = dims.T, S = dims.S, D = dims.D;
  if (k.ndim() == 3 || k.dtype() != DType::F32) {
    // A head-major cache, or one of f16, bf16 or Q8_0: its values, exactly, in f32 rows.
    auto rows = [&](const Tensor& c) {
      if (c.ndim() != 3) return c.to(DType::F32);
      Tensor r = Tensor::zeros({S, nkv_heads * D});
      for (int64_t h = 0; h < nkv_heads; ++h) {
        Tensor dst = r.slice(1, h * D, D);
        dst.copy_from(c.slice(0, h, 1).view({S, D}));
      }
      return r;
    };
    attention(q, rows(k), rows(v), nheads, nkv_heads, q_pos0, scale, out);
    return;
  }
  const int64_t group = nheads / nkv_heads;
  std::vector<double> p(static_cast<size_t>(S)), acc(static_cast<size_t>(D));
  for (int64_t h = 0; h < nheads; ++h) {
    const int64_t hk = h / group;
    for (int64_t t = 0; t < T; ++t) {
      const float* qr = reinterpret_cast<const float*>(row_ptr(q, t)) + h * D;
      const int64_t nkeys = q_pos0 + t + 1;  // causal: keys 0 .. q_pos0 + t
      double m = -INFINITY;
      for (int64_t j = 0; j < nkeys; ++j) {
        const float* kr = reinterpret_cast<const float*>(row_ptr(k, j)) + hk * D;
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += double(qr[d]) * double(kr[d]);
        p[size_t(j)] = dot * double(scale);
        m = std::max(m, p[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < nkeys; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < nkeys; ++j) {
        const float* vr = reinterpret_cast<const float*>(row_ptr(v, j)) + hk * D;
        for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += p[size_t(j)] * double(vr[d]);
      }
      float* o = reinterpret_cast<float*>(row_ptr(out, t)) + h * D;
      for (int64_t d = 0; d < D; ++d) o[d] = float(acc[size_t(d)] / sum);
    }
  }
}

}  // namespace genperf::ops::ref

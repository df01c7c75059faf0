// The CPU kernels of the image ops (genperf/ops_image.h), templated on the float type: float for
// the backend table, double for the float64 reference. Statistics and parameter gradients sum in
// double, per image, and images are added in order, so results depend on nothing but the inputs.
// Group norm and SiLU are here only as the reference (double); their float path is vectorized
// (image_ops_float.cpp).
#include "backend/cpu/image_ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

constexpr int64_t kParallelElems = int64_t(1) << 15;
int threads_for(int64_t elems) { return elems >= kParallelElems ? num_threads() : 1; }
constexpr int64_t kBiasBlock = 16;               // channels per task of add_image_bias_backward
constexpr int64_t kMseChunk = int64_t(1) << 16;  // values per partial sum of mse_forward

template <typename F>
F sigmoid(F x) {
  return F(1) / (F(1) + std::exp(-x));
}

}  // namespace

// ------------------------------------------------------------------------------------------
// group norm: one task per (image, group); a group is HW runs of Cg = C / G channels.

template <typename F>
void group_norm_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                        int64_t B, int64_t HW, int64_t C, int64_t G, double eps) {
  const int64_t Cg = C / G;
  const double inv_m = 1.0 / double(HW * Cg);
#pragma omp parallel for num_threads(threads_for(B * HW * C)) schedule(static)
  for (int64_t bg = 0; bg < B * G; ++bg) {
    const int64_t b = bg / G, c0 = (bg % G) * Cg;
    const F* xb = x + b * HW * C;
    double s = 0, ss = 0;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = c0; c < c0 + Cg; ++c) s += double(xb[p * C + c]);
    const double mu = s * inv_m;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        const double d = double(xb[p * C + c]) - mu;
        ss += d * d;
      }
    const double r = 1.0 / std::sqrt(ss * inv_m + eps);
    mean[bg] = F(mu);
    rstd[bg] = F(r);
    F* ob = out + b * HW * C;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = c0; c < c0 + Cg; ++c)
        ob[p * C + c] = F((double(xb[p * C + c]) - mu) * r) * gamma[c] + beta[c];
  }
}

// With xhat = (x - mean) rstd and g = dout * gamma over one group of M values:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  dgamma[c] += sum dout xhat,  dbeta[c] += sum dout.
template <typename F>
void group_norm_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                         const F* mean, const F* rstd, int64_t B, int64_t HW, int64_t C, int64_t G) {
  const int64_t Cg = C / G;
  const double inv_m = 1.0 / double(HW * Cg);
  // Per-image parameter gradients, added in image order afterwards.
  std::vector<double> pg(size_t(dgamma ? B * C : 0), 0.0), pb(size_t(dbeta ? B * C : 0), 0.0);
#pragma omp parallel for num_threads(threads_for(B * HW * C)) schedule(static)
  for (int64_t bg = 0; bg < B * G; ++bg) {
    const int64_t b = bg / G, c0 = (bg % G) * Cg;
    const F *xb = x + b * HW * C, *gb = dout + b * HW * C;
    const double mu = double(mean[bg]), r = double(rstd[bg]);
    double sg = 0, sgx = 0;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        const double xh = (double(xb[p * C + c]) - mu) * r, d = double(gb[p * C + c]);
        const double g = d * double(gamma[c]);
        sg += g;
        sgx += g * xh;
        if (dgamma) pg[size_t(b * C + c)] += d * xh;
        if (dbeta) pb[size_t(b * C + c)] += d;
      }
    const double mg = sg * inv_m, mgx = sgx * inv_m;
    F* db = dx + b * HW * C;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        const double xh = (double(xb[p * C + c]) - mu) * r;
        db[p * C + c] = F(r * (double(gb[p * C + c]) * double(gamma[c]) - mg - xh * mgx));
      }
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      if (dgamma) dgamma[c] += F(pg[size_t(b * C + c)]);
      if (dbeta) dbeta[c] += F(pb[size_t(b * C + c)]);
    }
}

// ------------------------------------------------------------------------------------------
// group norm then SiLU: the composition; the backward recomputes y = xhat gamma + beta from the
// statistics, by group_norm_forward's formula, then runs SiLU's and the norm's backwards.

template <typename F>
void group_norm_silu_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                             int64_t B, int64_t HW, int64_t C, int64_t G, double eps) {
  group_norm_forward(out, mean, rstd, x, gamma, beta, B, HW, C, G, eps);
  silu_forward(out, out, B * HW * C);
}

template <typename F>
void group_norm_silu_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                              const F* beta, const F* mean, const F* rstd, int64_t B, int64_t HW,
                              int64_t C, int64_t G) {
  const int64_t Cg = C / G, n = B * HW * C;
  std::vector<F> y(static_cast<size_t>(n)), dy(static_cast<size_t>(n));
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t bp = 0; bp < B * HW; ++bp) {
    const int64_t b = bp / HW;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = b * G + c / Cg, i = bp * C + c;
      y[size_t(i)] = F((double(x[i]) - double(mean[g])) * double(rstd[g])) * gamma[c] + beta[c];
    }
  }
  silu_backward(dy.data(), dout, y.data(), n);
  group_norm_backward(dx, dgamma, dbeta, dy.data(), x, gamma, mean, rstd, B, HW, C, G);
}

// ------------------------------------------------------------------------------------------
// SiLU

template <typename F>
void silu_forward(F* out, const F* x, int64_t n) {
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * sigmoid(x[i]);
}

template <typename F>
void silu_backward(F* dx, const F* dout, const F* x, int64_t n) {
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const F s = sigmoid(x[i]);
    dx[i] = dout[i] * s * (F(1) + x[i] * (F(1) - s));
  }
}

// ------------------------------------------------------------------------------------------
// resampling by 2: one task per output (up) or input (down) row of pixels

template <typename F>
void upsample2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C) {
#pragma omp parallel for num_threads(threads_for(4 * B * H * W * C)) schedule(static)
  for (int64_t row = 0; row < B * 2 * H; ++row) {
    const int64_t b = row / (2 * H), y = row % (2 * H);
    const F* src = x + ((b * H + y / 2) * W) * C;
    F* dst = out + row * 2 * W * C;
    for (int64_t xo = 0; xo < 2 * W; ++xo) std::copy_n(src + (xo / 2) * C, C, dst + xo * C);
  }
}

template <typename F>
void upsample2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C) {
#pragma omp parallel for num_threads(threads_for(4 * B * H * W * C)) schedule(static)
  for (int64_t row = 0; row < B * H; ++row) {
    const int64_t b = row / H, y = row % H;
    const F* d0 = dout + ((b * 2 * H + 2 * y) * 2 * W) * C;
    const F* d1 = d0 + 2 * W * C;
    F* o = dx + row * W * C;
    for (int64_t xi = 0; xi < W; ++xi)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t a = (2 * xi) * C + c, e = a + C;
        o[xi * C + c] = (d0[a] + d0[e]) + (d1[a] + d1[e]);
      }
  }
}

template <typename F>
void avgpool2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C) {
  const int64_t Ho = H / 2, Wo = W / 2;
#pragma omp parallel for num_threads(threads_for(B * H * W * C)) schedule(static)
  for (int64_t row = 0; row < B * Ho; ++row) {
    const int64_t b = row / Ho, y = row % Ho;
    const F* s0 = x + ((b * H + 2 * y) * W) * C;
    const F* s1 = s0 + W * C;
    F* o = out + row * Wo * C;
    for (int64_t xo = 0; xo < Wo; ++xo)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t a = (2 * xo) * C + c, e = a + C;
        o[xo * C + c] = ((s0[a] + s0[e]) + (s1[a] + s1[e])) * F(0.25);
      }
  }
}

template <typename F>
void avgpool2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C) {
  const int64_t Ho = H / 2, Wo = W / 2;
#pragma omp parallel for num_threads(threads_for(B * H * W * C)) schedule(static)
  for (int64_t row = 0; row < B * H; ++row) {
    const int64_t b = row / H, y = row % H;
    const F* d = dout + ((b * Ho + y / 2) * Wo) * C;
    F* o = dx + row * W * C;
    for (int64_t xi = 0; xi < W; ++xi)
      for (int64_t c = 0; c < C; ++c) o[xi * C + c] = d[(xi / 2) * C + c] * F(0.25);
  }
}

// ------------------------------------------------------------------------------------------
// bicubic up-sampling: each output coordinate o reads the 4 input taps i0 - 1 .. i0 + 2 (clamped)
// with Keys' weights; rows first into a [B, sH, W, C] intermediate, then columns.

namespace {

struct Taps {
  int64_t idx[4];
  double w[4];
};

double keys(double d) {  // Keys' cubic convolution kernel, a = -0.5
  const double a = -0.5, x = std::fabs(d);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// The taps of the n * s outputs of an axis of n inputs.
std::vector<Taps> taps(int64_t n, int64_t s) {
  std::vector<Taps> t(size_t(n * s));
  for (int64_t o = 0; o < n * s; ++o) {
    const double src = (double(o) + 0.5) / double(s) - 0.5, fl = std::floor(src);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = int64_t(fl) - 1 + k;
      t[size_t(o)].idx[k] = std::clamp<int64_t>(i, 0, n - 1);
      t[size_t(o)].w[k] = keys(src - double(i));
    }
  }
  return t;
}

}  // namespace

template <typename F>
void bicubic_up_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s) {
  const std::vector<Taps> ty = taps(H, s), tx = taps(W, s);
  std::vector<F> mid(size_t(B * H * s * W * C));
#pragma omp parallel for num_threads(threads_for(B * H * s * W * C)) schedule(static)
  for (int64_t r = 0; r < B * H * s; ++r) {  // rows: mid[b, oy] = sum_k w_k x[b, i_k]
    const int64_t b = r / (H * s);
    const Taps& t = ty[size_t(r % (H * s))];
    F* m = mid.data() + r * W * C;
    for (int64_t j = 0; j < W * C; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += t.w[k] * double(x[(b * H + t.idx[k]) * W * C + j]);
      m[j] = F(acc);
    }
  }
#pragma omp parallel for num_threads(threads_for(B * H * s * W * s * C)) schedule(static)
  for (int64_t r = 0; r < B * H * s; ++r) {  // columns
    const F* m = mid.data() + r * W * C;
    F* o = out + r * W * s * C;
    for (int64_t ox = 0; ox < W * s; ++ox) {
      const Taps& t = tx[size_t(ox)];
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += t.w[k] * double(m[t.idx[k] * C + c]);
        o[ox * C + c] = F(acc);
      }
    }
  }
}

// The transpose, in gather form (race-free): columns, then rows, each input collecting the
// outputs whose taps name it.
template <typename F>
void bicubic_up_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s) {
  const std::vector<Taps> ty = taps(H, s), tx = taps(W, s);
  std::vector<F> mid(size_t(B * H * s * W * C));
#pragma omp parallel for num_threads(threads_for(B * H * s * W * s * C)) schedule(static)
  for (int64_t r = 0; r < B * H * s; ++r) {
    const F* g = dout + r * W * s * C;
    F* m = mid.data() + r * W * C;
    std::vector<double> acc(size_t(W * C), 0.0);
    for (int64_t ox = 0; ox < W * s; ++ox)
      for (int k = 0; k < 4; ++k) {
        const double w = tx[size_t(ox)].w[k];
        double* a = acc.data() + tx[size_t(ox)].idx[k] * C;
        for (int64_t c = 0; c < C; ++c) a[c] += w * double(g[ox * C + c]);
      }
    for (int64_t j = 0; j < W * C; ++j) m[j] = F(acc[size_t(j)]);
  }
#pragma omp parallel for num_threads(threads_for(B * H * s * W * C)) schedule(static)
  for (int64_t r = 0; r < B * H; ++r) {
    const int64_t b = r / H, i = r % H;
    F* d = dx + r * W * C;
    std::vector<double> acc(size_t(W * C), 0.0);
    for (int64_t oy = 0; oy < H * s; ++oy)
      for (int k = 0; k < 4; ++k) {
        if (ty[size_t(oy)].idx[k] != i) continue;
        const double w = ty[size_t(oy)].w[k];
        const F* m = mid.data() + (b * H * s + oy) * W * C;
        for (int64_t j = 0; j < W * C; ++j) acc[size_t(j)] += w * double(m[j]);
      }
    for (int64_t j = 0; j < W * C; ++j) d[j] = F(acc[size_t(j)]);
  }
}

// ------------------------------------------------------------------------------------------
// time embedding

template <typename F>
void time_embedding(F* out, const F* t, int64_t n, int64_t dim) {
  const int64_t half = dim / 2;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double f = std::exp(-std::log(10000.0) * double(i) / double(half));
      out[r * dim + i] = F(std::sin(double(t[r]) * f));
      out[r * dim + half + i] = F(std::cos(double(t[r]) * f));
    }
}

// ------------------------------------------------------------------------------------------
// channel concatenation: one task per pixel row

template <typename F>
void concat_channels_forward(F* out, const F* a, const F* b, int64_t N, int64_t Ca, int64_t Cb) {
  const int64_t C = Ca + Cb;
#pragma omp parallel for num_threads(threads_for(N * C)) schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    std::copy_n(a + r * Ca, Ca, out + r * C);
    std::copy_n(b + r * Cb, Cb, out + r * C + Ca);
  }
}

template <typename F>
void concat_channels_backward(F* da, F* db, const F* dout, int64_t N, int64_t Ca, int64_t Cb) {
  const int64_t C = Ca + Cb;
#pragma omp parallel for num_threads(threads_for(N * C)) schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    if (da) std::copy_n(dout + r * C, Ca, da + r * Ca);
    if (db) std::copy_n(dout + r * C + Ca, Cb, db + r * Cb);
  }
}

// ------------------------------------------------------------------------------------------
// per-image channel bias: forward one task per pixel row; backward one task per (image, block of
// kBiasBlock channels), each channel summed in double over the pixels in order.

template <typename F>
void add_image_bias_forward(F* x, const F* e, int64_t B, int64_t HW, int64_t C) {
#pragma omp parallel for num_threads(threads_for(B * HW * C)) schedule(static)
  for (int64_t r = 0; r < B * HW; ++r) {
    const F* eb = e + (r / HW) * C;
    F* xr = x + r * C;
    for (int64_t c = 0; c < C; ++c) xr[c] += eb[c];
  }
}

template <typename F>
void add_image_bias_backward(F* de, const F* dout, int64_t B, int64_t HW, int64_t C) {
  const int64_t blocks = (C + kBiasBlock - 1) / kBiasBlock;
#pragma omp parallel for num_threads(threads_for(B * HW * C)) schedule(static)
  for (int64_t t = 0; t < B * blocks; ++t) {
    const int64_t b = t / blocks, c0 = (t % blocks) * kBiasBlock, nc = std::min(kBiasBlock, C - c0);
    double acc[kBiasBlock] = {};
    const F* g = dout + b * HW * C + c0;
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = 0; c < nc; ++c) acc[c] += double(g[p * C + c]);
    for (int64_t c = 0; c < nc; ++c) de[b * C + c0 + c] = F(acc[c]);
  }
}

// ------------------------------------------------------------------------------------------
// mean squared error: partial sums in double over chunks of kMseChunk values, added in chunk
// order (as sum_squares_chunked), so the loss does not depend on the thread count.

template <typename F>
double mse_forward(const F* pred, const F* target, int64_t n) {
  const int64_t chunks = (n + kMseChunk - 1) / kMseChunk;
  std::vector<double> part(size_t(chunks), 0.0);
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t end = std::min(n, (k + 1) * kMseChunk);
    double s = 0;
    for (int64_t i = k * kMseChunk; i < end; ++i) {
      const double d = double(pred[i]) - double(target[i]);
      s += d * d;
    }
    part[size_t(k)] = s;
  }
  double total = 0;
  for (double s : part) total += s;
  return total / double(n);
}

template <typename F>
void mse_backward(F* dpred, const F* pred, const F* target, int64_t n, double dloss) {
  const F k = F(2.0 * dloss / double(n));
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dpred[i] = k * (pred[i] - target[i]);
}

#define GENPERF_IMAGE_OPS(F)                                                                      \
  template void upsample2x_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t);         \
  template void upsample2x_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t);        \
  template void avgpool2x_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t);          \
  template void avgpool2x_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t);         \
  template void bicubic_up_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t); \
  template void bicubic_up_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t);\
  template void time_embedding<F>(F*, const F*, int64_t, int64_t);                               \
  template void concat_channels_forward<F>(F*, const F*, const F*, int64_t, int64_t, int64_t);   \
  template void concat_channels_backward<F>(F*, F*, const F*, int64_t, int64_t, int64_t);        \
  template void add_image_bias_forward<F>(F*, const F*, int64_t, int64_t, int64_t);              \
  template void add_image_bias_backward<F>(F*, const F*, int64_t, int64_t, int64_t);             \
  template double mse_forward<F>(const F*, const F*, int64_t);                                   \
  template void mse_backward<F>(F*, const F*, const F*, int64_t, double);

GENPERF_IMAGE_OPS(float)
GENPERF_IMAGE_OPS(double)
#undef GENPERF_IMAGE_OPS
template void group_norm_forward<double>(double*, double*, double*, const double*, const double*,
                                         const double*, int64_t, int64_t, int64_t, int64_t, double);
template void group_norm_backward<double>(double*, double*, double*, const double*, const double*,
                                          const double*, const double*, const double*, int64_t,
                                          int64_t, int64_t, int64_t);
template void silu_forward<double>(double*, const double*, int64_t);
template void silu_backward<double>(double*, const double*, const double*, int64_t);
template void group_norm_silu_forward<double>(double*, double*, double*, const double*, const double*,
                                              const double*, int64_t, int64_t, int64_t, int64_t, double);
template void group_norm_silu_backward<double>(double*, double*, double*, const double*, const double*,
                                               const double*, const double*, const double*, const double*,
                                               int64_t, int64_t, int64_t, int64_t);

}  // namespace genperf::cpu

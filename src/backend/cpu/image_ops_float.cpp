// The float path of group norm and SiLU: explicit specializations of image_ops.h's templates
// (whose generic bodies in image_ops.cpp are the float64 reference), on the kernels of the level
// genperf::isa() selects (kernels.h). Group norm cuts each image into blocks of pixels, a fixed
// partition: a kernel sums each block's channels in float (contiguous along C), and the blocks
// are combined in double in a fixed order, so that results depend on nothing but the inputs.
//
// Shape legend: B images of HW pixels of C channels ([B, HW, C]), G groups of Cg = C / G
// channels, P pixels per block, nb blocks per image.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/image_ops.h"
#include "backend/cpu/kernels.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

constexpr int64_t kParallelElems = int64_t(1) << 15;
int threads_for(int64_t elems) { return elems >= kParallelElems ? num_threads() : 1; }
constexpr int64_t kSiluChunk = int64_t(1) << 14;  // values per task of SiLU

// A block's pixels: about 16 KB of floats, so that a block stays in L1 between a kernel's passes
// over it, and at most 256, so that float sums stay short before they go to double.
struct Blocks {
  int64_t P, nb;
  Blocks(int64_t HW, int64_t C) : P(std::clamp<int64_t>(4096 / C, 1, 256)), nb((HW + P - 1) / P) {}
  int64_t first(int64_t j) const { return j * P; }
  int64_t pixels(int64_t j, int64_t HW) const { return std::min(P, HW - j * P); }
};

}  // namespace

// ------------------------------------------------------------------------------------------
// group norm. Forward: per block the moments of each channel about a shift near its mean (exact
// to combine, and free of the cancellation of raw sums of squares); per image and group in
// double, mean = sum / m and m var = sum of s2 - 2 (mean - shift) s1 + np (mean - shift)^2 over
// blocks and channels; then out = (x - mean) (rstd gamma) + beta in one sweep.

namespace {

// group_norm_forward<float>, and with silu each block's output through SiLU while it is in L1
// (group_norm_silu_forward).
void group_norm_float(float* out, float* mean, float* rstd, const float* x, const float* gamma,
                      const float* beta, int64_t B, int64_t HW, int64_t C, int64_t G, double eps,
                      bool silu) {
  const Kernels& k = kernels();
  const Blocks bl(HW, C);
  const int64_t Cg = C / G, tasks = B * bl.nb;
  const int nt = threads_for(B * HW * C);
  const double m = double(HW * Cg);
  std::vector<float> part(size_t(tasks * 3 * C));  // per block: shift, s1, s2 of each channel
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = t / bl.nb, j = t % bl.nb;
    float* q = part.data() + t * 3 * C;
    k.group_norm_moments(x + (b * HW + bl.first(j)) * C, bl.pixels(j, HW), C, q, q + C, q + 2 * C);
  }
  std::vector<float> mu(size_t(B * C)), scale(size_t(B * C));  // per image and channel
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t c0 = g * Cg;
      double s = 0;
      for (int64_t j = 0; j < bl.nb; ++j) {
        const float* q = part.data() + (b * bl.nb + j) * 3 * C;
        const double np = double(bl.pixels(j, HW));
        for (int64_t c = c0; c < c0 + Cg; ++c) s += np * double(q[c]) + double(q[C + c]);
      }
      const double mu_g = s / m;
      double m2 = 0;
      for (int64_t j = 0; j < bl.nb; ++j) {
        const float* q = part.data() + (b * bl.nb + j) * 3 * C;
        const double np = double(bl.pixels(j, HW));
        for (int64_t c = c0; c < c0 + Cg; ++c) {
          const double d = mu_g - double(q[c]);
          m2 += double(q[2 * C + c]) - 2 * d * double(q[C + c]) + np * d * d;
        }
      }
      const double r = 1.0 / std::sqrt(std::max(m2, 0.0) / m + eps);
      mean[b * G + g] = float(mu_g);
      rstd[b * G + g] = float(r);
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        mu[size_t(b * C + c)] = float(mu_g);
        scale[size_t(b * C + c)] = float(r * double(gamma[c]));
      }
    }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = t / bl.nb, j = t % bl.nb, off = (b * HW + bl.first(j)) * C;
    k.group_norm_apply(x + off, mu.data() + b * C, scale.data() + b * C, beta, bl.pixels(j, HW), C,
                       out + off);
    if (silu) k.silu_row(out + off, out + off, bl.pixels(j, HW) * C);
  }
}

}  // namespace

template <>
void group_norm_forward<float>(float* out, float* mean, float* rstd, const float* x,
                               const float* gamma, const float* beta, int64_t B, int64_t HW,
                               int64_t C, int64_t G, double eps) {
  group_norm_float(out, mean, rstd, x, gamma, beta, B, HW, C, G, eps, false);
}

template <>
void group_norm_silu_forward<float>(float* out, float* mean, float* rstd, const float* x,
                                    const float* gamma, const float* beta, int64_t B, int64_t HW,
                                    int64_t C, int64_t G, double eps) {
  group_norm_float(out, mean, rstd, x, gamma, beta, B, HW, C, G, eps, true);
}

// Its backward: per block, y = (x - mean) (rstd gamma) + beta recomputed into an L1 buffer and
// dy = silu'(y) dout, then group_norm_backward<float> on dy.
template <>
void group_norm_silu_backward<float>(float* dx, float* dgamma, float* dbeta, const float* dout,
                                     const float* x, const float* gamma, const float* beta,
                                     const float* mean, const float* rstd, int64_t B, int64_t HW,
                                     int64_t C, int64_t G) {
  const Kernels& k = kernels();
  const Blocks bl(HW, C);
  const int64_t Cg = C / G, tasks = B * bl.nb, n = B * HW * C;
  std::vector<float> mu(size_t(B * C)), scale(size_t(B * C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = b * G + c / Cg;
      mu[size_t(b * C + c)] = mean[g];
      scale[size_t(b * C + c)] = float(double(rstd[g]) * double(gamma[c]));
    }
  thread_local std::vector<float> dy_buf;
  if (dy_buf.size() < size_t(n)) {
    dy_buf.clear();
    dy_buf.resize(size_t(n));
  }
  float* dy = dy_buf.data();
#pragma omp parallel num_threads(threads_for(n))
  {
    std::vector<float> y(size_t(bl.P * C));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / bl.nb, j = t % bl.nb, off = (b * HW + bl.first(j)) * C, P = bl.pixels(j, HW);
      k.group_norm_apply(x + off, mu.data() + b * C, scale.data() + b * C, beta, P, C, y.data());
      k.silu_backward_row(y.data(), dout + off, dy + off, P * C);
    }
  }
  group_norm_backward<float>(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, B, HW, C, G);
}

// Backward, as the reference's dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dout gamma:
// per block sd = sum dout and sdx = sum dout (x - mean) of each channel; per image and group in
// double the means of g and g xhat; then dx = (rstd gamma) dout - ((x - mean) rstd^2 mean(g xhat)
// + rstd mean(g)) in one sweep. dgamma and dbeta sum over blocks and images in double.
template <>
void group_norm_backward<float>(float* dx, float* dgamma, float* dbeta, const float* dout,
                                const float* x, const float* gamma, const float* mean,
                                const float* rstd, int64_t B, int64_t HW, int64_t C, int64_t G) {
  const Kernels& k = kernels();
  const Blocks bl(HW, C);
  const int64_t Cg = C / G, tasks = B * bl.nb;
  const int nt = threads_for(B * HW * C);
  const double m = double(HW * Cg);
  std::vector<float> mu(size_t(B * C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) mu[size_t(b * C + c)] = mean[b * G + c / Cg];
  std::vector<float> part(size_t(tasks * 2 * C));  // per block: sd, sdx of each channel
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = t / bl.nb, j = t % bl.nb, off = (b * HW + bl.first(j)) * C;
    float* q = part.data() + t * 2 * C;
    k.group_norm_grad_sums(x + off, dout + off, mu.data() + b * C, bl.pixels(j, HW), C, q, q + C);
  }
  // Per image and channel: sum dout and sum dout xhat; then the sweep's coefficients.
  const auto nc = static_cast<size_t>(C);
  std::vector<double> sd(nc), sdxh(nc), pg(nc, 0.0), pb(nc, 0.0);
  std::vector<float> a(size_t(B * C)), e(size_t(B * C)), f(size_t(B * C));
  for (int64_t b = 0; b < B; ++b) {
    std::fill(sd.begin(), sd.end(), 0.0);
    std::fill(sdxh.begin(), sdxh.end(), 0.0);
    for (int64_t j = 0; j < bl.nb; ++j) {
      const float* q = part.data() + (b * bl.nb + j) * 2 * C;
      for (int64_t c = 0; c < C; ++c) {
        sd[size_t(c)] += double(q[c]);
        sdxh[size_t(c)] += double(q[C + c]);
      }
    }
    for (int64_t g = 0; g < G; ++g) {
      const double r = double(rstd[b * G + g]);
      double sg = 0, sgx = 0;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) {
        sdxh[size_t(c)] *= r;
        sg += double(gamma[c]) * sd[size_t(c)];
        sgx += double(gamma[c]) * sdxh[size_t(c)];
      }
      const double mg = sg / m, mgx = sgx / m;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) {
        a[size_t(b * C + c)] = float(r * double(gamma[c]));
        e[size_t(b * C + c)] = float(r * r * mgx);
        f[size_t(b * C + c)] = float(r * mg);
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      pg[size_t(c)] += sdxh[size_t(c)];
      pb[size_t(c)] += sd[size_t(c)];
    }
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = t / bl.nb, j = t % bl.nb, off = (b * HW + bl.first(j)) * C;
    const size_t pc = size_t(b * C);
    k.group_norm_dx(x + off, dout + off, mu.data() + pc, a.data() + pc, e.data() + pc,
                    f.data() + pc, bl.pixels(j, HW), C, dx + off);
  }
  for (int64_t c = 0; c < C; ++c) {
    if (dgamma) dgamma[c] += float(pg[size_t(c)]);
    if (dbeta) dbeta[c] += float(pb[size_t(c)]);
  }
}

// ------------------------------------------------------------------------------------------
// SiLU: chunks of kSiluChunk values, each one kernel call.

template <>
void silu_forward<float>(float* out, const float* x, int64_t n) {
  const Kernels& k = kernels();
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; i += kSiluChunk) k.silu_row(x + i, out + i, std::min(kSiluChunk, n - i));
}

template <>
void silu_backward<float>(float* dx, const float* dout, const float* x, int64_t n) {
  const Kernels& k = kernels();
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; i += kSiluChunk)
    k.silu_backward_row(x + i, dout + i, dx + i, std::min(kSiluChunk, n - i));
}

}  // namespace genperf::cpu

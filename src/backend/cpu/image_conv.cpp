// The CPU kernel of 2-D convolution (genperf/ops_image.h): im2col and the backend's GEMM
// (gemm.h: oneDNN's sgemm for float, a scalar loop for the float64 reference). A 1 x 1 kernel of
// stride 1 is a matmul over the pixels, with no copy. Otherwise the output pixels are taken in
// chunks whose patch matrix col [pixels, K*K*IC] stays near kColBytes, so memory does not grow
// with the image:
//   forward   out[chunk] = col · w^T + bias
//   backward  dw += dout[chunk]^T · col,  dcol = dout[chunk] · w, dx += col2im(dcol).
// col2im adds each patch element back to its input pixel; threads own disjoint input channels,
// so the sums run in one order for any thread count.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/image_ops.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

using ops::ConvShape;
constexpr int64_t kColBytes = int64_t(8) << 20;

// Output pixels per chunk: whole output rows of one image, at least one.
int64_t chunk_pixels(const ConvShape& s, size_t elem) {
  const int64_t row = s.Wo() * s.filter() * int64_t(elem);
  return std::max<int64_t>(1, kColBytes / std::max<int64_t>(row, 1)) * s.Wo();
}

bool pointwise(const ConvShape& s) { return s.K == 1 && s.stride == 1 && s.pad == 0; }

// col[p, (ky, kx, c)] for output pixels p0 .. p0 + n of image b (zero outside the image).
template <typename F>
void im2col(const F* x, const ConvShape& s, int64_t b, int64_t p0, int64_t n, F* col) {
  const int64_t Wo = s.Wo(), KC = s.K * s.IC;
#pragma omp parallel for num_threads(n * s.filter() >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t oy = (p0 + i) / Wo, ox = (p0 + i) % Wo;
    F* row = col + i * s.filter();
    for (int64_t ky = 0; ky < s.K; ++ky) {
      const int64_t y = oy * s.stride - s.pad + ky;
      F* dst = row + ky * KC;
      if (y < 0 || y >= s.H) {
        std::fill_n(dst, KC, F(0));
        continue;
      }
      for (int64_t kx = 0; kx < s.K; ++kx) {
        const int64_t xx = ox * s.stride - s.pad + kx;
        if (xx < 0 || xx >= s.W)
          std::fill_n(dst + kx * s.IC, s.IC, F(0));
        else
          std::copy_n(x + ((b * s.H + y) * s.W + xx) * s.IC, s.IC, dst + kx * s.IC);
      }
    }
  }
}

// dx[b] += col2im(dcol) for output pixels p0 .. p0 + n; threads split the input channels.
template <typename F>
void col2im_add(const F* dcol, const ConvShape& s, int64_t b, int64_t p0, int64_t n, F* dx) {
  const int64_t Wo = s.Wo(), KC = s.K * s.IC;
  const int nt = n * s.filter() >= (1 << 15) && s.IC >= 16 ? num_threads() : 1;
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), tn = omp_get_num_threads();
    const int64_t c0 = s.IC * id / tn, c1 = s.IC * (id + 1) / tn;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t oy = (p0 + i) / Wo, ox = (p0 + i) % Wo;
      const F* row = dcol + i * s.filter();
      for (int64_t ky = 0; ky < s.K; ++ky) {
        const int64_t y = oy * s.stride - s.pad + ky;
        if (y < 0 || y >= s.H) continue;
        for (int64_t kx = 0; kx < s.K; ++kx) {
          const int64_t xx = ox * s.stride - s.pad + kx;
          if (xx < 0 || xx >= s.W) continue;
          F* d = dx + ((b * s.H + y) * s.W + xx) * s.IC;
          const F* g = row + ky * KC + kx * s.IC;
          for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
        }
      }
    }
  }
}

template <typename F>
void add_bias(F* out, const F* bias, int64_t rows, int64_t OC) {
#pragma omp parallel for num_threads(rows * OC >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < OC; ++o) out[r * OC + o] += bias[o];
}

}  // namespace

template <typename F>
void conv2d_forward(F* out, const F* x, const F* w, const F* bias, const ConvShape& s) {
  const int64_t P = s.Ho() * s.Wo(), KK = s.filter();
  if (pointwise(s)) {
    gemm(false, true, s.B * P, s.OC, KK, F(1), x, KK, w, KK, F(0), out, s.OC, "conv2d_forward");
  } else {
    const int64_t chunk = chunk_pixels(s, sizeof(F));
    std::vector<F> col(size_t(std::min(chunk, P) * KK));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t n = std::min(chunk, P - p0);
        im2col(x, s, b, p0, n, col.data());
        gemm(false, true, n, s.OC, KK, F(1), col.data(), KK, w, KK, F(0), out + (b * P + p0) * s.OC, s.OC,
             "conv2d_forward");
      }
  }
  if (bias) add_bias(out, bias, s.B * P, s.OC);
}

template <typename F>
void conv2d_backward(F* dx, F* dw, F* dbias, const F* dout, const F* x, const F* w, const ConvShape& s) {
  const int64_t P = s.Ho() * s.Wo(), KK = s.filter(), rows = s.B * P;
  if (dbias) {  // column sums in double, rows in order
    std::vector<double> sum(size_t(s.OC), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < s.OC; ++o) sum[size_t(o)] += double(dout[r * s.OC + o]);
    for (int64_t o = 0; o < s.OC; ++o) dbias[o] += F(sum[size_t(o)]);
  }
  if (pointwise(s)) {
    if (dw) gemm(true, false, s.OC, KK, rows, F(1), dout, s.OC, x, KK, F(1), dw, KK, "conv2d_backward");
    if (dx) gemm(false, false, rows, KK, s.OC, F(1), dout, s.OC, w, KK, F(0), dx, KK, "conv2d_backward");
    return;
  }
  if (dx) std::fill_n(dx, s.B * s.H * s.W * s.IC, F(0));
  const int64_t chunk = chunk_pixels(s, sizeof(F));
  std::vector<F> col(size_t(std::min(chunk, P) * KK));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t p0 = 0; p0 < P; p0 += chunk) {
      const int64_t n = std::min(chunk, P - p0);
      const F* g = dout + (b * P + p0) * s.OC;
      if (dw) {
        im2col(x, s, b, p0, n, col.data());
        gemm(true, false, s.OC, KK, n, F(1), g, s.OC, col.data(), KK, F(1), dw, KK, "conv2d_backward");
      }
      if (dx) {
        gemm(false, false, n, KK, s.OC, F(1), g, s.OC, w, KK, F(0), col.data(), KK, "conv2d_backward");
        col2im_add(col.data(), s, b, p0, n, dx);
      }
    }
}

template void conv2d_forward<float>(float*, const float*, const float*, const float*, const ConvShape&);
template void conv2d_forward<double>(double*, const double*, const double*, const double*, const ConvShape&);
template void conv2d_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                     const ConvShape&);
template void conv2d_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      const ConvShape&);

}  // namespace genperf::cpu

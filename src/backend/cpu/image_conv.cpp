// The CPU kernel of 2-D convolution (genperf/ops_image.h). Floats run on Winograd's F(4 x 4, 3 x 3)
// (conv_winograd_avx2.cpp) where it covers the shape and the CPU has AVX2, forward and backward
// data; then on oneDNN's convolution primitives (conv_onednn.cpp) where oneDNN has a JIT or GEMM
// implementation for the shape; the rest, and float64 (the reference), run here on the backend's
// GEMM (gemm.h: oneDNN's sgemm for
// float, a scalar loop for float64). A 1 x 1 kernel of stride 1 is a matmul over the pixels,
// with no copy. Otherwise the output pixels of the whole batch, in order, are taken in chunks
// whose patch matrix col [pixels, K*K*IC] (im2col) stays near kColBytes, in the calling thread's
// buffer; a chunk may span images, so that small images make one larger product:
//   forward   out[chunk] = col · w^T + bias
//   backward  dw += dout[chunk]^T · col,  dcol = dout[chunk] · w, dx += col2im(dcol).
// ConvShape::bf16 (products of operands rounded to bf16, summed in f32): the forward runs on
// Winograd's path where it covers the shape, the operands rounded as its transforms read them
// (the products of its transformed tiles are no longer of bf16 values, but their sum is the
// convolution of the rounded operands, with Winograd's f32 rounding: a bf16 Winograd would round
// the transformed values and lose ten times the precision, docs/SR.md "Mixed precision"); the
// rest, and the backward, on oneDNN's bf16 primitives where the CPU has AVX512-BF16 at the AVX-512
// level (conv2d_bf16_native; its data gradient is faster than Winograd's there), else on
// Winograd's path too; what remains, and float64, on copies of the operands rounded to bf16, by
// the paths above (f32 or float64 products of bf16 values). dbias sums dout unrounded.
// Thread counts: products whose rows are output pixels (out, dcol, the pointwise dx) run in
// fixed tiles of kTileRows rows, each on one thread (oneDNN's threaded sgemm splits its sums by
// the thread count, and at the AVX2 level its bits change with it); col2im adds each patch
// element back to its input pixel, threads owning disjoint input channels; dbias is summed here
// for both paths in fixed chunks of rows. So out, dx and dbias have the same bits for any thread
// count; dw (a sum over pixels, oneDNN's threaded sgemm) is the same run to run at one count.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/image_ops.h"
#include "backend/cpu/kernels.h"
#include "genperf/dtype.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

using ops::ConvShape;
constexpr int64_t kColBytes = int64_t(8) << 20;
constexpr int64_t kBiasRows = 512;  // rows per partial sum of dbias (fixed: thread-count free)

// Output pixels per chunk: whole output rows, at least one.
int64_t chunk_pixels(const ConvShape& s, size_t elem) {
  const int64_t row = s.Wo() * s.filter() * int64_t(elem);
  return std::max<int64_t>(1, kColBytes / std::max<int64_t>(row, 1)) * s.Wo();
}

bool pointwise(const ConvShape& s) { return s.K == 1 && s.stride == 1 && s.pad == 0; }

// The direct path of a convolution with few output channels (the UNet's last layer, 1 channel
// out): each output row by the ISA level's kernel, rows in parallel (one thread per value: the
// bits do not depend on the thread count). oneDNN's primitives run such shapes at a few percent
// of the GEMM peak (the out conv of the default SR model, 16 -> 1 at 64 x 64 on 8 images, took
// 0.63 ms there: 15 GFLOP/s).
constexpr int64_t kFewOc = 4;
bool few_oc_applies(const ConvShape& s) { return s.OC <= kFewOc && !pointwise(s); }
void conv_few_oc(float* out, const float* x, const float* w, const float* bias, const ConvShape& s) {
  const Kernels& k = kernels();
  const int64_t Ho = s.Ho(), Wo = s.Wo(), rows = s.B * Ho;
#pragma omp parallel for num_threads(rows * Wo * s.filter() * s.OC >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / Ho, oy = r % Ho;
    k.conv_few_oc_row(x + b * s.H * s.W * s.IC, w, bias, s.H, s.W, s.IC, s.OC, s.K, s.stride, s.pad, oy, Wo,
                      out + r * Wo * s.OC);
  }
}

// The calling thread's patch matrix of at least n values, kept between calls and only grown (a
// fresh one per call is zeroed and faulted in: 8 MiB per conv); valid until its next call.
template <typename F>
F* col_buffer(size_t n) {
  thread_local std::vector<F> buf;
  if (buf.size() < n) {
    buf.clear();  // no copy of the old contents on growth
    buf.resize(n);
  }
  return buf.data();
}

// col[i, (ky, kx, c)] for the output pixels q0 .. q0 + n of the batch (pixel q of image q / P,
// P = Ho Wo); zero outside the image.
template <typename F>
void im2col(const F* x, const ConvShape& s, int64_t q0, int64_t n, F* col) {
  const int64_t Wo = s.Wo(), P = s.Ho() * Wo, KC = s.K * s.IC;
#pragma omp parallel for num_threads(n * s.filter() >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t q = q0 + i, b = q / P, oy = q % P / Wo, ox = q % Wo;
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

// dx += col2im(dcol) for the output pixels q0 .. q0 + n of the batch; threads split the input
// channels.
template <typename F>
void col2im_add(const F* dcol, const ConvShape& s, int64_t q0, int64_t n, F* dx) {
  const int64_t Wo = s.Wo(), P = s.Ho() * Wo, KC = s.K * s.IC;
  const int nt = n * s.filter() >= (1 << 15) && s.IC >= 16 ? num_threads() : 1;
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), tn = omp_get_num_threads();
    const int64_t c0 = s.IC * id / tn, c1 = s.IC * (id + 1) / tn;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = q0 + i, b = q / P, oy = q % P / Wo, ox = q % Wo;
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

// dbias += the column sums of dout [rows, OC]: chunks of kBiasRows rows summed in double in
// parallel, their partial sums then added in chunk order, so the bits do not depend on the
// thread count.
template <typename F>
void add_column_sums(F* dbias, const F* dout, int64_t rows, int64_t OC) {
  const int64_t chunks = (rows + kBiasRows - 1) / kBiasRows;
  std::vector<double> part(size_t(chunks * OC));
#pragma omp parallel for num_threads(rows * OC >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double* p = part.data() + c * OC;
    for (int64_t r = c * kBiasRows; r < std::min(rows, (c + 1) * kBiasRows); ++r)
      for (int64_t o = 0; o < OC; ++o) p[o] += double(dout[r * OC + o]);
  }
  for (int64_t o = 0; o < OC; ++o) {
    double sum = 0;
    for (int64_t c = 0; c < chunks; ++c) sum += part[size_t(c * OC + o)];
    dbias[o] += F(sum);
  }
}

std::atomic<ConvPath>& path() {
  static std::atomic<ConvPath> p = [] {
    const char* e = std::getenv("GENPERF_CONV");
    const std::string_view v = e ? e : "";
    return v == "im2col" ? ConvPath::Im2col : v == "onednn" ? ConvPath::OneDnn : ConvPath::Winograd;
  }();
  return p;
}

bool onednn() { return conv_path() != ConvPath::Im2col; }

// ConvShape::bf16 on the F path: a copy of a's n values rounded to bf16 (as F values) in the
// calling thread's buffer `slot`, valid until its next call.
template <typename F>
const F* rounded_to_bf16(const F* a, size_t n, int slot) {
  thread_local std::vector<F> buf[3];
  std::vector<F>& b = buf[slot];
  if (b.size() < n) {
    b.clear();
    b.resize(n);
  }
  F* d = b.data();
#pragma omp parallel for num_threads(n >= (1 << 15) ? num_threads() : 1) schedule(static)
  for (size_t i = 0; i < n; ++i) d[i] = F(bf16_to_f32(f32_to_bf16(float(a[i]))));
  return d;
}

ConvShape without_bf16(ConvShape s) {
  s.bf16 = false;
  return s;
}

// Whether the weights' gradient of a shape on Winograd's path runs there too, or on oneDNN's
// direct backward-weights primitive. Measured (`genperf test-ops --mode perf --op
// conv2d_backward`, 2 threads, 2026-12-07): with AVX-512, oneDNN's is faster on every UNet shape
// (the whole backward 1.28 -> 1.10 ms at 64 x 64, C = 64; 1.43 -> 1.09 at 32 x 32, C = 128;
// 1.51 -> 0.61 at 8 x 64 x 64, C = 16); with oneDNN held to AVX2, Winograd's is faster from 64
// channels (1.94 against 2.81 ms, 1.91 against 2.51) and slower at 16 (1.99 against 1.30).
// oneDNN's sums its pixels over the threads: dw then has the same bits run to run at one thread
// count, not across counts.
bool winograd_weights_gradient(const ConvShape& s) { return isa() < Isa::Avx512 && s.IC * s.OC >= 64 * 64; }

}  // namespace

bool conv2d_winograd_weights_gradient(const ConvShape& s) {
  return conv2d_uses_winograd(s) && winograd_weights_gradient(s);
}

ConvPath conv_path() { return path().load(std::memory_order_relaxed); }
void set_conv_path(ConvPath p) { path().store(p, std::memory_order_relaxed); }
bool conv2d_bf16_native() { return cpu_features().avx512_bf16 && isa() == Isa::Avx512 && onednn(); }
bool conv2d_uses_winograd(const ConvShape& s) {
  return conv_path() == ConvPath::Winograd && isa() >= Isa::Avx2 && conv3x3_winograd_applies(s);
}

template <typename F>
void conv2d_forward(F* out, const F* x, const F* w, const F* bias, const ConvShape& s) {
  if constexpr (std::is_same_v<F, float>) {
    // genperf's own kernels first; Winograd's rounds bf16 operands as it reads them.
    if (conv2d_uses_winograd(s)) return conv3x3_winograd_avx2(out, x, w, bias, s);
    if (!s.bf16 && conv_path() == ConvPath::Winograd) {
      if (few_oc_applies(s)) return conv_few_oc(out, x, w, bias, s);
      if (isa() >= Isa::Avx2 && conv1x1_narrow_applies(s)) return conv1x1_narrow_avx2(out, x, w, bias, s);
    }
    if ((s.bf16 ? conv2d_bf16_native() : onednn()) && conv2d_forward_onednn(out, x, w, bias, s)) return;
  }
  if (s.bf16) {
    const F* xr = rounded_to_bf16(x, size_t(s.B * s.H * s.W * s.IC), 0);
    return cpu::conv2d_forward<F>(out, xr, rounded_to_bf16(w, size_t(s.OC * s.filter()), 1), bias, without_bf16(s));
  }
  const int64_t rows = s.B * s.Ho() * s.Wo(), KK = s.filter();
  if (pointwise(s)) {
    gemm_rows(true, rows, s.OC, KK, x, w, KK, out, "conv2d_forward");
  } else {
    const int64_t chunk = std::min(chunk_pixels(s, sizeof(F)), rows);
    F* col = col_buffer<F>(size_t(chunk * KK));
    for (int64_t q0 = 0; q0 < rows; q0 += chunk) {
      const int64_t n = std::min(chunk, rows - q0);
      im2col(x, s, q0, n, col);
      gemm_rows(true, n, s.OC, KK, col, w, KK, out + q0 * s.OC, "conv2d_forward");
    }
  }
  if (bias) add_bias(out, bias, rows, s.OC);
}

template <typename F>
void conv2d_backward(F* dx, F* dw, F* dbias, const F* dout, const F* x, const F* w, const ConvShape& s) {
  const int64_t rows = s.B * s.Ho() * s.Wo(), KK = s.filter();
  if (dbias) add_column_sums(dbias, dout, rows, s.OC);
  if constexpr (std::is_same_v<F, float>) {
    // bf16: oneDNN's primitives where the CPU has AVX512-BF16 (its data gradient is faster than
    // Winograd's there), else Winograd's, which rounds the operands as it reads them.
    const bool native = s.bf16 && conv2d_bf16_native();
    if (conv2d_uses_winograd(s) && !native) {
      if (dx) conv3x3_winograd_backward_data_avx2(dx, dout, w, s), dx = nullptr;
      if (dw && winograd_weights_gradient(s)) conv3x3_winograd_backward_weights_avx2(dw, dout, x, s), dw = nullptr;
    }
    if (s.bf16 ? native : onednn()) {
      if (dx && conv2d_backward_data_onednn(dx, dout, w, s)) dx = nullptr;
      if (dw && conv2d_backward_weights_onednn(dw, dout, x, s)) dw = nullptr;
    }
  }
  if (!dx && !dw) return;
  if (s.bf16) {
    const F* gr = rounded_to_bf16(dout, size_t(rows * s.OC), 0);
    const F* xr = dw ? rounded_to_bf16(x, size_t(s.B * s.H * s.W * s.IC), 1) : x;
    const F* wr = dx ? rounded_to_bf16(w, size_t(s.OC * KK), 2) : w;
    return cpu::conv2d_backward<F>(dx, dw, static_cast<F*>(nullptr), gr, xr, wr, without_bf16(s));
  }
  if (pointwise(s)) {
    if (dw) gemm(true, false, s.OC, KK, rows, F(1), dout, s.OC, x, KK, F(1), dw, KK, "conv2d_backward");
    if (dx) gemm_rows(false, rows, KK, s.OC, dout, w, KK, dx, "conv2d_backward");
    return;
  }
  if (dx) std::fill_n(dx, s.B * s.H * s.W * s.IC, F(0));
  const int64_t chunk = std::min(chunk_pixels(s, sizeof(F)), rows);
  F* col = col_buffer<F>(size_t(chunk * KK));
  for (int64_t q0 = 0; q0 < rows; q0 += chunk) {
    const int64_t n = std::min(chunk, rows - q0);
    const F* g = dout + q0 * s.OC;
    if (dw) {
      im2col(x, s, q0, n, col);
      gemm(true, false, s.OC, KK, n, F(1), g, s.OC, col, KK, F(1), dw, KK, "conv2d_backward");
    }
    if (dx) {
      gemm_rows(false, n, KK, s.OC, g, w, KK, col, "conv2d_backward");
      col2im_add(col, s, q0, n, dx);
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

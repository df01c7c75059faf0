// Image ops: the layers of a convolutional network (the diffusion super-resolution UNet), as
// forward/backward pairs on channels-last arrays of one device, in the manner of ops_train.h:
// templated on the float type (float runs dev's backend kernel, double is the float64 reference
// on the CPU), backward functions add to parameter gradients (+=) and overwrite activation
// gradients (=).
//
// Shape legend: images are [B, H, W, C] (channels last, so an image is HW rows of C: the rows
// every other op reads), HW = H * W pixels, G groups of C / G channels.
#pragma once
#include <cstdint>

#include "genperf/tensor.h"

namespace genperf::ops {

// 2-D convolution, square kernel K x K, the same stride and zero padding on both axes:
// x [B, H, W, IC], w [OC, K, K, IC] (channels last: a filter is one row of K*K*IC, the layout
// of a matmul's weight), bias [OC] (may be null), out [B, Ho, Wo, OC] with
// Ho = (H + 2 pad - K) / stride + 1 (Wo alike).
// bf16: the products in bf16, as PyTorch's autocast runs a convolution: x, w and (backward) dout
// rounded to bf16 (to nearest even), their products summed in f32 (float64 in the reference); out,
// dx, dw and dbias stay F. The CPU runs them on oneDNN's bf16 convolutions where it has
// AVX512-BF16 at the AVX-512 level; elsewhere (and in the reference) the rounded operands run the
// F path, which gives the same products, only slower. Like cuDNN's convolution descriptor, which
// carries its compute type, the shape says how the op computes.
struct ConvShape {
  int64_t B = 1, H = 1, W = 1, IC = 1, OC = 1, K = 3, stride = 1, pad = 1;
  bool bf16 = false;
  int64_t Ho() const { return (H + 2 * pad - K) / stride + 1; }
  int64_t Wo() const { return (W + 2 * pad - K) / stride + 1; }
  int64_t filter() const { return K * K * IC; }  // weights per output channel
};
// Throws genperf::Error naming op for an empty or impossible shape.
void check_conv_shape(const char* op, const ConvShape& s);
template <typename F>
void conv2d_forward(F* out, const F* x, const F* w, const F* bias, const ConvShape& s,
                    Device dev = Device::CPU);
// dx = (skipped when null: the network's input); dw, dbias += (skipped when null).
template <typename F>
void conv2d_backward(F* dx, F* dw, F* dbias, const F* dout, const F* x, const F* w,
                     const ConvShape& s, Device dev = Device::CPU);

// Group normalization (Wu & He): per image and group, the HW * C/G values are normalized to
// zero mean and unit variance, then out = xhat * gamma[c] + beta[c]. mean, rstd [B, G] are saved
// for backward (rstd = 1 / sqrt(var + eps), var the biased variance).
template <typename F>
void group_norm_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                        int64_t B, int64_t HW, int64_t C, int64_t G, double eps,
                        Device dev = Device::CPU);
// dx =; dgamma, dbeta += (each skipped when null).
template <typename F>
void group_norm_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                         const F* mean, const F* rstd, int64_t B, int64_t HW, int64_t C, int64_t G,
                         Device dev = Device::CPU);

// Group norm then SiLU, the UNet's pre-activation, in one pass: out = silu(y), y =
// group_norm_forward's output, with mean and rstd saved as it saves them. y is not kept: the
// backward recomputes it from x, the statistics, gamma and beta (one activation less to store,
// one pass less over memory).
template <typename F>
void group_norm_silu_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                             int64_t B, int64_t HW, int64_t C, int64_t G, double eps,
                             Device dev = Device::CPU);
// dx =; dgamma, dbeta += (each skipped when null), as group_norm_backward of silu_backward.
template <typename F>
void group_norm_silu_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                              const F* beta, const F* mean, const F* rstd, int64_t B, int64_t HW,
                              int64_t C, int64_t G, Device dev = Device::CPU);

// out[i] = silu(x[i]) = x[i] * sigmoid(x[i]) over n values (out may alias x).
template <typename F>
void silu_forward(F* out, const F* x, int64_t n, Device dev = Device::CPU);
// dx[i] = dout[i] * s (1 + x (1 - s)), s = sigmoid(x[i]) (dx may alias dout).
template <typename F>
void silu_backward(F* dx, const F* dout, const F* x, int64_t n, Device dev = Device::CPU);

// Nearest-neighbour up-sampling by 2: out[B, 2H, 2W, C], out[b, y, x] = in[b, y / 2, x / 2].
template <typename F>
void upsample2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C,
                        Device dev = Device::CPU);
// dx[B, H, W, C] = the sum of the four output pixels each input pixel fed.
template <typename F>
void upsample2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C,
                         Device dev = Device::CPU);

// 2 x 2 average pooling with stride 2 (down-sampling; H and W even): out[B, H/2, W/2, C].
template <typename F>
void avgpool2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C,
                       Device dev = Device::CPU);
// dx[B, H, W, C] = dout of the pixel's 2 x 2 block / 4.
template <typename F>
void avgpool2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C,
                        Device dev = Device::CPU);

// Bicubic up-sampling by an integer factor s (the SR model's conditioning input and its
// baseline): out[B, sH, sW, C], separable, Keys' cubic with a = -0.5 (Matlab's and PIL's), output
// pixel centres mapped to input coordinates (o + 0.5) / s - 0.5 (PyTorch's align_corners=False),
// edge pixels replicated beyond the border. A linear map: backward applies its transpose.
template <typename F>
void bicubic_up_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s,
                        Device dev = Device::CPU);
// dx[B, H, W, C] =.
template <typename F>
void bicubic_up_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C,
                         int64_t s, Device dev = Device::CPU);

// Sinusoidal embedding of diffusion times (Transformer positions, as DDPM embeds t):
// out[n, i] = sin(t[n] f_i), out[n, dim/2 + i] = cos(t[n] f_i), f_i = 10000^(-i / (dim/2)),
// dim even. The times are inputs, not parameters: there is no backward.
template <typename F>
void time_embedding(F* out, const F* t, int64_t n, int64_t dim, Device dev = Device::CPU);

// Channel concatenation of two channels-last arrays (the UNet's skip connections):
// out[N, Ca + Cb] = [a[N, Ca], b[N, Cb]] row by row, N = B * H * W.
template <typename F>
void concat_channels_forward(F* out, const F* a, const F* b, int64_t N, int64_t Ca, int64_t Cb,
                             Device dev = Device::CPU);
// da[N, Ca] =, db[N, Cb] = the two column blocks of dout (each skipped when null).
template <typename F>
void concat_channels_backward(F* da, F* db, const F* dout, int64_t N, int64_t Ca, int64_t Cb,
                              Device dev = Device::CPU);

// A per-image channel bias added in place (a residual block's time embedding):
// x[b, p, c] += e[b, c] for every pixel p < HW; x [B, HW, C], e [B, C].
template <typename F>
void add_image_bias_forward(F* x, const F* e, int64_t B, int64_t HW, int64_t C,
                            Device dev = Device::CPU);
// de[b, c] = the sum over pixels p of dout[b, p, c] (=, not +=).
template <typename F>
void add_image_bias_backward(F* de, const F* dout, int64_t B, int64_t HW, int64_t C,
                             Device dev = Device::CPU);

// Mean squared error over n values: returns sum_i (pred_i - target_i)^2 / n, accumulated in
// double over fixed chunks added in order (the same result for any thread count).
template <typename F>
double mse_forward(const F* pred, const F* target, int64_t n, Device dev = Device::CPU);
// dpred[i] = dloss * 2 (pred_i - target_i) / n (dpred may alias pred).
template <typename F>
void mse_backward(F* dpred, const F* pred, const F* target, int64_t n, double dloss,
                  Device dev = Device::CPU);

}  // namespace genperf::ops

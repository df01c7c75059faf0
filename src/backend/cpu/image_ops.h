// The CPU kernels of the image ops (genperf/ops_image.h): the entries of the CPU backend's
// training table (float) and the float64 reference (double). Same arguments as ops::X without
// the device; OpenMP over images, groups and rows, results independent of the thread count
// (but for conv2d's dw, which is the same from run to run at one thread count).
#pragma once
#include <cstdint>

#include "genperf/ops_image.h"

namespace genperf::cpu {

template <typename F>
void conv2d_forward(F* out, const F* x, const F* w, const F* bias, const ops::ConvShape& s);
template <typename F>
void conv2d_backward(F* dx, F* dw, F* dbias, const F* dout, const F* x, const F* w,
                     const ops::ConvShape& s);
// The float convolution's paths, which conv2d_* take in this order where they apply: Winograd's
// F(4 x 4, 3 x 3) for 3 x 3 convolutions of stride 1 and padding 1 with channel counts that are
// multiples of 8 (conv_winograd_avx2.cpp, forward and backward data, AVX2 and above), and for
// the forward of 1 to 4 output channels a direct kernel (image_conv.cpp, conv_few_oc_row), and of
// 1 x 1 convolutions with 8 to 64 output channels Winograd's product kernels; oneDNN's
// primitives (conv_onednn.cpp); and im2col on the backend's GEMM (image_conv.cpp). conv_path()
// is the first path tried: GENPERF_CONV=onednn or im2col at the first call starts further down
// the list (tests set it to check each path).
enum class ConvPath { Winograd, OneDnn, Im2col };
ConvPath conv_path();
void set_conv_path(ConvPath p);
// The float convolution on oneDNN's primitives: forward out = (with bias when not null), backward
// dx = and dw +=. Each returns false where oneDNN offers only its reference implementation or
// fails for the shape; the caller then runs its own im2col path, and reads nothing the failed
// call wrote.
bool conv2d_forward_onednn(float* out, const float* x, const float* w, const float* bias, const ops::ConvShape& s);
bool conv2d_backward_data_onednn(float* dx, const float* dout, const float* w, const ops::ConvShape& s);
bool conv2d_backward_weights_onednn(float* dw, const float* dout, const float* x, const ops::ConvShape& s);
// Whether ConvShape::bf16 runs on oneDNN's bf16 primitives here (the CPU has AVX512-BF16, the
// ISA level is AVX-512 and the path allows oneDNN); else on operands rounded to bf16 in f32.
bool conv2d_bf16_native();
// Whether conv2d_* run the shape on Winograd's path now (the path, the ISA level and the shape).
bool conv2d_uses_winograd(const ops::ConvShape& s);
// Whether the weights' gradient runs on Winograd's path too (only where it beats oneDNN's:
// image_conv.cpp, winograd_weights_gradient); else on oneDNN's primitive.
bool conv2d_winograd_weights_gradient(const ops::ConvShape& s);
// Winograd's path: whether it covers the shape, and out = conv(x, w) (+ bias when not null).
bool conv3x3_winograd_applies(const ops::ConvShape& s);
void conv3x3_winograd_avx2(float* out, const float* x, const float* w, const float* bias, const ops::ConvShape& s);
// A 1 x 1 convolution of stride 1 with few output channels (a multiple of 8, at most 64) on
// Winograd's product kernels (conv_winograd_avx2.cpp; AVX2 and above).
bool conv1x1_narrow_applies(const ops::ConvShape& s);
void conv1x1_narrow_avx2(float* out, const float* x, const float* w, const float* bias, const ops::ConvShape& s);
// dx = the data gradient on Winograd's path (the forward of the flipped, transposed filter).
void conv3x3_winograd_backward_data_avx2(float* dx, const float* dout, const float* w, const ops::ConvShape& s);
// dw += the weights' gradient on Winograd's path (the same bits at any thread count).
void conv3x3_winograd_backward_weights_avx2(float* dw, const float* dout, const float* x, const ops::ConvShape& s);
// C[rows, cols] (+)= A[rows, K] B[K, cols] for Winograd's products, cols a multiple of 16
// (conv_winograd_avx512.cpp): A[r, k] at A + r lda + k ldk, rows of B and C at stride ldb, ldc.
template <bool Acc>
void winograd_product_avx512(int64_t rows, int64_t cols, int64_t K, const float* A, int64_t lda, int64_t ldk,
                             const float* B, int64_t ldb, float* C, int64_t ldc);
// Winograd's tile transforms with AVX-512, 16 channels to a register (conv_winograd_avx512.cpp,
// channel counts multiples of 16; the same bits as the AVX2 ones): the input's V[xi][t][ic] for
// the tiles t0 .. t0 + n (slices of ld tiles), the output (+ bias when not null) from M, and the
// output gradient's dM (slices of ld tiles).
void winograd_transform_input_avx512(const float* x, const ops::ConvShape& s, int64_t t0, int64_t n, int64_t ld,
                                     float* V);
void winograd_transform_output_avx512(const float* M, const float* bias, const ops::ConvShape& s, int64_t t0,
                                      int64_t n, float* out);
void winograd_transform_output_grad_avx512(const float* dy, const ops::ConvShape& s, int64_t t0, int64_t n,
                                           int64_t ld, float* dM);
template <typename F>
void group_norm_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                        int64_t B, int64_t HW, int64_t C, int64_t G, double eps);
template <typename F>
void group_norm_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                         const F* mean, const F* rstd, int64_t B, int64_t HW, int64_t C, int64_t G);
template <typename F>
void group_norm_silu_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                             int64_t B, int64_t HW, int64_t C, int64_t G, double eps);
template <typename F>
void group_norm_silu_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                              const F* beta, const F* mean, const F* rstd, int64_t B, int64_t HW,
                              int64_t C, int64_t G);
template <typename F>
void silu_forward(F* out, const F* x, int64_t n);
template <typename F>
void silu_backward(F* dx, const F* dout, const F* x, int64_t n);
// The float path of group norm and SiLU: vectorized kernels of the ISA level (image_ops_float.cpp),
// where the templates' bodies (image_ops.cpp) are the float64 reference.
template <>
void group_norm_forward<float>(float* out, float* mean, float* rstd, const float* x,
                               const float* gamma, const float* beta, int64_t B, int64_t HW,
                               int64_t C, int64_t G, double eps);
template <>
void group_norm_backward<float>(float* dx, float* dgamma, float* dbeta, const float* dout,
                                const float* x, const float* gamma, const float* mean,
                                const float* rstd, int64_t B, int64_t HW, int64_t C, int64_t G);
template <>
void group_norm_silu_forward<float>(float* out, float* mean, float* rstd, const float* x,
                                    const float* gamma, const float* beta, int64_t B, int64_t HW,
                                    int64_t C, int64_t G, double eps);
template <>
void group_norm_silu_backward<float>(float* dx, float* dgamma, float* dbeta, const float* dout,
                                     const float* x, const float* gamma, const float* beta,
                                     const float* mean, const float* rstd, int64_t B, int64_t HW,
                                     int64_t C, int64_t G);
template <>
void silu_forward<float>(float* out, const float* x, int64_t n);
template <>
void silu_backward<float>(float* dx, const float* dout, const float* x, int64_t n);
template <typename F>
void upsample2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C);
template <typename F>
void upsample2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C);
template <typename F>
void avgpool2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C);
template <typename F>
void avgpool2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C);

template <typename F>
void bicubic_up_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s);
template <typename F>
void bicubic_up_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s);
template <typename F>
void time_embedding(F* out, const F* t, int64_t n, int64_t dim);
template <typename F>
void concat_channels_forward(F* out, const F* a, const F* b, int64_t N, int64_t Ca, int64_t Cb);
template <typename F>
void concat_channels_backward(F* da, F* db, const F* dout, int64_t N, int64_t Ca, int64_t Cb);
template <typename F>
void add_image_bias_forward(F* x, const F* e, int64_t B, int64_t HW, int64_t C);
template <typename F>
void add_image_bias_backward(F* de, const F* dout, int64_t B, int64_t HW, int64_t C);
template <typename F>
double mse_forward(const F* pred, const F* target, int64_t n);
template <typename F>
void mse_backward(F* dpred, const F* pred, const F* target, int64_t n, double dloss);

}  // namespace genperf::cpu

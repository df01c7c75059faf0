// The training ops' entry points (genperf/ops_train.h): ops::X<float> runs the kernel of dev's
// backend table (TrainKernels, ops/backend.h); ops::X<double> is the float64 reference and runs
// the CPU's double kernel. Also the ops' helpers that are not kernels: rope tables, LoRA dropout
// draws and attention shape checks.
#include <cmath>
#include <functional>
#include <span>
#include <type_traits>

#include "backend/cpu/image_ops.h"
#include "backend/cpu/train_ops.h"
#include "genperf/error.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"
#include "ops/backend.h"

namespace genperf::ops {
namespace {

// Runs entry of dev's training table for float, the CPU's float64 reference for double.
template <typename F, typename Entry, typename Ref, typename... Args>
auto run(const char* op, Device dev, Entry TrainKernels::*entry, Ref ref, Args... args) {
  if constexpr (std::is_same_v<F, float>) {
    const Backend& b = backend(dev);
    return backend_kernel(b.train.*entry, op, b)(args...);
  } else {
    GP_CHECK(dev == Device::CPU, "[", op, "] the float64 reference runs on the CPU, not ",
             device_name(dev));
    return ref(args...);
  }
}

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

#define GP_RUN(op, ...) run<F>(#op, dev, &TrainKernels::op, cpu::op<double>, __VA_ARGS__)

template <typename F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C, int64_t V,
                       Device dev) {
  GP_RUN(embedding_forward, out, tokens, wte, N, C, V);
}
template <typename F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C,
                        Device dev) {
  GP_RUN(embedding_backward, dwte, dout, tokens, N, C);
}
template <typename F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* w, int64_t N, int64_t C, double eps,
                     Device dev) {
  GP_RUN(rmsnorm_forward, out, rstd, inp, w, N, C, eps);
}
template <typename F>
void rmsnorm_backward(F* dinp, F* dw, const F* dout, const F* inp, const F* w, const F* rstd,
                      int64_t N, int64_t C, Device dev) {
  GP_RUN(rmsnorm_backward, dinp, dw, dout, inp, w, rstd, N, C);
}
template <typename F>
void rope_forward(F* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS, const RopeTable<F>& rt,
                  RopeStyle style, Device dev) {
  run<F>("rope_forward", dev, &TrainKernels::rope_forward, cpu::rope_forward<double>, x, ldx, N,
         heads, HS, std::cref(rt), style);
}
template <typename F>
void rope_backward(F* dx, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                   const RopeTable<F>& rt, RopeStyle style, Device dev) {
  run<F>("rope_backward", dev, &TrainKernels::rope_backward, cpu::rope_backward<double>, dx, ldx, N,
         heads, HS, std::cref(rt), style);
}
template <typename F>
void swiglu_forward(F* out, const F* gu, int64_t N, int64_t FF, Device dev) {
  GP_RUN(swiglu_forward, out, gu, N, FF);
}
template <typename F>
void swiglu_backward(F* dgu, const F* dout, const F* gu, int64_t N, int64_t FF, Device dev) {
  GP_RUN(swiglu_backward, dgu, dout, gu, N, FF);
}
template <typename F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t IC,
                    int64_t OC, const Bf16Scratch* bf16, Device dev) {
  GP_RUN(matmul_forward, out, inp, w, bias, N, IC, OC, bf16);
}
template <typename F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N,
                     int64_t IC, int64_t OC, const Bf16Scratch* bf16, Device dev) {
  GP_RUN(matmul_backward, dinp, dw, dbias, dout, inp, w, N, IC, OC, bf16);
}
template <typename F>
void lora_forward(F* y, int64_t ldy, F* v, F* xd, const F* x, const F* A, const F* B,
                  const LoraShape& s, Device dev) {
  GP_RUN(lora_forward, y, ldy, v, xd, x, A, B, std::cref(s));
}
template <typename F>
void lora_backward(F* dx, F* dA, F* dB, const F* dy, int64_t ldy, const F* x, const F* v,
                   const F* A, const F* B, F* xd, F* dv, const LoraShape& s, Device dev) {
  GP_RUN(lora_backward, dx, dA, dB, dy, ldy, x, v, A, B, xd, dv, std::cref(s));
}
template <typename F>
double crossentropy_forward(F* lse, const F* logits, const int32_t* targets, int64_t N, int64_t V,
                            int64_t* count, Device dev) {
  return GP_RUN(crossentropy_forward, lse, logits, targets, N, V, count);
}
template <typename F>
void crossentropy_backward(F* dlogits, const F* logits, const F* lse, const int32_t* targets,
                           int64_t N, int64_t V, double dloss, Device dev) {
  GP_RUN(crossentropy_backward, dlogits, logits, lse, targets, N, V, dloss);
}
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n, Device dev) {
  GP_RUN(residual_forward, out, a, b, n);
}
template <typename F>
void residual_backward(F* dres, const F* dbranch, int64_t n, Device dev) {
  GP_RUN(residual_backward, dres, dbranch, n);
}
template <typename F>
void attention_forward_naive(F* out, F* probs, const F* qkv, const AttnShape& s, Device dev) {
  check_attn_shape("attention_forward_naive", s);
  GP_RUN(attention_forward_naive, out, probs, qkv, std::cref(s));
}
template <typename F>
void attention_backward_naive(F* dqkv, const F* dout, const F* qkv, const F* probs,
                              const AttnShape& s, Device dev) {
  check_attn_shape("attention_backward_naive", s);
  GP_RUN(attention_backward_naive, dqkv, dout, qkv, probs, std::cref(s));
}
template <typename F>
void attention_forward_flash(F* out, F* lse, const F* qkv, const AttnShape& s, Device dev) {
  check_attn_shape("attention_forward_flash", s);
  GP_RUN(attention_forward_flash, out, lse, qkv, std::cref(s));
}
template <typename F>
void attention_backward_flash(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse,
                              const AttnShape& s, Device dev) {
  check_attn_shape("attention_backward_flash", s);
  GP_RUN(attention_backward_flash, dqkv, dout, qkv, out, lse, std::cref(s));
}

// Image ops (genperf/ops_image.h): sizes checked here, before any backend runs.
namespace {
void check_image(const char* op, int64_t B, int64_t H, int64_t W, int64_t C) {
  GP_CHECK(B > 0 && H > 0 && W > 0 && C > 0, "[", op, "] empty image: B ", B, ", H ", H, ", W ", W,
           ", C ", C);
}
void check_groups(const char* op, int64_t B, int64_t HW, int64_t C, int64_t G) {
  check_image(op, B, HW, 1, C);
  GP_CHECK(G > 0 && C % G == 0, "[", op, "] ", C, " channels do not split into ", G, " groups");
}
void check_even(const char* op, int64_t B, int64_t H, int64_t W, int64_t C) {
  check_image(op, B, H, W, C);
  GP_CHECK(H % 2 == 0 && W % 2 == 0, "[", op, "] a ", H, " x ", W,
           " image does not pool by 2 (both sides must be even)");
}
void check_concat(const char* op, int64_t N, int64_t Ca, int64_t Cb) {
  GP_CHECK(N > 0 && Ca > 0 && Cb > 0, "[", op, "] empty concatenation: N ", N, ", Ca ", Ca,
           ", Cb ", Cb);
}
}  // namespace

void check_conv_shape(const char* op, const ConvShape& s) {
  check_image(op, s.B, s.H, s.W, s.IC);
  GP_CHECK(s.OC > 0 && s.K > 0 && s.stride > 0 && s.pad >= 0 && s.pad < s.K, "[", op, "] kernel ", s.K,
           ", stride ", s.stride, ", padding ", s.pad, ", ", s.OC,
           " output channels: expected positive sizes and 0 <= padding < kernel");
  GP_CHECK(s.H + 2 * s.pad >= s.K && s.W + 2 * s.pad >= s.K, "[", op, "] a ", s.K, " x ", s.K,
           " kernel does not fit a ", s.H, " x ", s.W, " image padded by ", s.pad);
}

template <typename F>
void conv2d_forward(F* out, const F* x, const F* w, const F* bias, const ConvShape& s, Device dev) {
  check_conv_shape("conv2d_forward", s);
  GP_RUN(conv2d_forward, out, x, w, bias, std::cref(s));
}
template <typename F>
void conv2d_backward(F* dx, F* dw, F* dbias, const F* dout, const F* x, const F* w,
                     const ConvShape& s, Device dev) {
  check_conv_shape("conv2d_backward", s);
  GP_RUN(conv2d_backward, dx, dw, dbias, dout, x, w, std::cref(s));
}

template <typename F>
void group_norm_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                        int64_t B, int64_t HW, int64_t C, int64_t G, double eps, Device dev) {
  check_groups("group_norm_forward", B, HW, C, G);
  GP_RUN(group_norm_forward, out, mean, rstd, x, gamma, beta, B, HW, C, G, eps);
}
template <typename F>
void group_norm_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                         const F* mean, const F* rstd, int64_t B, int64_t HW, int64_t C, int64_t G,
                         Device dev) {
  check_groups("group_norm_backward", B, HW, C, G);
  GP_RUN(group_norm_backward, dx, dgamma, dbeta, dout, x, gamma, mean, rstd, B, HW, C, G);
}
template <typename F>
void group_norm_silu_forward(F* out, F* mean, F* rstd, const F* x, const F* gamma, const F* beta,
                             int64_t B, int64_t HW, int64_t C, int64_t G, double eps, Device dev) {
  check_groups("group_norm_silu_forward", B, HW, C, G);
  GP_RUN(group_norm_silu_forward, out, mean, rstd, x, gamma, beta, B, HW, C, G, eps);
}
template <typename F>
void group_norm_silu_backward(F* dx, F* dgamma, F* dbeta, const F* dout, const F* x, const F* gamma,
                              const F* beta, const F* mean, const F* rstd, int64_t B, int64_t HW,
                              int64_t C, int64_t G, Device dev) {
  check_groups("group_norm_silu_backward", B, HW, C, G);
  GP_RUN(group_norm_silu_backward, dx, dgamma, dbeta, dout, x, gamma, beta, mean, rstd, B, HW, C, G);
}
template <typename F>
void silu_forward(F* out, const F* x, int64_t n, Device dev) {
  GP_RUN(silu_forward, out, x, n);
}
template <typename F>
void silu_backward(F* dx, const F* dout, const F* x, int64_t n, Device dev) {
  GP_RUN(silu_backward, dx, dout, x, n);
}
template <typename F>
void upsample2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, Device dev) {
  check_image("upsample2x_forward", B, H, W, C);
  GP_RUN(upsample2x_forward, out, x, B, H, W, C);
}
template <typename F>
void upsample2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C,
                         Device dev) {
  check_image("upsample2x_backward", B, H, W, C);
  GP_RUN(upsample2x_backward, dx, dout, B, H, W, C);
}
template <typename F>
void avgpool2x_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, Device dev) {
  check_even("avgpool2x_forward", B, H, W, C);
  GP_RUN(avgpool2x_forward, out, x, B, H, W, C);
}
template <typename F>
void avgpool2x_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C,
                        Device dev) {
  check_even("avgpool2x_backward", B, H, W, C);
  GP_RUN(avgpool2x_backward, dx, dout, B, H, W, C);
}
template <typename F>
void bicubic_up_forward(F* out, const F* x, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s,
                        Device dev) {
  check_image("bicubic_up_forward", B, H, W, C);
  GP_CHECK(s >= 1, "[bicubic_up_forward] scale ", s, ": expected a positive integer");
  GP_RUN(bicubic_up_forward, out, x, B, H, W, C, s);
}
template <typename F>
void bicubic_up_backward(F* dx, const F* dout, int64_t B, int64_t H, int64_t W, int64_t C, int64_t s,
                         Device dev) {
  check_image("bicubic_up_backward", B, H, W, C);
  GP_CHECK(s >= 1, "[bicubic_up_backward] scale ", s, ": expected a positive integer");
  GP_RUN(bicubic_up_backward, dx, dout, B, H, W, C, s);
}
template <typename F>
void time_embedding(F* out, const F* t, int64_t n, int64_t dim, Device dev) {
  GP_CHECK(n >= 0 && dim >= 2 && dim % 2 == 0, "[time_embedding] dimension ", dim, ": expected an even size >= 2");
  GP_RUN(time_embedding, out, t, n, dim);
}
template <typename F>
void concat_channels_forward(F* out, const F* a, const F* b, int64_t N, int64_t Ca, int64_t Cb,
                             Device dev) {
  check_concat("concat_channels_forward", N, Ca, Cb);
  GP_RUN(concat_channels_forward, out, a, b, N, Ca, Cb);
}
template <typename F>
void concat_channels_backward(F* da, F* db, const F* dout, int64_t N, int64_t Ca, int64_t Cb,
                              Device dev) {
  check_concat("concat_channels_backward", N, Ca, Cb);
  GP_RUN(concat_channels_backward, da, db, dout, N, Ca, Cb);
}
template <typename F>
void add_image_bias_forward(F* x, const F* e, int64_t B, int64_t HW, int64_t C, Device dev) {
  check_image("add_image_bias_forward", B, HW, 1, C);
  GP_RUN(add_image_bias_forward, x, e, B, HW, C);
}
template <typename F>
void add_image_bias_backward(F* de, const F* dout, int64_t B, int64_t HW, int64_t C, Device dev) {
  check_image("add_image_bias_backward", B, HW, 1, C);
  GP_RUN(add_image_bias_backward, de, dout, B, HW, C);
}
template <typename F>
double mse_forward(const F* pred, const F* target, int64_t n, Device dev) {
  GP_CHECK(n > 0, "[mse_forward] ", n, " values: expected at least one");
  return GP_RUN(mse_forward, pred, target, n);
}
template <typename F>
void mse_backward(F* dpred, const F* pred, const F* target, int64_t n, double dloss, Device dev) {
  GP_CHECK(n > 0, "[mse_backward] ", n, " values: expected at least one");
  GP_RUN(mse_backward, dpred, pred, target, n, dloss);
}
#undef GP_RUN

#define GENPERF_TRAIN_OPS(F)                                                                      \
  template void embedding_forward<F>(F*, const int32_t*, const F*, int64_t, int64_t, int64_t,    \
                                     Device);                                                    \
  template void embedding_backward<F>(F*, const F*, const int32_t*, int64_t, int64_t, Device);   \
  template void rmsnorm_forward<F>(F*, F*, const F*, const F*, int64_t, int64_t, double, Device); \
  template void rmsnorm_backward<F>(F*, F*, const F*, const F*, const F*, const F*, int64_t,     \
                                    int64_t, Device);                                            \
  template RopeTable<F> rope_table<F>(std::span<const float>, int64_t);                          \
  template void rope_forward<F>(F*, int64_t, int64_t, int64_t, int64_t, const RopeTable<F>&,     \
                                RopeStyle, Device);                                              \
  template void rope_backward<F>(F*, int64_t, int64_t, int64_t, int64_t, const RopeTable<F>&,    \
                                 RopeStyle, Device);                                             \
  template void swiglu_forward<F>(F*, const F*, int64_t, int64_t, Device);                       \
  template void swiglu_backward<F>(F*, const F*, const F*, int64_t, int64_t, Device);            \
  template void matmul_forward<F>(F*, const F*, const F*, const F*, int64_t, int64_t, int64_t,   \
                                  const Bf16Scratch*, Device);                                   \
  template void matmul_backward<F>(F*, F*, F*, const F*, const F*, const F*, int64_t, int64_t,   \
                                   int64_t, const Bf16Scratch*, Device);                         \
  template double crossentropy_forward<F>(F*, const F*, const int32_t*, int64_t, int64_t,        \
                                          int64_t*, Device);                                     \
  template void crossentropy_backward<F>(F*, const F*, const F*, const int32_t*, int64_t,        \
                                         int64_t, double, Device);                               \
  template void residual_forward<F>(F*, const F*, const F*, int64_t, Device);                    \
  template void residual_backward<F>(F*, const F*, int64_t, Device);                             \
  template void lora_forward<F>(F*, int64_t, F*, F*, const F*, const F*, const F*,               \
                                const LoraShape&, Device);                                       \
  template void lora_backward<F>(F*, F*, F*, const F*, int64_t, const F*, const F*, const F*,    \
                                 const F*, F*, F*, const LoraShape&, Device);                    \
  template void attention_forward_naive<F>(F*, F*, const F*, const AttnShape&, Device);          \
  template void attention_backward_naive<F>(F*, const F*, const F*, const F*, const AttnShape&,  \
                                            Device);                                             \
  template void attention_forward_flash<F>(F*, F*, const F*, const AttnShape&, Device);          \
  template void attention_backward_flash<F>(F*, const F*, const F*, const F*, const F*,          \
                                            const AttnShape&, Device);                            \
  template void conv2d_forward<F>(F*, const F*, const F*, const F*, const ConvShape&, Device);    \
  template void conv2d_backward<F>(F*, F*, F*, const F*, const F*, const F*, const ConvShape&,   \
                                   Device);                                                      \
  template void group_norm_forward<F>(F*, F*, F*, const F*, const F*, const F*, int64_t, int64_t, \
                                      int64_t, int64_t, double, Device);                          \
  template void group_norm_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*,       \
                                       const F*, int64_t, int64_t, int64_t, int64_t, Device);    \
  template void group_norm_silu_forward<F>(F*, F*, F*, const F*, const F*, const F*, int64_t,     \
                                           int64_t, int64_t, int64_t, double, Device);           \
  template void group_norm_silu_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*,  \
                                            const F*, const F*, int64_t, int64_t, int64_t,       \
                                            int64_t, Device);                                    \
  template void silu_forward<F>(F*, const F*, int64_t, Device);                                  \
  template void silu_backward<F>(F*, const F*, const F*, int64_t, Device);                       \
  template void upsample2x_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, Device); \
  template void upsample2x_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, Device);\
  template void avgpool2x_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, Device);  \
  template void avgpool2x_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, Device);  \
  template void bicubic_up_forward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t,  \
                                      Device);                                                  \
  template void bicubic_up_backward<F>(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t, \
                                       Device);                                                 \
  template void time_embedding<F>(F*, const F*, int64_t, int64_t, Device);                       \
  template void concat_channels_forward<F>(F*, const F*, const F*, int64_t, int64_t, int64_t,    \
                                           Device);                                              \
  template void concat_channels_backward<F>(F*, F*, const F*, int64_t, int64_t, int64_t, Device); \
  template void add_image_bias_forward<F>(F*, const F*, int64_t, int64_t, int64_t, Device);      \
  template void add_image_bias_backward<F>(F*, const F*, int64_t, int64_t, int64_t, Device);     \
  template double mse_forward<F>(const F*, const F*, int64_t, Device);                           \
  template void mse_backward<F>(F*, const F*, const F*, int64_t, double, Device);

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s,
                Device dev) {
  const Backend& b = backend(dev);
  backend_kernel(b.train.adamw_step, "adamw_step", b)(p, g, m, v, n, s);
}
double sum_squares(const float* x, int64_t n, Device dev) {
  const Backend& b = backend(dev);
  return backend_kernel(b.train.sum_squares, "sum_squares", b)(x, n);
}
void scale(float* x, int64_t n, float k, Device dev) {
  const Backend& b = backend(dev);
  backend_kernel(b.train.scale, "scale", b)(x, n, k);
}

// ------------------------------------------------------------------------------------------
// helpers

template <typename F>
RopeTable<F> rope_table(std::span<const float> inv_freq, int64_t T) {
  RopeTable<F> rt;
  rt.T = T;
  rt.half = int64_t(inv_freq.size());
  rt.cos.resize(size_t(T * rt.half));
  rt.sin.resize(size_t(T * rt.half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < rt.half; ++i) {
      F angle;
      if constexpr (std::is_same_v<F, float>)
        angle = float(t) * inv_freq[size_t(i)];
      else
        angle = F(t) * F(inv_freq[size_t(i)]);
      rt.cos[size_t(t * rt.half + i)] = std::cos(angle);
      rt.sin[size_t(t * rt.half + i)] = std::sin(angle);
    }
  return rt;
}

bool lora_keep(uint64_t key, uint64_t idx, double p) {
  return double(mix64(key ^ mix64(idx + 0x9e3779b97f4a7c15ull)) >> 11) * 0x1p-53 >= p;
}

uint64_t lora_key(uint64_t seed, int64_t step, int64_t micro, int64_t layer, int target) {
  uint64_t k = mix64(seed + 0x4c6f5241ull);
  for (uint64_t v : {uint64_t(step), uint64_t(micro), uint64_t(layer), uint64_t(target)})
    k = mix64(k ^ (v + 0x9e3779b97f4a7c15ull));
  return k;
}

void check_attn_shape(const char* op, const AttnShape& s) {
  GP_CHECK(s.B > 0 && s.T > 0 && s.HS > 0, "[", op, "] empty shape: B ", s.B, ", T ", s.T, ", HS ", s.HS);
  GP_CHECK(s.NH > 0 && s.NKV > 0 && s.NH % s.NKV == 0, "[", op, "] ", s.NH,
           " query heads is not a multiple of ", s.NKV, " key/value heads");
  GP_CHECK(s.q_tile > 0 && s.k_tile > 0, "[", op, "] tile sizes must be positive, got ", s.q_tile,
           " x ", s.k_tile);
}

int64_t attention_gqa_scratch(const AttnShape& s) {
  return s.NH == s.NKV ? 0 : 2 * s.B * s.NH * s.T * s.HS;
}

GENPERF_TRAIN_OPS(float)
GENPERF_TRAIN_OPS(double)
#undef GENPERF_TRAIN_OPS

}  // namespace genperf::ops

// The backend table: one device's kernels, an entry per op, called by ops::X after its checks
// with the sizes the checks found. backend/cpu fills the CPU table (every entry), backend/cuda the
// CUDA one; an entry left empty makes ops::X throw "[op] has no CUDA kernel", so that a missing
// kernel fails by name, never silently (as MLX's primitives do without a GPU body). A backend is
// filled in one place, for inference and training alike.
//
// Shape legend: T tokens, K input features, N output features, D head dimension, S keys.
#pragma once
#include <cstdint>
#include <span>

#include "genperf/error.h"
#include "genperf/ops.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"
#include "genperf/tensor.h"

namespace genperf::ops {

// The float kernels of the training ops (genperf/ops_train.h), the same arguments without the
// device. (The double versions are the float64 reference and run on the CPU.)
struct TrainKernels {
  void (*embedding_forward)(float* out, const int32_t* tokens, const float* wte, int64_t N,
                            int64_t C, int64_t V) = nullptr;
  void (*embedding_backward)(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                             int64_t C) = nullptr;
  void (*rmsnorm_forward)(float* out, float* rstd, const float* inp, const float* w, int64_t N,
                          int64_t C, double eps) = nullptr;
  void (*rmsnorm_backward)(float* dinp, float* dw, const float* dout, const float* inp,
                           const float* w, const float* rstd, int64_t N, int64_t C) = nullptr;
  void (*rope_forward)(float* x, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                       const RopeTable<float>& rt, RopeStyle style) = nullptr;
  void (*rope_backward)(float* dx, int64_t ldx, int64_t N, int64_t heads, int64_t HS,
                        const RopeTable<float>& rt, RopeStyle style) = nullptr;
  void (*swiglu_forward)(float* out, const float* gu, int64_t N, int64_t FF) = nullptr;
  void (*swiglu_backward)(float* dgu, const float* dout, const float* gu, int64_t N,
                          int64_t FF) = nullptr;
  void (*matmul_forward)(float* out, const float* inp, const float* w, const float* bias,
                         int64_t N, int64_t IC, int64_t OC, const Bf16Scratch* bf16) = nullptr;
  void (*matmul_backward)(float* dinp, float* dw, float* dbias, const float* dout,
                          const float* inp, const float* w, int64_t N, int64_t IC, int64_t OC,
                          const Bf16Scratch* bf16) = nullptr;
  void (*lora_forward)(float* y, int64_t ldy, float* v, float* xd, const float* x, const float* A,
                       const float* B, const LoraShape& s) = nullptr;
  void (*lora_backward)(float* dx, float* dA, float* dB, const float* dy, int64_t ldy,
                        const float* x, const float* v, const float* A, const float* B, float* xd,
                        float* dv, const LoraShape& s) = nullptr;
  double (*crossentropy_forward)(float* lse, const float* logits, const int32_t* targets,
                                 int64_t N, int64_t V, int64_t* count) = nullptr;
  void (*crossentropy_backward)(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, int64_t N, int64_t V,
                                double dloss) = nullptr;
  void (*residual_forward)(float* out, const float* a, const float* b, int64_t n) = nullptr;
  void (*residual_backward)(float* dres, const float* dbranch, int64_t n) = nullptr;
  void (*attention_forward_naive)(float* out, float* probs, const float* qkv,
                                  const AttnShape& s) = nullptr;
  void (*attention_backward_naive)(float* dqkv, const float* dout, const float* qkv,
                                   const float* probs, const AttnShape& s) = nullptr;
  void (*attention_forward_flash)(float* out, float* lse, const float* qkv,
                                  const AttnShape& s) = nullptr;
  void (*attention_backward_flash)(float* dqkv, const float* dout, const float* qkv,
                                   const float* out, const float* lse, const AttnShape& s) = nullptr;
  void (*adamw_step)(float* p, const float* g, float* m, float* v, int64_t n,
                     const AdamWStep& s) = nullptr;
  double (*sum_squares)(const float* x, int64_t n) = nullptr;
  void (*scale)(float* x, int64_t n, float k) = nullptr;
  // Image ops (genperf/ops_image.h).
  void (*conv2d_forward)(float* out, const float* x, const float* w, const float* bias,
                         const ConvShape& s) = nullptr;
  void (*conv2d_backward)(float* dx, float* dw, float* dbias, const float* dout, const float* x,
                          const float* w, const ConvShape& s) = nullptr;
  void (*group_norm_forward)(float* out, float* mean, float* rstd, const float* x,
                             const float* gamma, const float* beta, int64_t B, int64_t HW,
                             int64_t C, int64_t G, double eps) = nullptr;
  void (*group_norm_backward)(float* dx, float* dgamma, float* dbeta, const float* dout,
                              const float* x, const float* gamma, const float* mean,
                              const float* rstd, int64_t B, int64_t HW, int64_t C,
                              int64_t G) = nullptr;
  void (*group_norm_silu_forward)(float* out, float* mean, float* rstd, const float* x,
                                  const float* gamma, const float* beta, int64_t B, int64_t HW,
                                  int64_t C, int64_t G, double eps) = nullptr;
  void (*group_norm_silu_backward)(float* dx, float* dgamma, float* dbeta, const float* dout,
                                   const float* x, const float* gamma, const float* beta,
                                   const float* mean, const float* rstd, int64_t B, int64_t HW,
                                   int64_t C, int64_t G) = nullptr;
  void (*silu_forward)(float* out, const float* x, int64_t n) = nullptr;
  void (*silu_backward)(float* dx, const float* dout, const float* x, int64_t n) = nullptr;
  void (*upsample2x_forward)(float* out, const float* x, int64_t B, int64_t H, int64_t W,
                             int64_t C) = nullptr;
  void (*upsample2x_backward)(float* dx, const float* dout, int64_t B, int64_t H, int64_t W,
                              int64_t C) = nullptr;
  void (*avgpool2x_forward)(float* out, const float* x, int64_t B, int64_t H, int64_t W,
                            int64_t C) = nullptr;
  void (*avgpool2x_backward)(float* dx, const float* dout, int64_t B, int64_t H, int64_t W,
                             int64_t C) = nullptr;
  void (*bicubic_up_forward)(float* out, const float* x, int64_t B, int64_t H, int64_t W,
                             int64_t C, int64_t s) = nullptr;
  void (*bicubic_up_backward)(float* dx, const float* dout, int64_t B, int64_t H, int64_t W,
                              int64_t C, int64_t s) = nullptr;
  void (*time_embedding)(float* out, const float* t, int64_t n, int64_t dim) = nullptr;
  void (*concat_channels_forward)(float* out, const float* a, const float* b, int64_t N,
                                  int64_t Ca, int64_t Cb) = nullptr;
  void (*concat_channels_backward)(float* da, float* db, const float* dout, int64_t N, int64_t Ca,
                                   int64_t Cb) = nullptr;
  void (*add_image_bias_forward)(float* x, const float* e, int64_t B, int64_t HW,
                                 int64_t C) = nullptr;
  void (*add_image_bias_backward)(float* de, const float* dout, int64_t B, int64_t HW,
                                  int64_t C) = nullptr;
  double (*mse_forward)(const float* pred, const float* target, int64_t n) = nullptr;
  void (*mse_backward)(float* dpred, const float* pred, const float* target, int64_t n,
                       double dloss) = nullptr;
};

struct Backend {
  const char* name = "";  // "CPU", "CUDA": the device as errors name it
  void (*linear)(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                 int64_t K, int64_t N) = nullptr;
  void (*linear_many)(const Tensor& x, std::span<const LinearOut> outs, int64_t T, int64_t K) = nullptr;
  Tensor (*prepare_weight)(const Tensor& w) = nullptr;
  void (*embedding)(const Tensor& table, std::span<const int32_t> ids, Tensor& out) = nullptr;
  void (*rms_norm)(const Tensor& x, const Tensor& w, float eps, Tensor& y) = nullptr;
  void (*rope)(Tensor& x, int64_t nheads, int64_t D, std::span<const int32_t> pos,
               std::span<const float> inv_freq, RopeStyle style) = nullptr;
  void (*silu_mul)(const Tensor& gate, const Tensor& up, Tensor& out) = nullptr;
  void (*add_inplace)(Tensor& x, const Tensor& y) = nullptr;
  void (*store_rows)(const Tensor& src, Tensor& dst) = nullptr;
  void (*attention)(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                    int64_t nkv_heads, int64_t q_pos0, float scale, Tensor& out, int64_t T,
                    int64_t S, int64_t D) = nullptr;
  TrainKernels train;
};

// The backend's kernel for the op, or "[op] has no CUDA kernel".
template <typename Fn>
Fn backend_kernel(Fn fn, const char* op, const Backend& b) {
  GP_CHECK(fn != nullptr, "[", op, "] has no ", b.name, " kernel");
  return fn;
}

// The table of a device. Each backend defines its own (src/backend/<device>/).
const Backend& backend(Device d);
const Backend& cpu_backend();
const Backend& cuda_backend();

}  // namespace genperf::ops

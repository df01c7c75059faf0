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

#include "genperf/ops.h"
#include "genperf/tensor.h"

namespace genperf::ops {

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
};

// The table of a device. Each backend defines its own (src/backend/<device>/).
const Backend& backend(Device d);
const Backend& cpu_backend();
const Backend& cuda_backend();

}  // namespace genperf::ops

// Pieces of genperf/quantize.h shared between its source files and the tests: the calibration
// forward pass (stats.cpp) and the GPTQ core (gptq.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"

namespace genperf::quant {

// Sees the f32 input x [T, K] of each weight matmul, with the names of the weights that
// multiply it (q/k/v share one input, gate/up another).
using InputObserver = std::function<void(const std::vector<std::string>& weights, const Tensor& x)>;

// LlamaModel's forward pass (src/models/llama/model.cpp) written over ops/ again, with f32
// copies of every weight and a hook before each matmul; one window from position 0, logits for
// every position. A test checks its logits against LlamaModel's.
class CalibrationModel {
 public:
  explicit CalibrationModel(const Checkpoint& ck);
  const LlamaConfig& config() const { return config_; }
  Tensor forward(std::span<const int32_t> tokens, const InputObserver& observe) const;  // [T, V]

 private:
  struct Layer {
    std::vector<std::string> qkv, o, gate_up, down;  // weight names, per input
    Tensor attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
  };
  LlamaConfig config_;
  RopeStyle rope_style_;
  Tensor embed_, norm_, head_;
  std::string head_name_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
};

// U [n, n] (f32, row-major, upper) with U^T U = H^-1 for H = gram + damp * mean(diag(gram)) * I
// (gram [n, n] symmetric, row-major). When H is not positive definite, damp grows tenfold (from
// 1e-4 when it was 0) up to three times before it fails. See gptq.cpp.
std::vector<float> inverse_cholesky_upper(const std::vector<double>& gram, int64_t n, double damp);

// GPTQ of one matrix w [N, K] (f32, row-major) to `format` (a block format whose block divides
// K), written to dst (N rows of bytes_for(format, K)). gram is X^T X / n [K, K]; `block` the
// lazy-batch width in columns; damp the dampening fraction. See gptq.cpp.
void gptq_quantize(const float* w, int64_t N, int64_t K, DType format, const std::vector<double>& gram,
                   int64_t block, double damp, void* dst);

}  // namespace genperf::quant

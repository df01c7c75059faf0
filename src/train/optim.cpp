// AdamW, the learning-rate schedule, gradient norm and clipping, and one optimizer step with
// gradient accumulation. The loops over parameters are the optimizer ops of genperf/ops_train.h,
// whose results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/ops.h"
#include "genperf/ops_train.h"
#include "genperf/train.h"

namespace genperf {

AdamW::AdamW(size_t num_params, AdamWOptions o) : o_(o), m_(num_params, 0.0f), v_(num_params, 0.0f) {
  GP_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0 && o.weight_decay >= 0,
           "[adamw] betas must lie in [0, 1), eps > 0 and weight decay >= 0; got betas ", o.beta1,
           ", ", o.beta2, ", eps ", o.eps, ", weight decay ", o.weight_decay);
}

// The update in PyTorch's order: decay, moments, then p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),
// on each segment (ops::adamw_step).
void AdamW::step(std::span<float> params, std::span<const float> grads,
                 std::span<const ParamSegment> segments, float lr) {
  GP_CHECK(params.size() == m_.size() && grads.size() == m_.size(), "[adamw] ", params.size(),
           " parameters and ", grads.size(), " gradients for an optimizer of ", m_.size());
  ++t_;
  const double bc1 = 1.0 - std::pow(double(o_.beta1), double(t_));
  const double bc2 = 1.0 - std::pow(double(o_.beta2), double(t_));
  ops::AdamWStep st{1.0f, o_.beta1, o_.beta2, float(double(lr) / bc1), float(1.0 / std::sqrt(bc2)), o_.eps};
  for (const ParamSegment& s : segments) {
    GP_CHECK(s.offset + s.count <= m_.size(), "[adamw] segment ", s.offset, " + ", s.count,
             " exceeds ", m_.size(), " parameters");
    st.keep = s.decay ? 1.0f - lr * o_.weight_decay : 1.0f;
    const size_t i = s.offset;
    ops::adamw_step(params.data() + i, grads.data() + i, m_.data() + i, v_.data() + i,
                    int64_t(s.count), st);
  }
}

float LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return max_lr * float(step + 1) / float(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double span = double(total_steps - warmup_steps);
  const double ratio = span > 0 ? double(step - warmup_steps) / span : 1.0;
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return float(double(min_lr) + coeff * double(max_lr - min_lr));
}

double grad_norm(std::span<const float> grads) {
  return std::sqrt(ops::sum_squares(grads.data(), int64_t(grads.size())));
}

double clip_grad_norm(std::span<float> grads, double max_norm) {
  const double norm = grad_norm(grads);
  GP_CHECK(std::isfinite(norm), "[clip_grad_norm] the gradient norm is ", norm,
           " (a NaN or infinity in the gradients)");
  if (max_norm > 0 && norm > max_norm) {
    ops::scale(grads.data(), int64_t(grads.size()), float(max_norm / (norm + 1e-6)));
  }
  return norm;
}

StepResult train_step(TrainModel& m, AdamW& opt, std::span<const MicroBatch> micro, float lr,
                      double max_grad_norm) {
  GP_CHECK(!micro.empty(), "[train_step] needs at least one micro-batch");
  // One process's step is the data-parallel step on one rank (genperf/dist.h): one code path.
  DataParallel one(m, {}, int64_t(micro.size()));
  return one.step(opt, micro, lr, max_grad_norm);
}

double train_step_flops(const LlamaConfig& c, int64_t B, int64_t T, const LoraConfig* lora) {
  const double C = double(c.hidden_size), FF = double(c.intermediate_size);
  const double qkv = double(c.q_dim() + 2 * c.kv_dim()), ao = double(c.q_dim());
  const double per_layer = C * qkv + ao * C + 3.0 * C * FF;
  const double matmul_params = double(c.num_hidden_layers) * per_layer + double(c.vocab_size) * C;
  const double attn = ops::attention_flops(T, c.num_attention_heads, c.head_dim, 0);
  const double attn_flops = 3.0 * double(B) * double(c.num_hidden_layers) * attn;
  if (!lora) return 6.0 * matmul_params * double(B * T) + attn_flops;
  // Frozen base: forward and input gradient only; each adapter r (in + out) parameters.
  lora->validate();
  const double in_out[] = {C + double(c.q_dim()), C + double(c.kv_dim()), C + double(c.kv_dim()),
                           ao + C, C + FF, C + FF, FF + C};
  double adapter = 0;
  const auto& names = lora_target_names();
  for (const std::string& t : lora->targets)
    adapter += in_out[std::find(names.begin(), names.end(), t) - names.begin()];
  adapter *= double(lora->rank) * double(c.num_hidden_layers);
  return (4.0 * matmul_params + 6.0 * adapter) * double(B * T) + attn_flops;
}

}  // namespace genperf

// The CPU backend's table (ops/backend.h): every op has a kernel here. The drivers (cpu_ops.h)
// pick the ISA level's kernels at run time.
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/image_ops.h"
#include "backend/cpu/train_ops.h"
#include "ops/backend.h"

namespace genperf::ops {

const Backend& cpu_backend() {
  static const Backend table = [] {
    Backend b;
    b.name = "CPU";
    b.linear = cpu::linear;
    b.linear_many = cpu::linear_many;
    b.prepare_weight = cpu::prepare_weight;
    b.embedding = cpu::embedding;
    b.rms_norm = cpu::rms_norm;
    b.rope = cpu::rope;
    b.silu_mul = cpu::silu_mul;
    b.add_inplace = cpu::add_inplace;
    b.store_rows = cpu::store_rows;
    b.attention = cpu::attention;
    TrainKernels& t = b.train;
    t.embedding_forward = cpu::embedding_forward<float>;
    t.embedding_backward = cpu::embedding_backward<float>;
    t.rmsnorm_forward = cpu::rmsnorm_forward<float>;
    t.rmsnorm_backward = cpu::rmsnorm_backward<float>;
    t.rope_forward = cpu::rope_forward<float>;
    t.rope_backward = cpu::rope_backward<float>;
    t.swiglu_forward = cpu::swiglu_forward<float>;
    t.swiglu_backward = cpu::swiglu_backward<float>;
    t.matmul_forward = cpu::matmul_forward<float>;
    t.matmul_backward = cpu::matmul_backward<float>;
    t.lora_forward = cpu::lora_forward<float>;
    t.lora_backward = cpu::lora_backward<float>;
    t.crossentropy_forward = cpu::crossentropy_forward<float>;
    t.crossentropy_backward = cpu::crossentropy_backward<float>;
    t.residual_forward = cpu::residual_forward<float>;
    t.residual_backward = cpu::residual_backward<float>;
    t.attention_forward_naive = cpu::attention_forward_naive<float>;
    t.attention_backward_naive = cpu::attention_backward_naive<float>;
    t.attention_forward_flash = cpu::attention_forward_flash<float>;
    t.attention_backward_flash = cpu::attention_backward_flash<float>;
    t.adamw_step = cpu::adamw_step;
    t.sum_squares = cpu::sum_squares_chunked;
    t.scale = cpu::scale_chunked;
    t.conv2d_forward = cpu::conv2d_forward<float>;
    t.conv2d_backward = cpu::conv2d_backward<float>;
    t.group_norm_forward = cpu::group_norm_forward<float>;
    t.group_norm_backward = cpu::group_norm_backward<float>;
    t.group_norm_silu_forward = cpu::group_norm_silu_forward<float>;
    t.group_norm_silu_backward = cpu::group_norm_silu_backward<float>;
    t.silu_forward = cpu::silu_forward<float>;
    t.silu_backward = cpu::silu_backward<float>;
    t.upsample2x_forward = cpu::upsample2x_forward<float>;
    t.upsample2x_backward = cpu::upsample2x_backward<float>;
    t.avgpool2x_forward = cpu::avgpool2x_forward<float>;
    t.avgpool2x_backward = cpu::avgpool2x_backward<float>;
    t.bicubic_up_forward = cpu::bicubic_up_forward<float>;
    t.bicubic_up_backward = cpu::bicubic_up_backward<float>;
    t.time_embedding = cpu::time_embedding<float>;
    t.concat_channels_forward = cpu::concat_channels_forward<float>;
    t.concat_channels_backward = cpu::concat_channels_backward<float>;
    t.add_image_bias_forward = cpu::add_image_bias_forward<float>;
    t.add_image_bias_backward = cpu::add_image_bias_backward<float>;
    t.mse_forward = cpu::mse_forward<float>;
    t.mse_backward = cpu::mse_backward<float>;
    return b;
  }();
  return table;
}

}  // namespace genperf::ops

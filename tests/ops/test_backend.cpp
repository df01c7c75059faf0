// The backend table (src/ops/backend.h): ops::X runs the kernel of its tensors' device; a device
// without a kernel for the op fails by name; tensors on two devices are refused. No GPU is
// needed: tensors are marked as CUDA tensors over host memory, which the CUDA table must never
// touch (it has no kernels yet), and the error must come before any memory is read.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "genperf/error.h"
#include "genperf/ops.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"
#include "genperf/tensor.h"
#include "ops/backend.h"

#ifdef GENPERF_HAVE_CUDA
#include "backend/cuda/cuda_runtime.h"
#endif

namespace genperf {
namespace {

// A tensor whose storage says it is on the CUDA device (host memory, never dereferenced).
Tensor on_cuda(Tensor t) {
  t.storage()->device = Device::CUDA;
  return t;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Backend, CpuTableHasEveryOp) {
  const ops::Backend& b = ops::backend(Device::CPU);
  EXPECT_STREQ(b.name, "CPU");
  EXPECT_TRUE(b.linear && b.linear_many && b.prepare_weight && b.embedding && b.rms_norm && b.rope &&
              b.silu_mul && b.add_inplace && b.store_rows && b.attention);
}

TEST(Backend, MissingCudaKernelsFailByName) {
  if (ops::backend(Device::CUDA).linear) GTEST_SKIP() << "this build has CUDA kernels";
  const Tensor x = on_cuda(Tensor::zeros({4, 64})), w = on_cuda(Tensor::zeros({32, 64}));
  Tensor y = on_cuda(Tensor::zeros({4, 32})), n = on_cuda(Tensor::zeros({64}));
  Tensor x2 = on_cuda(Tensor::zeros({4, 64}));
  Tensor kv = on_cuda(Tensor::zeros({8, 64}));
  const std::vector<int32_t> ids = {0, 1, 2, 3}, pos = {0, 1, 2, 3};
  const std::vector<float> inv_freq(16, 1.f);
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"linear", [&] { ops::linear(x, w, nullptr, y); }},
      {"linear_many", [&] { const ops::LinearOut o{&w, nullptr, &y}; ops::linear_many(x, {&o, 1}); }},
      {"prepare_weight", [&] { ops::prepare_weight(w); }},
      {"embedding", [&] { ops::embedding(w, ids, x2); }},
      {"rms_norm", [&] { ops::rms_norm(x, n, 1e-5f, x2); }},
      {"rope", [&] { ops::rope(x2, 2, pos, inv_freq, RopeStyle::Neox); }},
      {"silu_mul", [&] { ops::silu_mul(x, x, x2); }},
      {"add_inplace", [&] { ops::add_inplace(x2, x); }},
      {"store_rows", [&] { ops::store_rows(x, x2); }},
      {"attention", [&] { ops::attention(x, kv, kv, 2, 2, 4, 0.125f, x2); }},
  };
  for (const auto& [op, fn] : cases)
    EXPECT_EQ(error_of(fn), "[" + op + "] has no CUDA kernel") << op;
}

// The training table: every float kernel on the CPU; on CUDA, each op fails by name before
// touching memory, and the float64 references refuse any device but the CPU.
TEST(Backend, TrainingOpsFollowTheDevice) {
  const ops::TrainKernels& t = ops::backend(Device::CPU).train;
  EXPECT_TRUE(t.embedding_forward && t.embedding_backward && t.rmsnorm_forward && t.rmsnorm_backward &&
              t.rope_forward && t.rope_backward && t.swiglu_forward && t.swiglu_backward &&
              t.matmul_forward && t.matmul_backward && t.lora_forward && t.lora_backward &&
              t.crossentropy_forward && t.crossentropy_backward && t.residual_forward &&
              t.residual_backward && t.attention_forward_naive && t.attention_backward_naive &&
              t.attention_forward_flash && t.attention_backward_flash && t.adamw_step &&
              t.sum_squares && t.scale && t.conv2d_forward && t.conv2d_backward && t.group_norm_forward && t.group_norm_backward &&
              t.silu_forward && t.silu_backward && t.upsample2x_forward && t.upsample2x_backward &&
              t.avgpool2x_forward && t.avgpool2x_backward && t.bicubic_up_forward &&
              t.bicubic_up_backward && t.time_embedding && t.concat_channels_forward &&
              t.concat_channels_backward && t.add_image_bias_forward && t.add_image_bias_backward &&
              t.mse_forward && t.mse_backward);
  std::vector<float> f(64, 0.f);
  std::vector<double> d(64, 0.0);
  ops::AttnShape s;
  s.T = 2, s.HS = 4;
  const auto cuda = Device::CUDA;
  EXPECT_EQ(error_of([&] { ops::residual_forward(f.data(), f.data(), f.data(), 8, Device::CPU); }), "");
  EXPECT_EQ(error_of([&] { ops::residual_forward(d.data(), d.data(), d.data(), 8, cuda); }),
            "[residual_forward] the float64 reference runs on the CPU, not cuda");
  if (ops::backend(cuda).train.matmul_forward) GTEST_SKIP() << "this build has CUDA training kernels";
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"matmul_forward",
       [&] { ops::matmul_forward<float>(f.data(), f.data(), f.data(), nullptr, 2, 4, 4, nullptr, cuda); }},
      {"attention_forward_flash",
       [&] { ops::attention_forward_flash(f.data(), f.data(), f.data(), s, cuda); }},
      {"rmsnorm_backward",
       [&] {
         float* p = f.data();
         ops::rmsnorm_backward(p, p, p, p, p, p, 2, 4, cuda);
       }},
      {"adamw_step", [&] { ops::adamw_step(f.data(), f.data(), f.data(), f.data(), 8, {}, cuda); }},
      {"sum_squares", [&] { ops::sum_squares(f.data(), 8, cuda); }},
      {"group_norm_forward",
       [&] {
         float* p = f.data();
         ops::group_norm_forward(p, p, p, p, p, p, 1, 4, 4, 2, 1e-5, cuda);
       }},
      {"conv2d_backward",
       [&] {
         float* p = f.data();
         ops::ConvShape cs;
         ops::conv2d_backward(p, p, p, p, p, p, cs, Precision::F32, cuda);
       }},
      {"avgpool2x_backward", [&] { ops::avgpool2x_backward(f.data(), f.data(), 1, 2, 2, 4, cuda); }},
      {"concat_channels_forward",
       [&] { ops::concat_channels_forward(f.data(), f.data(), f.data(), 2, 3, 4, cuda); }},
      {"concat_channels_backward",
       [&] { ops::concat_channels_backward(f.data(), static_cast<float*>(nullptr), f.data(), 2, 3, 4, cuda); }},
      {"add_image_bias_forward", [&] { ops::add_image_bias_forward(f.data(), f.data(), 1, 4, 4, cuda); }},
      {"add_image_bias_backward", [&] { ops::add_image_bias_backward(f.data(), f.data(), 1, 4, 4, cuda); }},
      {"mse_forward", [&] { ops::mse_forward(f.data(), f.data(), 8, cuda); }},
      {"mse_backward", [&] { ops::mse_backward(f.data(), f.data(), f.data(), 8, 1.0, cuda); }},
  };
  for (const auto& [op, fn] : cases)
    EXPECT_EQ(error_of(fn), "[" + op + "] has no CUDA kernel") << op;
}

TEST(Backend, TensorsOnTwoDevicesAreRefused) {
  const Tensor x = Tensor::zeros({4, 64}), w = on_cuda(Tensor::zeros({32, 64}));
  Tensor y = Tensor::zeros({4, 32});
  const std::string e = error_of([&] { ops::linear(x, w, nullptr, y); });
  EXPECT_NE(e.find("[linear] w f32[32, 64] is on cuda, x f32[4, 64] on cpu"), std::string::npos) << e;
}

TEST(Backend, ReferencesRunOnTheCpuOnly) {
  const Tensor x = on_cuda(Tensor::zeros({4, 64}));
  Tensor y = on_cuda(Tensor::zeros({4, 64}));
  const std::string e = error_of([&] { ops::ref::add_inplace(y, x); });
  EXPECT_NE(e.find("the reference runs on the CPU"), std::string::npos) << e;
}

TEST(Backend, DeviceMemory) {
#ifdef GENPERF_HAVE_CUDA
  // Built with CUDA: device memory where a GPU is visible, a clear error where none is.
  if (cuda::device_count() == 0) {
    const std::string e = error_of([] { Storage::allocate(16, Device::CUDA); });
    EXPECT_NE(e.find("no CUDA device is visible"), std::string::npos) << e;
  } else {
    const auto s = Storage::allocate(16, Device::CUDA);
    EXPECT_EQ(s->device, Device::CUDA);
    EXPECT_NE(s->data, nullptr);
  }
#else
  const std::string e = error_of([] { Storage::allocate(16, Device::CUDA); });
  EXPECT_NE(e.find("this build has no cuda backend"), std::string::npos) << e;
#endif
}

}  // namespace
}  // namespace genperf

// The diffusion super-resolution network: an SR3-style UNet on channels-last images, built from
// the ops of ops_image.h and ops_train.h, for training (forward and backward) and sampling alike.
// UNet<float> runs the device's kernels; UNet<double> is the float64 reference the gradient
// checks use.
//
// The network (level l runs at 1/2^l of the input's size with base * mults[l] channels):
//   temb  = silu(fc2(silu(fc1(time_embedding(t, base)))))            [B, 4 base]
//   h     = conv_in(x)                                               3x3, 2 channels -> base
//   down: per level, res_blocks x (ResBlock, then Attention on attention levels); the level's
//         output is kept as its skip; below the last level, a 3x3 convolution with stride 2
//   mid:  ResBlock, Attention, ResBlock
//   up:   per level from the last: h = concat(h, skip), res_blocks x (ResBlock, Attention on
//         attention levels); above level 0, 2x nearest up-sampling and a 3x3 convolution
//   out   = out.conv(silu(out.norm(h)))                              3x3, -> channels
// ResBlock(x -> OC): h = conv1(silu(norm1(x))) + temb_proj(temb) per image and channel;
//   h = conv2(silu(norm2(h))); out = skip(x) + h, skip a 1x1 convolution when the channels
//   change, else the identity.
// Attention(x): qkv = linear(norm(x)) (q, k, v column blocks), non-causal multi-head attention
//   over the pixels of each image (heads of head_channels), out = x + proj(attention).
// Norms are group norms of `groups` groups. Convolution filters are [OC, K, K, IC], linear
// weights [OUT, IN] (ops' layouts). The last convolution of each block, the attention's
// projection and out.conv start at zero (DDPM's initialization), so that each block starts as
// the identity.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "genperf/json.h"
#include "genperf/tensor.h"

namespace genperf::sr {

// The SR model's config.json: the network, its diffusion and the data transform.
struct UNetConfig {
  // network
  int64_t channels = 1;                 // image channels; the network sees 2x (noisy target, condition)
  int64_t base = 32;                    // channels at level 0
  std::vector<int64_t> mults{1, 2, 2};  // channel multiplier of each level
  int64_t res_blocks = 1;               // residual blocks per level on each path
  std::vector<int64_t> attention_levels{2};  // levels with attention (the middle always has it)
  int64_t head_channels = 32;           // channels per attention head
  int64_t groups = 8;                   // group norm groups; divides every level's channels
  double norm_eps = 1e-5;
  // diffusion
  int64_t scale = 4;               // the super-resolution factor the model was trained for
  std::string prediction = "v";    // what the network predicts: "v" or "eps"
  std::string schedule = "cosine";  // noise schedule: "cosine" or "linear"
  int64_t timesteps = 1000;
  // data: maps are transformed ("log": ln x, positive maps; "linear": x), standardized by the
  // low-resolution map's mean and standard deviation, and the network's target is the
  // high-resolution map less the bicubic up-sampled input, divided by residual_std.
  std::string transform = "linear";
  double residual_std = 1;

  int64_t levels() const { return int64_t(mults.size()); }
  int64_t level_channels(int64_t l) const { return base * mults[size_t(l)]; }
  int64_t multiple() const { return int64_t(1) << (levels() - 1); }  // H and W must divide by it
  bool has_attention(int64_t level) const;
  // Throws naming src and the field for an impossible config.
  void validate(const std::string& src) const;
};
UNetConfig unet_config_from_json(const Json& j, const std::string& src);
Json unet_config_json(const UNetConfig& c);
// config.json's "architectures" entry of SR models.
inline constexpr const char* kUNetArchitecture = "GenperfSRUNet";

// One parameter tensor of the flat weight buffer.
struct ParamSpec {
  std::string name;            // e.g. "down.0.res.0.conv1.weight"
  std::vector<int64_t> shape;
  size_t offset = 0;           // into weights() and grads()
  size_t size() const;
};

template <typename F>
class UNet {
 public:
  explicit UNet(const UNetConfig& c);  // validates c; weights are zero until init or load
  ~UNet();
  UNet(UNet&&) noexcept;
  UNet& operator=(UNet&&) noexcept;

  const UNetConfig& config() const;
  const std::vector<ParamSpec>& params() const;
  const ParamSpec& param(const std::string& name) const;  // throws for an unknown name
  std::span<F> weights();
  std::span<const F> weights() const;
  std::span<F> grads();
  void zero_grad();
  // Weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's default for convolutions and linear
  // layers), biases alike, norm scales 1 and shifts 0, drawn in parameter order from seed.
  // zero_out: the blocks' last layers start at zero (training); false draws them too (tests).
  void init(uint64_t seed, bool zero_out = true);

  // x [B, H, W, 2 channels] (the noisy target, then the condition), t [B] diffusion steps (as
  // numbers, 0 .. timesteps - 1); returns [B, H, W, channels], valid until the next forward.
  // H and W must be multiples of config().multiple(). train: keep what backward needs.
  const F* forward(const F* x, const F* t, int64_t B, int64_t H, int64_t W, bool train);
  // dout [B, H, W, channels] of the last forward(train = true); grads() += d loss / d weights.
  void backward(const F* dout);

  // For data-parallel and sharded training (genperf/dist.h's DistModel): hook(offset) during
  // backward whenever every gradient at and after offset is final (offsets fall to 0, the last
  // call); units of parameters read as a whole (the time MLP, conv_in, each residual block,
  // attention, down- or up-sampling convolution, the output layers; each one range of weights()),
  // with hook(unit, false, backward) before a unit is read and (unit, true, backward) after, in
  // forward 0, 1, ... and in backward from the last unit down to 0. Empty hooks: no calls.
  void set_grads_ready_hook(std::function<void(size_t offset)> hook);
  std::vector<std::pair<size_t, size_t>> param_units() const;
  void set_params_hook(std::function<void(int64_t unit, bool done, bool backward)> hook);
  // Moves weights and gradients into buffers of weights().size() values the caller provides
  // (copying nothing; an undefined tensor keeps that buffer). UNet<float> only.
  void adopt_buffers(Tensor weights, Tensor grads);
  // Convolutions in bf16 (ops::ConvShape::bf16, PyTorch's autocast for them): their operands
  // rounded to bf16, products summed in f32; norms, attention, the linear layers, weights,
  // gradients and activations stay F. Off at construction. Callers choose by
  // effective_precision (genperf/train.h): on a CPU without AVX512-BF16 the products are the
  // same but slower.
  void set_bf16(bool on);
  bool bf16() const;
  double last_forward_flops() const;  // matmul, convolution and attention FLOPs of the last forward
  size_t activation_bytes() const;    // activations, their gradients and saved statistics held

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class UNet<float>;
extern template class UNet<double>;

}  // namespace genperf::sr

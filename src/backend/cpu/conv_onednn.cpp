// 2-D convolution of floats on oneDNN's convolution primitives (image_ops.h, conv2d_*_onednn), on
// the op's layouts: activations [B, H, W, C] are oneDNN's dims {B, C, H, W} in format nhwc,
// weights [OC, K, K, IC] are {OC, IC, K, K} in format ohwi. Each primitive chooses its weights'
// format (format_tag::any: a blocked one for the JIT kernels); our weights are reordered into it
// in the calling thread's buffer at each call (they change at every training step), and diff
// weights are reordered back to ohwi and added. Padding: top and left = pad, bottom and right
// = (Ho - 1) stride + K - H - pad, which is less than pad where the stride does not divide (and
// negative where it skips the last rows: those shapes run on im2col, see make_conv).
// ConvShape::bf16: src and diff_dst rounded to bf16 (round_to_bf16) in the thread's buffers,
// weights rounded by their reorder into the primitive's format (oneDNN's f32 -> bf16 conversion,
// to nearest even), results in f32: callers run this only where the CPU has AVX512-BF16, as
// oneDNN's bf16 kernels elsewhere emulate the products.
// Primitives are created once per shape, pass and thread count (oneDNN sizes its blocking by the
// thread count it is created at) and kept in one cache.
// Each function returns false where oneDNN offers only its reference implementation for the shape
// or fails; the caller then runs its im2col path (image_conv.cpp), and nothing this one wrote is
// read: out and dx are overwritten there, dw is added to only after oneDNN succeeded.
// Thread counts: forward and backward data give the same bits at any thread count (each output
// element is summed by one thread, over (ky, kx, ic) in an order the blocking keeps), so sampled
// images do not depend on it: checked on the UNet's shapes at 1 to 64 threads with the AVX-512,
// AVX2 and SSE4.1 kernels, and by ImageOps.ConvIndependentOfThreadCount. Backward weights splits
// its sum over pixels among the threads: dw depends on the thread count, and is the same from run
// to run at one count (training is reproducible at a fixed thread count).
#include <omp.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/image_ops.h"
#include "backend/cpu/onednn.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

using ops::ConvShape;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

enum class Pass { Forward, BackwardData, BackwardWeights };

struct ConvKey {
  int64_t B, H, W, IC, OC, K, stride, pad;
  bool bf16;  // bf16 src, weights and diff_dst (ConvShape::bf16); f32 dst, diff_src, diff_weights
  int threads;
  Pass pass;
  bool bias;  // forward only: the backward bias is summed by the caller
  auto operator<=>(const ConvKey&) const = default;
};

// A primitive and its weights (or diff weights) format, with the reorder between that format and
// ohwi (none when the primitive takes ohwi); no primitive (with oneDNN's reason) where oneDNN
// offers none but its reference implementation.
struct Conv {
  std::optional<dnnl::primitive> prim;
  dnnl::memory::desc wei;
  std::optional<dnnl::reorder> reorder;
  std::string why;
};

dnnl::memory::desc activations(int64_t B, int64_t C, int64_t H, int64_t W, dt type = dt::f32) {
  return {{B, C, H, W}, type, tag::nhwc};
}
dnnl::memory::desc weights(const ConvKey& k, tag t, dt type = dt::f32) { return {{k.OC, k.IC, k.K, k.K}, type, t}; }

Conv make_conv(const ConvKey& k) {
  const ConvShape s{k.B, k.H, k.W, k.IC, k.OC, k.K, k.stride, k.pad, k.bf16};
  const int64_t Ho = s.Ho(), Wo = s.Wo();
  const dnnl::memory::dims strides{k.stride, k.stride}, pad_l{k.pad, k.pad},
      pad_r{(Ho - 1) * k.stride + k.K - k.H - k.pad, (Wo - 1) * k.stride + k.K - k.W - k.pad};
  // bf16: the operands (src, weights, diff_dst) in bf16, the results (dst, diff_src, diff_weights)
  // in f32; the forward hint of the backward passes is the forward of those types.
  const dt op = k.bf16 ? dt::bf16 : dt::f32;
  const auto src = activations(k.B, k.IC, k.H, k.W, op), dst = activations(k.B, k.OC, Ho, Wo);
  const auto diff_src = activations(k.B, k.IC, k.H, k.W), diff_dst = activations(k.B, k.OC, Ho, Wo, op);
  const auto any = weights(k, tag::any, op), ohwi = weights(k, tag::ohwi);
  const auto bias = k.bias ? dnnl::memory::desc({k.OC}, dt::f32, tag::x) : dnnl::memory::desc();
  // A negative right padding (the stride skips the last rows or columns) is left to im2col:
  // oneDNN 2.6's jit_1x1:avx2 backward weights read past the image there (1 x 1, stride 2 on a
  // 4 x 6 image: dw wrong by 10-50%, and different from run to run).
  if (pad_r[0] < 0 || pad_r[1] < 0) return {std::nullopt, {}, std::nullopt, "negative right padding"};
  auto& e = onednn_engine();
  try {
    const dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                        src, any, bias, dst, strides, pad_l, pad_r),
        e);
    Conv c;
    if (k.pass == Pass::Forward) {
      if (onednn_is_reference(fwd)) return {std::nullopt, {}, std::nullopt, fwd.impl_info_str()};
      c.prim = dnnl::convolution_forward(fwd), c.wei = fwd.weights_desc();
    } else if (k.pass == Pass::BackwardData) {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, diff_src, any, diff_dst,
                                                strides, pad_l, pad_r),
          e, fwd);
      if (onednn_is_reference(pd)) return {std::nullopt, {}, std::nullopt, pd.impl_info_str()};
      c.prim = dnnl::convolution_backward_data(pd), c.wei = pd.weights_desc();
    } else {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src,
                                                   weights(k, tag::any), dnnl::memory::desc(), diff_dst,
                                                   strides, pad_l, pad_r),
          e, fwd);
      if (onednn_is_reference(pd)) return {std::nullopt, {}, std::nullopt, pd.impl_info_str()};
      c.prim = dnnl::convolution_backward_weights(pd), c.wei = pd.diff_weights_desc();
    }
    if (c.wei != ohwi) {
      const bool into_prim = k.pass != Pass::BackwardWeights;
      c.reorder = dnnl::reorder(into_prim ? dnnl::reorder::primitive_desc(e, ohwi, e, c.wei)
                                          : dnnl::reorder::primitive_desc(e, c.wei, e, ohwi));
    }
    return c;
  } catch (const dnnl::error& err) { return {std::nullopt, {}, std::nullopt, err.what()}; }
}

ConvKey key_of(const ConvShape& s, Pass pass, bool bias) {
  return {s.B, s.H, s.W, s.IC, s.OC, s.K, s.stride, s.pad, s.bf16, num_threads(), pass, bias};
}

// The cached primitive of key (created at key.threads = genperf::num_threads(), set for oneDNN).
Conv cached_conv(const ConvKey& key) {
  onednn_engine();  // applies the ISA cap before any other oneDNN call
  onednn_set_threads();
  static OnednnCache<ConvKey, Conv> cache(make_conv);
  return cache.get(key);
}

// The calling thread's buffer of at least n floats, one per slot, kept between calls and only
// grown (a fresh one per call is zeroed and faulted in); valid until the thread's next call.
float* thread_buffer(int slot, size_t n) {
  thread_local std::vector<float> buf[2];
  std::vector<float>& b = buf[slot];
  if (b.size() < n) {
    b.clear();  // no copy of the old contents on growth
    b.resize(n);
  }
  return b.data();
}

dnnl::memory user(const dnnl::memory::desc& d, const void* p) {
  return dnnl::memory(d, onednn_engine(), const_cast<void*>(p));
}

// An activation [rows, C] as the primitive reads it: a itself (f32), or rounded to bf16 in the
// thread's buffer (slot 0 or 1).
const void* operand(const float* a, int64_t rows, int64_t C, bool bf16, int slot) {
  if (!bf16) return a;
  thread_local std::vector<uint16_t> buf[2];
  std::vector<uint16_t>& b = buf[slot];
  if (b.size() < size_t(rows * C)) {
    b.clear();
    b.resize(size_t(rows * C));
  }
  round_to_bf16(a, C, rows, C, b.data());
  return b.data();
}
dt operand_type(const ConvShape& s) { return s.bf16 ? dt::bf16 : dt::f32; }

// w (ohwi) in the primitive's weights format: w itself, or its reorder in the thread's buffer.
const float* prim_weights(const Conv& c, const ConvKey& k, const float* w) {
  if (!c.reorder) return w;
  float* buf = thread_buffer(0, c.wei.get_size() / sizeof(float));
  onednn_execute(*c.reorder, {{DNNL_ARG_FROM, user(weights(k, tag::ohwi), w)}, {DNNL_ARG_TO, user(c.wei, buf)}});
  return buf;
}

// Runs run(c) on the cached primitive of k: false when oneDNN has none for the shape or fails.
template <typename Run>
bool with_conv(const ConvKey& k, Run run) {
  const Conv c = cached_conv(k);
  if (!c.prim) return false;
  try {
    run(c);
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

}  // namespace

bool conv2d_forward_onednn(float* out, const float* x, const float* w, const float* bias, const ConvShape& s) {
  const ConvKey k = key_of(s, Pass::Forward, bias != nullptr);
  return with_conv(k, [&](const Conv& c) {
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, user(activations(s.B, s.IC, s.H, s.W, operand_type(s)),
                            operand(x, s.B * s.H * s.W, s.IC, s.bf16, 0))},
        {DNNL_ARG_WEIGHTS, user(c.wei, prim_weights(c, k, w))},
        {DNNL_ARG_DST, user(activations(s.B, s.OC, s.Ho(), s.Wo()), out)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, user(dnnl::memory::desc({s.OC}, dt::f32, tag::x), bias));
    onednn_execute(*c.prim, args);
  });
}

bool conv2d_backward_data_onednn(float* dx, const float* dout, const float* w, const ConvShape& s) {
  const ConvKey k = key_of(s, Pass::BackwardData, false);
  return with_conv(k, [&](const Conv& c) {
    onednn_execute(*c.prim, {{DNNL_ARG_DIFF_DST, user(activations(s.B, s.OC, s.Ho(), s.Wo(), operand_type(s)),
                                                      operand(dout, s.B * s.Ho() * s.Wo(), s.OC, s.bf16, 0))},
                             {DNNL_ARG_WEIGHTS, user(c.wei, prim_weights(c, k, w))},
                             {DNNL_ARG_DIFF_SRC, user(activations(s.B, s.IC, s.H, s.W), dx)}});
  });
}

bool conv2d_backward_weights_onednn(float* dw, const float* dout, const float* x, const ConvShape& s) {
  const ConvKey k = key_of(s, Pass::BackwardWeights, false);
  const int64_t n = s.OC * s.filter();
  float* g = nullptr;  // diff weights in ohwi
  const bool ok = with_conv(k, [&](const Conv& c) {
    g = thread_buffer(1, size_t(n));
    float* gp = c.reorder ? thread_buffer(0, c.wei.get_size() / sizeof(float)) : g;
    onednn_execute(*c.prim, {{DNNL_ARG_SRC, user(activations(s.B, s.IC, s.H, s.W, operand_type(s)),
                                                 operand(x, s.B * s.H * s.W, s.IC, s.bf16, 0))},
                             {DNNL_ARG_DIFF_DST, user(activations(s.B, s.OC, s.Ho(), s.Wo(), operand_type(s)),
                                                      operand(dout, s.B * s.Ho() * s.Wo(), s.OC, s.bf16, 1))},
                             {DNNL_ARG_DIFF_WEIGHTS, user(c.wei, gp)}});
    if (c.reorder)
      onednn_execute(*c.reorder, {{DNNL_ARG_FROM, user(c.wei, gp)}, {DNNL_ARG_TO, user(weights(k, tag::ohwi), g)}});
  });
  if (!ok) return false;
#pragma omp parallel for num_threads(n >= (1 << 16) ? num_threads() : 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) dw[i] += g[i];
  return true;
}

}  // namespace genperf::cpu

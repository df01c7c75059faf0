// The SR UNet (genperf/unet.h). The network is written once, as a forward pass over small layer
// functions; each layer runs its op and, when training, records the closure that runs the op's
// backward (a tape, replayed in reverse). The same pass, run "dry" (shapes only, no arithmetic)
// at construction, declares the parameters, so that the architecture is stated in one place.
//
// Activations live in an arena of Acts reused from one forward to the next (the n-th Act of a
// pass has the same shape whenever B, H and W do). An Act's gradient is written by its first
// consumer's backward and added to by the others (ops' backwards overwrite activation
// gradients, so a second consumer writes to scratch and adds).
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

#include "genperf/error.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"
#include "genperf/rng.h"
#include "genperf/unet.h"

namespace genperf::sr {

size_t ParamSpec::size() const {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

namespace {
enum class Init { Weight, Bias, One, Zero, ZeroOut };

// Activations start on a cache line: the kernels' rows of 16 floats are then whole lines (a
// plain vector's large blocks start 16 bytes into a page, and each AVX-512 access of a row
// crosses two).
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const LineAligned<U>&) const {
    return true;
  }
};
}  // namespace

template <typename F>
struct UNet<F>::Impl {
  struct Act {
    int64_t B = 0, H = 0, W = 0, C = 0;
    std::vector<F, LineAligned<F>> v, g;  // value, gradient
    std::vector<F> stat1, stat2;          // saved statistics (norm, attention)
    bool has_grad = false, needs_grad = true;
    size_t n() const { return size_t(B * H * W * C); }
    int64_t rows() const { return B * H * W; }
  };
  struct Param {
    F* w;
    F* g;
  };

  UNetConfig c;
  std::vector<ParamSpec> specs;
  std::vector<Init> inits;
  std::vector<int64_t> fan_ins;
  // Weights and gradients: the network's own buffers, or buffers adopted from data-parallel
  // training (adopt_buffers); w and g point at the ones in use.
  std::vector<F> own_w, own_g, scratch;
  Tensor adopted_w, adopted_g;
  F* w = nullptr;
  F* g = nullptr;
  size_t count = 0;
  std::deque<Act> acts;
  size_t next_act = 0, next_param = 0;
  // The tape: each layer's backward, with the parameters declared when it was recorded and its
  // unit (for the hooks of data-parallel training).
  struct Entry {
    std::function<void()> fn;
    size_t params_declared;
    int64_t unit;
  };
  std::vector<Entry> tape;
  int64_t unit = -1;                                   // the unit the pass is in
  std::vector<std::pair<size_t, size_t>> unit_ranges;  // of weights(), from the dry pass
  std::function<void(size_t)> grads_hook;
  std::function<void(int64_t, bool, bool)> params_hook;
  Act* out = nullptr;
  bool dry = false, train = false, bf16 = false;
  double flops = 0;
  const Device dev = Device::CPU;

  // ---- bookkeeping -------------------------------------------------------------------------

  Act& act(int64_t B, int64_t H, int64_t W, int64_t C) {
    if (next_act == acts.size()) acts.emplace_back();
    Act& a = acts[next_act++];
    a.B = B, a.H = H, a.W = W, a.C = C;
    a.has_grad = false, a.needs_grad = true;
    if (!dry) a.v.resize(a.n());
    return a;
  }

  Param param(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in) {
    if (dry) {
      ParamSpec s{name, std::move(shape), 0};
      s.offset = specs.empty() ? 0 : specs.back().offset + specs.back().size();
      GP_CHECK(unit >= 0, "[unet] internal: parameter ", s.name, " declared outside a unit");
      if (size_t(unit) == unit_ranges.size()) unit_ranges.emplace_back(s.offset, s.offset);
      unit_ranges.back().second = s.offset + s.size();
      specs.push_back(std::move(s));
      inits.push_back(init);
      fan_ins.push_back(fan_in);
      return {nullptr, nullptr};
    }
    const ParamSpec& s = specs[next_param++];
    GP_CHECK(s.name == name, "[unet] internal: parameter ", name, " declared as ", s.name);
    return {w + s.offset, g + s.offset};
  }

  void record(std::function<void()> f) {
    if (train) tape.push_back({std::move(f), next_param, unit});
  }

  // The layers from here on read the next unit of parameters; the previous unit is done.
  void begin_unit() {
    ++unit;
    if (dry || !params_hook) return;
    if (unit > 0) params_hook(unit - 1, true, false);
    params_hook(unit, false, false);
  }
  size_t offset_of(size_t param) const { return param < specs.size() ? specs[param].offset : count; }

  // Runs fn(dx) for x's gradient: into x.g for its first consumer, else into scratch, added to
  // x.g; fn(nullptr) when x needs none (the network's inputs).
  template <typename Fn>
  void grad_into(Act& x, Fn fn) {
    if (!x.needs_grad) return fn(static_cast<F*>(nullptr));
    if (!x.has_grad) {
      x.g.resize(x.n());
      fn(x.g.data());
      x.has_grad = true;
      return;
    }
    scratch.resize(x.n());
    fn(scratch.data());
    ops::residual_backward(x.g.data(), scratch.data(), int64_t(x.n()), dev);
  }
  void give(Act& x, const F* d) {  // x's gradient += d
    grad_into(x, [&](F* dx) {
      if (dx) std::memcpy(dx, d, x.n() * sizeof(F));
    });
  }

  // ---- layers ------------------------------------------------------------------------------

  Act& conv(Act& x, const std::string& name, int64_t OC, int64_t K, int64_t stride, bool zero_out = false) {
    const ops::ConvShape s{x.B, x.H, x.W, x.C, OC, K, stride, K / 2, bf16};
    const Param wt = param(name + ".weight", {OC, K, K, x.C}, zero_out ? Init::ZeroOut : Init::Weight, s.filter());
    const Param b = param(name + ".bias", {OC}, zero_out ? Init::ZeroOut : Init::Bias, s.filter());
    Act& y = act(x.B, s.Ho(), s.Wo(), OC);
    if (dry) return y;
    ops::conv2d_forward(y.v.data(), x.v.data(), wt.w, b.w, s, dev);
    flops += 2.0 * double(y.rows()) * double(OC) * double(s.filter());
    record([this, &x, &y, wt, b, s] {
      grad_into(x, [&](F* dx) { ops::conv2d_backward(dx, wt.g, b.g, y.g.data(), x.v.data(), wt.w, s, dev); });
    });
    return y;
  }

  Act& linear(Act& x, const std::string& name, int64_t OC, bool zero_out = false) {
    const int64_t N = x.rows(), IC = x.C;
    const Param wt = param(name + ".weight", {OC, IC}, zero_out ? Init::ZeroOut : Init::Weight, IC);
    const Param b = param(name + ".bias", {OC}, zero_out ? Init::ZeroOut : Init::Bias, IC);
    Act& y = act(x.B, x.H, x.W, OC);
    if (dry) return y;
    ops::matmul_forward(y.v.data(), x.v.data(), wt.w, b.w, N, IC, OC, nullptr, dev);
    flops += 2.0 * double(N) * double(IC) * double(OC);
    record([this, &x, &y, wt, b, N, IC, OC] {
      grad_into(x, [&](F* dx) {
        ops::matmul_backward(dx, wt.g, b.g, y.g.data(), x.v.data(), wt.w, N, IC, OC, nullptr, dev);
      });
    });
    return y;
  }

  // Group norm, or with silu group norm then SiLU as one op (group_norm_silu_*, whose backward
  // recomputes the norm's output instead of keeping it).
  Act& norm(Act& x, const std::string& name, bool silu = false) {
    const int64_t G = c.groups, HW = x.H * x.W;
    const Param gamma = param(name + ".weight", {x.C}, Init::One, 1);
    const Param beta = param(name + ".bias", {x.C}, Init::Zero, 1);
    Act& y = act(x.B, x.H, x.W, x.C);
    if (dry) return y;
    y.stat1.resize(size_t(x.B * G));
    y.stat2.resize(size_t(x.B * G));
    (silu ? ops::group_norm_silu_forward<F> : ops::group_norm_forward<F>)(
        y.v.data(), y.stat1.data(), y.stat2.data(), x.v.data(), gamma.w, beta.w, x.B, HW, x.C, G, c.norm_eps, dev);
    record([this, &x, &y, gamma, beta, G, HW, silu] {
      grad_into(x, [&](F* dx) {
        if (silu)
          ops::group_norm_silu_backward(dx, gamma.g, beta.g, y.g.data(), x.v.data(), gamma.w, beta.w,
                                        y.stat1.data(), y.stat2.data(), x.B, HW, x.C, G, dev);
        else
          ops::group_norm_backward(dx, gamma.g, beta.g, y.g.data(), x.v.data(), gamma.w, y.stat1.data(),
                                   y.stat2.data(), x.B, HW, x.C, G, dev);
      });
    });
    return y;
  }

  Act& silu(Act& x) {
    Act& y = act(x.B, x.H, x.W, x.C);
    if (dry) return y;
    ops::silu_forward(y.v.data(), x.v.data(), int64_t(x.n()), dev);
    record([this, &x, &y] {
      grad_into(x, [&](F* dx) { ops::silu_backward(dx, y.g.data(), x.v.data(), int64_t(x.n()), dev); });
    });
    return y;
  }

  Act& add(Act& a, Act& b) {
    Act& y = act(a.B, a.H, a.W, a.C);
    if (dry) return y;
    ops::residual_forward(y.v.data(), a.v.data(), b.v.data(), int64_t(a.n()), dev);
    record([this, &a, &b, &y] {
      give(a, y.g.data());
      give(b, y.g.data());
    });
    return y;
  }

  Act& concat(Act& a, Act& b) {
    Act& y = act(a.B, a.H, a.W, a.C + b.C);
    if (dry) return y;
    ops::concat_channels_forward(y.v.data(), a.v.data(), b.v.data(), a.rows(), a.C, b.C, dev);
    record([this, &a, &b, &y] {
      // Each part's gradient is its column block of y's: written straight when it is the part's
      // first, through scratch otherwise (grad_into).
      grad_into(a, [&](F* da) {
        if (da) ops::concat_channels_backward<F>(da, nullptr, y.g.data(), a.rows(), a.C, b.C, dev);
      });
      grad_into(b, [&](F* db) {
        if (db) ops::concat_channels_backward<F>(nullptr, db, y.g.data(), a.rows(), a.C, b.C, dev);
      });
    });
    return y;
  }

  Act& upsample(Act& x) {
    Act& y = act(x.B, 2 * x.H, 2 * x.W, x.C);
    if (dry) return y;
    ops::upsample2x_forward(y.v.data(), x.v.data(), x.B, x.H, x.W, x.C, dev);
    record([this, &x, &y] {
      grad_into(x, [&](F* dx) { ops::upsample2x_backward(dx, y.g.data(), x.B, x.H, x.W, x.C, dev); });
    });
    return y;
  }

  // h += the per-image projection e [B, 1, 1, C] (in place: h's consumers so far saved their
  // inputs, not h).
  void add_image_bias(Act& h, Act& e) {
    if (dry) return;
    ops::add_image_bias_forward(h.v.data(), e.v.data(), h.B, h.H * h.W, h.C, dev);
    record([this, &h, &e] {
      grad_into(e, [&](F* de) { ops::add_image_bias_backward(de, h.g.data(), h.B, h.H * h.W, h.C, dev); });
    });
  }

  Act& attention(Act& x, const std::string& name) {
    begin_unit();
    const int64_t C = x.C, NH = C / c.head_channels, T = x.H * x.W;
    Act& qkv = linear(norm(x, name + ".norm"), name + ".qkv", 3 * C);
    Act& o = act(x.B, x.H, x.W, C);
    if (!dry) {
      ops::AttnShape s;
      s.B = x.B, s.T = T, s.NH = NH, s.NKV = NH, s.HS = c.head_channels, s.causal = false;
      o.stat1.resize(size_t(x.B * NH * T));
      ops::attention_forward_flash(o.v.data(), o.stat1.data(), qkv.v.data(), s, dev);
      flops += 4.0 * double(x.B * NH) * double(T) * double(T) * double(s.HS);
      record([this, &qkv, &o, s] {
        grad_into(qkv, [&](F* dqkv) {
          ops::attention_backward_flash(dqkv, o.g.data(), qkv.v.data(), o.v.data(), o.stat1.data(), s, dev);
        });
      });
    }
    return add(x, linear(o, name + ".proj", C, true));
  }

  Act& res_block(Act& x, const std::string& name, int64_t OC, Act& temb) {
    begin_unit();
    Act& h = conv(norm(x, name + ".norm1", true), name + ".conv1", OC, 3, 1);
    add_image_bias(h, linear(temb, name + ".temb", OC));
    Act& h2 = conv(norm(h, name + ".norm2", true), name + ".conv2", OC, 3, 1, true);
    Act& skip = x.C == OC ? x : conv(x, name + ".skip", OC, 1, 1);
    return add(skip, h2);
  }

  // ---- the network ---------------------------------------------------------------------------

  Act& network(const F* x, const F* t, int64_t B, int64_t H, int64_t W) {
    const int64_t L = c.levels();
    Act& in = act(B, H, W, 2 * c.channels);
    Act& steps = act(B, 1, 1, 1);
    in.needs_grad = steps.needs_grad = false;
    Act& te = act(B, 1, 1, c.base);
    te.needs_grad = false;
    if (!dry) {
      std::memcpy(in.v.data(), x, in.n() * sizeof(F));
      std::memcpy(steps.v.data(), t, size_t(B) * sizeof(F));
      ops::time_embedding(te.v.data(), steps.v.data(), B, c.base, dev);
    }
    begin_unit();
    Act& temb = silu(linear(silu(linear(te, "time.fc1", 4 * c.base)), "time.fc2", 4 * c.base));

    begin_unit();
    Act* h = &conv(in, "conv_in", c.base, 3, 1);
    std::vector<Act*> skips;
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "down." + std::to_string(l);
      for (int64_t r = 0; r < c.res_blocks; ++r) {
        h = &res_block(*h, p + ".res." + std::to_string(r), c.level_channels(l), temb);
        if (c.has_attention(l)) h = &attention(*h, p + ".attn." + std::to_string(r));
      }
      skips.push_back(h);
      if (l + 1 < L) {
        begin_unit();
        h = &conv(*h, p + ".down", h->C, 3, 2);
      }
    }
    h = &res_block(*h, "mid.res.0", h->C, temb);
    h = &attention(*h, "mid.attn");
    h = &res_block(*h, "mid.res.1", h->C, temb);
    for (int64_t l = L - 1; l >= 0; --l) {
      const std::string p = "up." + std::to_string(l);
      h = &concat(*h, *skips[size_t(l)]);
      for (int64_t r = 0; r < c.res_blocks; ++r) {
        h = &res_block(*h, p + ".res." + std::to_string(r), c.level_channels(l), temb);
        if (c.has_attention(l)) h = &attention(*h, p + ".attn." + std::to_string(r));
      }
      if (l > 0) {
        begin_unit();
        h = &conv(upsample(*h), p + ".up", h->C, 3, 1);
      }
    }
    begin_unit();
    Act& out = conv(norm(*h, "out.norm", true), "out.conv", c.channels, 3, 1, true);
    if (!dry && params_hook) params_hook(unit, true, false);
    return out;
  }

  void begin(bool dry_run, bool training) {
    dry = dry_run, train = training;
    next_act = next_param = 0;
    unit = -1;
    tape.clear();
    flops = 0;
  }
};

template <typename F>
UNet<F>::UNet(const UNetConfig& c) : impl_(std::make_unique<Impl>()) {
  c.validate("UNet");
  impl_->c = c;
  const int64_t m = c.multiple();
  impl_->begin(true, false);
  impl_->network(nullptr, nullptr, 1, m, m);
  impl_->acts.clear();
  const size_t n = impl_->specs.back().offset + impl_->specs.back().size();
  impl_->own_w.assign(n, F(0));
  impl_->own_g.assign(n, F(0));
  impl_->w = impl_->own_w.data(), impl_->g = impl_->own_g.data(), impl_->count = n;
}

template <typename F>
UNet<F>::~UNet() = default;
template <typename F>
UNet<F>::UNet(UNet&&) noexcept = default;
template <typename F>
UNet<F>& UNet<F>::operator=(UNet&&) noexcept = default;

template <typename F>
const UNetConfig& UNet<F>::config() const {
  return impl_->c;
}
template <typename F>
const std::vector<ParamSpec>& UNet<F>::params() const {
  return impl_->specs;
}
template <typename F>
const ParamSpec& UNet<F>::param(const std::string& name) const {
  for (const ParamSpec& s : impl_->specs)
    if (s.name == name) return s;
  fail("[unet] no parameter named ", name);
}
template <typename F>
std::span<F> UNet<F>::weights() {
  return {impl_->w, impl_->count};
}
template <typename F>
std::span<const F> UNet<F>::weights() const {
  return {impl_->w, impl_->count};
}
template <typename F>
std::span<F> UNet<F>::grads() {
  return {impl_->g, impl_->count};
}
template <typename F>
void UNet<F>::zero_grad() {
  std::fill_n(impl_->g, impl_->count, F(0));
}

template <typename F>
void UNet<F>::init(uint64_t seed, bool zero_out) {
  Rng rng(seed);
  Impl& m = *impl_;
  for (size_t i = 0; i < m.specs.size(); ++i) {
    F* p = m.w + m.specs[i].offset;
    const size_t n = m.specs[i].size();
    const double bound = 1.0 / std::sqrt(double(m.fan_ins[i]));
    for (size_t j = 0; j < n; ++j) {
      switch (m.inits[i]) {
        case Init::One: p[j] = F(1); break;
        case Init::Zero: p[j] = F(0); break;
        case Init::ZeroOut:
          if (zero_out) {
            p[j] = F(0);
            break;
          }
          [[fallthrough]];
        case Init::Weight:
        case Init::Bias: p[j] = F(bound * (2 * rng.uniform() - 1)); break;
      }
    }
  }
}

template <typename F>
const F* UNet<F>::forward(const F* x, const F* t, int64_t B, int64_t H, int64_t W, bool train) {
  const int64_t m = impl_->c.multiple();
  GP_CHECK(B > 0 && H > 0 && W > 0 && H % m == 0 && W % m == 0, "[unet] a ", B, " x ", H, " x ", W,
           " batch: sides must be positive multiples of ", m, " (", impl_->c.levels(), " levels)");
  impl_->begin(false, train);
  impl_->out = &impl_->network(x, t, B, H, W);
  return impl_->out->v.data();
}

template <typename F>
void UNet<F>::backward(const F* dout) {
  Impl& m = *impl_;
  GP_CHECK(m.train && m.out, "[unet] backward needs a forward with train = true before it");
  m.out->g.assign(dout, dout + m.out->n());
  m.out->has_grad = true;
  // In reverse: each unit's layers between the hook's calls for it; after entry k, the gradients
  // of every parameter declared at or after entry k's layer are final.
  int64_t unit = -1;
  size_t reported = m.count;
  for (size_t k = m.tape.size(); k-- > 0;) {
    const typename Impl::Entry& e = m.tape[k];
    if (m.params_hook && e.unit != unit) {
      if (unit >= 0) m.params_hook(unit, true, true);
      unit = e.unit;
      if (unit >= 0) m.params_hook(unit, false, true);
    }
    e.fn();
    const size_t ready = k > 0 ? m.offset_of(m.tape[k - 1].params_declared) : 0;
    if (m.grads_hook && ready < reported) m.grads_hook(reported = ready);
  }
  if (m.params_hook && unit >= 0) m.params_hook(unit, true, true);
  m.tape.clear();
  m.train = false;
}

template <typename F>
void UNet<F>::set_bf16(bool on) {
  impl_->bf16 = on;
}
template <typename F>
bool UNet<F>::bf16() const {
  return impl_->bf16;
}

template <typename F>
void UNet<F>::set_grads_ready_hook(std::function<void(size_t)> hook) {
  impl_->grads_hook = std::move(hook);
}

template <typename F>
std::vector<std::pair<size_t, size_t>> UNet<F>::param_units() const {
  return impl_->unit_ranges;
}

template <typename F>
void UNet<F>::set_params_hook(std::function<void(int64_t, bool, bool)> hook) {
  impl_->params_hook = std::move(hook);
}

template <typename F>
void UNet<F>::adopt_buffers(Tensor weights, Tensor grads) {
  Impl& m = *impl_;
  GP_CHECK((std::is_same_v<F, float>), "[unet] adopt_buffers: float networks only");
  for (const Tensor* t : {&weights, &grads})
    GP_CHECK(!t->defined() || (t->dtype() == DType::F32 && t->numel() == int64_t(m.count)), "[unet] adopt_buffers: ",
             t->describe(), " for ", m.count, " parameters");
  if (weights.defined()) {
    m.adopted_w = std::move(weights);
    m.w = static_cast<F*>(m.adopted_w.raw());
    std::vector<F>().swap(m.own_w);
  }
  if (grads.defined()) {
    m.adopted_g = std::move(grads);
    m.g = static_cast<F*>(m.adopted_g.raw());
    std::vector<F>().swap(m.own_g);
  }
}

template <typename F>
double UNet<F>::last_forward_flops() const {
  return impl_->flops;
}

template <typename F>
size_t UNet<F>::activation_bytes() const {
  size_t n = impl_->scratch.capacity();
  for (const auto& a : impl_->acts)
    n += a.v.capacity() + a.g.capacity() + a.stat1.capacity() + a.stat2.capacity();
  return n * sizeof(F);
}

template class UNet<float>;
template class UNet<double>;

}  // namespace genperf::sr

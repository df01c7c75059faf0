// Conditional diffusion (genperf/diffusion.h): schedules, the training loss, the samplers and the
// SR model's files. The network's work is ops; what is here is per-step arithmetic on B tiles.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/ops_image.h"
#include "io/safetensors.h"

namespace genperf::sr {
namespace {

// buf's data, grown to at least n values and never shrunk. The loss and the sampler keep their
// buffers per thread from call to call (fresh ones at every training step are zeroed and faulted
// in) and write all they read.
template <typename F>
F* grown(std::vector<F>& buf, size_t n) {
  if (buf.size() < n) {
    buf.clear();  // no copy of the old contents on growth
    buf.resize(n);
  }
  return buf.data();
}

}  // namespace

Schedule Schedule::make(const std::string& kind, int64_t T) {
  GP_CHECK(T >= 1, "[diffusion] ", T, " timesteps: expected at least 1");
  Schedule s;
  s.abar.resize(size_t(T));
  std::vector<double> beta(static_cast<size_t>(T));
  if (kind == "cosine") {
    const double off = 0.008;
    auto f = [&](double t) {
      const double c = std::cos((t / double(T) + off) / (1 + off) * M_PI / 2);
      return c * c;
    };
    for (int64_t t = 0; t < T; ++t) beta[size_t(t)] = std::min(1 - f(double(t + 1)) / f(double(t)), 0.999);
  } else if (kind == "linear") {
    const double k = 1000.0 / double(T), lo = 1e-4 * k, hi = 0.02 * k;
    for (int64_t t = 0; t < T; ++t) beta[size_t(t)] = T == 1 ? lo : lo + (hi - lo) * double(t) / double(T - 1);
  } else {
    fail("[diffusion] noise schedule '", kind, "' (expected cosine or linear)");
  }
  double a = 1;
  for (int64_t t = 0; t < T; ++t) s.abar[size_t(t)] = a *= 1 - beta[size_t(t)];
  return s;
}

template <typename F>
double diffusion_loss(UNet<F>& net, const Schedule& s, const F* cond, const F* x0, int64_t B, int64_t H,
                      int64_t W, Rng& rng, bool backward, double loss_scale) {
  const int64_t C = net.config().channels, per = H * W * C, n = B * per, T = int64_t(s.abar.size());
  GP_CHECK(T == net.config().timesteps, "[diffusion] a schedule of ", T, " steps for a model of ",
           net.config().timesteps);
  const bool v_pred = net.config().prediction == "v";
  thread_local std::vector<F> xt_buf, target_buf, input_buf, t_buf, dpred_buf;  // see grown()
  F* const xt = grown(xt_buf, size_t(n));
  F* const target = grown(target_buf, size_t(n));
  F* const input = grown(input_buf, size_t(2 * n));
  F* const t = grown(t_buf, size_t(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t step = std::min<int64_t>(int64_t(rng.uniform() * double(T)), T - 1);
    t[b] = F(step);
    const double a = s.abar[size_t(step)], sa = std::sqrt(a), sn = std::sqrt(1 - a);
    for (int64_t i = b * per; i < (b + 1) * per; ++i) {
      const double eps = rng.normal(), x = double(x0[i]);
      xt[i] = F(sa * x + sn * eps);
      target[i] = F(v_pred ? sa * eps - sn * x : eps);
    }
  }
  ops::concat_channels_forward(input, xt, cond, B * H * W, C, C);
  const F* pred = net.forward(input, t, B, H, W, backward);
  const double loss = ops::mse_forward(pred, target, n);
  if (backward) {
    F* const dpred = grown(dpred_buf, size_t(n));
    ops::mse_backward(dpred, pred, target, n, loss_scale);
    net.backward(dpred);
  }
  return loss;
}

namespace {
void check_spacing(const std::string& spacing, const char* who) {
  GP_CHECK(spacing == "trailing" || spacing == "linspace", who, " spacing '", spacing,
           "' (expected trailing or linspace)");
}
}  // namespace

void SamplerOptions::validate(int64_t timesteps) const {
  GP_CHECK(sampler == "ddim" || sampler == "ddpm" || sampler == "dpm++2m" || sampler == "dpm++2m-sde",
           "[sample] sampler '", sampler, "' (expected ddim, ddpm, dpm++2m or dpm++2m-sde)");
  GP_CHECK(steps >= 1 && steps <= timesteps, "[sample] ", steps, " steps: expected 1 .. ", timesteps,
           " (the model's timesteps)");
  GP_CHECK(eta >= 0 && eta <= 1, "[sample] eta ", eta, ": expected 0 .. 1");
  check_spacing(spacing, "[sample]");
}

std::vector<int64_t> sampler_steps(int64_t T, int64_t S, const std::string& spacing) {
  GP_CHECK(S >= 1 && S <= T, "[sampler_steps] ", S, " steps of ", T);
  check_spacing(spacing, "[sampler_steps]");
  std::vector<int64_t> steps;
  for (int64_t k = S - 1; k >= 0; --k)
    steps.push_back(spacing == "trailing" ? std::llround(double(k + 1) * double(T) / double(S)) - 1
                    : S == 1              ? T - 1
                                          : std::llround(double(k) * double(T - 1) / double(S - 1)));
  return steps;
}

template <typename F>
void ddim_update(F* x, const F* pred, const F* z, int64_t n, double a, double a_prev, double eta, bool v_pred) {
  const double sa = std::sqrt(a), sn = std::sqrt(1 - a);
  const double sigma = a_prev >= 1 ? 0 : eta * std::sqrt((1 - a_prev) / (1 - a)) * std::sqrt(1 - a / a_prev);
  const double keep = std::sqrt(a_prev), dir = std::sqrt(std::max(0.0, 1 - a_prev - sigma * sigma));
  GP_CHECK(sigma == 0 || z, "[ddim_update] eta ", eta, " needs noise");
  for (int64_t i = 0; i < n; ++i) {
    const double xi = double(x[i]), p = double(pred[i]);
    const double x0h = x0_estimate(xi, p, sa, sn, v_pred);
    const double eh = v_pred ? sn * xi + sa * p : p;
    x[i] = F(keep * x0h + dir * eh + (sigma > 0 ? sigma * double(z[i]) : 0.0));
  }
}

template <typename F>
double dpm2m_update(F* x, const F* pred, F* x0_last, int64_t n, double a, double a_prev, double h_last, bool v_pred,
                    double eta, const F* z) {
  const double sa = std::sqrt(a), sn = std::sqrt(1 - a);
  const bool last = a_prev >= 1;
  const double sa_p = std::sqrt(a_prev), sn_p = std::sqrt(std::max(0.0, 1 - a_prev));
  const double h = last ? HUGE_VAL : std::log(sa_p / sn_p) - std::log(sa / sn);
  const double keep = last ? 0.0 : sn_p / sn * std::exp(-eta * h);
  const double pull = last ? 1.0 : -sa_p * std::expm1(-(1 + eta) * h);
  const double spread = last || eta == 0 ? 0.0 : sn_p * std::sqrt(-std::expm1(-2 * eta * h));
  GP_CHECK(spread == 0 || z, "[dpm2m_update] eta ", eta, " needs noise");
  const double w = h_last > 0 && !last ? 0.5 * h / h_last : 0.0;  // 1 / (2r)
  for (int64_t i = 0; i < n; ++i) {
    const double xi = double(x[i]), p = double(pred[i]);
    const double x0h = x0_estimate(xi, p, sa, sn, v_pred);
    const double d = (1 + w) * x0h - w * double(x0_last[i]);
    x[i] = F(keep * xi + pull * d + (spread > 0 ? spread * double(z[i]) : 0.0));
    x0_last[i] = F(x0h);
  }
  return h;
}

template <typename F>
void sample(UNet<F>& net, const Schedule& s, const F* cond, F* x0, int64_t B, int64_t H, int64_t W,
            const SamplerOptions& o, std::span<const uint64_t> seeds, const std::function<void(int64_t)>& on_step) {
  const UNetConfig& c = net.config();
  o.validate(c.timesteps);
  GP_CHECK(int64_t(seeds.size()) == B, "[sample] ", seeds.size(), " seeds for ", B, " tiles");
  const int64_t per = H * W * c.channels, n = B * per;
  const double eta = o.effective_eta();
  // The calling thread's buffers (see grown()): on_step must not sample on this thread.
  thread_local std::vector<Rng> rng;
  thread_local std::vector<F> input_buf, t_buf, z_buf;
  rng.clear();
  for (uint64_t seed : seeds) rng.emplace_back(seed);
  auto noise = [&](F* z) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = b * per; i < (b + 1) * per; ++i) z[i] = F(rng[size_t(b)].normal());
  };
  noise(x0);
  F* const input = grown(input_buf, size_t(2 * n));
  F* const t = grown(t_buf, size_t(B));
  F* const z = eta > 0 ? grown(z_buf, size_t(n)) : nullptr;
  const bool dpm = o.multistep();
  thread_local std::vector<F> x0_last_buf;
  F* const x0_last = dpm ? grown(x0_last_buf, size_t(n)) : nullptr;
  double h_last = 0;
  const std::vector<int64_t> steps = sampler_steps(c.timesteps, o.steps, o.spacing);
  for (size_t k = 0; k < steps.size(); ++k) {
    std::fill_n(t, B, F(steps[k]));
    ops::concat_channels_forward(input, x0, cond, B * H * W, c.channels, c.channels);
    const F* pred = net.forward(input, t, B, H, W, false);
    const double a = s.abar[size_t(steps[k])], a_prev = k + 1 < steps.size() ? s.abar[size_t(steps[k + 1])] : 1.0;
    if (eta > 0 && a_prev < 1) noise(z);
    if (dpm)
      h_last = dpm2m_update(x0, pred, x0_last, n, a, a_prev, h_last, c.prediction == "v", eta, z);
    else
      ddim_update(x0, pred, z, n, a, a_prev, eta, c.prediction == "v");
    if (on_step) on_step(int64_t(k));
  }
}

void save_sr_model(const std::string& dir, const UNet<float>& net) {
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::span<const float> w = net.weights();
  for (const ParamSpec& p : net.params()) {
    Tensor t = Tensor::zeros(p.shape, DType::F32);
    std::copy_n(w.data() + p.offset, p.size(), t.data<float>());
    tensors.emplace_back(p.name, std::move(t));
  }
  write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  write_file_atomic(dir + "/config.json", unet_config_json(net.config()).dump(2) + "\n");
}

#define GENPERF_DIFFUSION(F)                                                                          \
  template double diffusion_loss<F>(UNet<F>&, const Schedule&, const F*, const F*, int64_t, int64_t, \
                                    int64_t, Rng&, bool, double);                                     \
  template void ddim_update<F>(F*, const F*, const F*, int64_t, double, double, double, bool);        \
  template double dpm2m_update<F>(F*, const F*, F*, int64_t, double, double, double, bool, double,  \
                                  const F*);                                                        \
  template void sample<F>(UNet<F>&, const Schedule&, const F*, F*, int64_t, int64_t, int64_t,         \
                          const SamplerOptions&, std::span<const uint64_t>,                           \
                          const std::function<void(int64_t)>&);
GENPERF_DIFFUSION(float)
GENPERF_DIFFUSION(double)
#undef GENPERF_DIFFUSION

}  // namespace genperf::sr

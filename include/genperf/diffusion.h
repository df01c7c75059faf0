// Conditional diffusion for super-resolution (SR3; Saharia et al. 2021): the noise schedule, the
// training loss, the DDPM and DDIM samplers, and the SR model's files.
//
// Notation: x0 is the network's target (the high-resolution map less the bicubic up-sampled input,
// in units of residual_std), abar[t] the schedule's cumulative signal fraction at step t
// (t = 0 .. timesteps - 1, abar decreasing), x_t = sqrt(abar) x0 + sqrt(1 - abar) eps. The
// network sees concat(x_t, cond) and t and predicts v = sqrt(abar) eps - sqrt(1 - abar) x0
// (Salimans & Ho 2022), or eps.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "genperf/rng.h"
#include "genperf/unet.h"

namespace genperf::sr {

struct Schedule {
  std::vector<double> abar;  // [timesteps]
  // "cosine" (Nichol & Dhariwal 2021, s = 0.008, betas clipped at 0.999) or "linear" (DDPM's
  // betas 1e-4 .. 0.02, scaled by 1000 / timesteps).
  static Schedule make(const std::string& kind, int64_t timesteps);
  static Schedule of(const UNetConfig& c) { return make(c.schedule, c.timesteps); }
};

// One training step's loss on a batch (cond, x0: [B, H, W, channels]): draws each image's step t
// uniformly and its noise from rng (in image order), forms x_t, runs the network and returns the
// mean squared error against the prediction target; backward: also d (loss_scale loss) / d
// weights into net.grads() (+=).
template <typename F>
double diffusion_loss(UNet<F>& net, const Schedule& s, const F* cond, const F* x0, int64_t B, int64_t H,
                      int64_t W, Rng& rng, bool backward = true, double loss_scale = 1);

// "ddim": deterministic for eta = 0 (Song et al. 2021); "ddpm": ancestral sampling, DDIM's
// update with eta = 1 (DDPM's posterior variance when steps = timesteps); "dpm++2m": the
// second-order multistep solver of the same ODE as DDIM with eta 0 (Lu et al. 2022), deterministic;
// "dpm++2m-sde": the same solver of the reverse SDE (eta 1: fresh noise at every step but the last).
struct SamplerOptions {
  std::string sampler = "ddim";
  int64_t steps = 25;
  std::string spacing = "linspace";  // see sampler_steps
  double eta = 0;  // ddim only
  double effective_eta() const {
    return sampler == "ddpm" || sampler == "dpm++2m-sde" ? 1.0 : sampler == "ddim" ? eta : 0.0;
  }
  bool multistep() const { return sampler.rfind("dpm++2m", 0) == 0; }  // dpm2m_update's samplers
  // Throws for an unknown sampler or spacing, or steps outside 1 .. timesteps.
  void validate(int64_t timesteps) const;
};
// The S steps a sampler visits among the schedule's T, from the noisiest (T - 1), each followed
// by an update to the next and the last by one to the estimate of x0:
//   "linspace" (the default): round(k (T - 1) / (S - 1)) for k = S - 1 .. 0: even in t, the
//     last is 0;
//   "trailing": round((k + 1) T / S) - 1 for k = S - 1 .. 0 (Lin et al. 2024); the last is
//     T / S - 1 (39 of 1000 at 25 steps), so the sampler never sees less noise than there and
//     ends on the network's estimate of x0 from that noise level, which lacks the small scales
//     that noise hid (docs/SR.md, "Samplers").
std::vector<int64_t> sampler_steps(int64_t timesteps, int64_t steps, const std::string& spacing);

// The estimate of x0 that the network's prediction p (v or eps) gives at x_t = x, sa = sqrt(abar),
// sn = sqrt(1 - abar); and the prediction that gives the estimate x0 there (its inverse).
inline double x0_estimate(double x, double p, double sa, double sn, bool v_pred) {
  return v_pred ? sa * x - sn * p : (x - sn * p) / sa;
}
inline double prediction_for(double x, double x0, double sa, double sn, bool v_pred) {
  return v_pred ? (sa * x - x0) / sn : (x - sa * x0) / sn;
}

// One update from step a (abar) to the next a_prev (1 after the last): with the prediction pred
// of the network (v or eps), x0h and epsh its estimates,
//   x <- sqrt(a_prev) x0h + sqrt(1 - a_prev - sigma^2) epsh + sigma z,
//   sigma = eta sqrt((1 - a_prev) / (1 - a)) sqrt(1 - a / a_prev).
// z (n values) may be null when sigma is 0.
template <typename F>
void ddim_update(F* x, const F* pred, const F* z, int64_t n, double a, double a_prev, double eta, bool v_pred);

// One update of DPM-Solver++(2M) (Lu et al. 2022, data prediction, multistep) from step a to
// a_prev, with alpha = sqrt(abar), sigma = sqrt(1 - abar), lambda = ln(alpha / sigma) and
// h = lambda_prev - lambda; eta 0 solves the probability-flow ODE, eta 1 the reverse SDE (the
// "2M SDE" solver of k-diffusion and diffusers, its second-order term the midpoint one):
//   x <- (sigma_prev / sigma) e^(-eta h) x + alpha_prev (1 - e^(-(1 + eta) h)) D
//        + sigma_prev sqrt(1 - e^(-2 eta h)) z,
//   D = x0h on the first step (h_last = 0; DDIM's update then, for eta 0) and the last
//   (a_prev = 1: x <- x0h), else D = x0h + (x0h - x0_last) / (2r), r = h_last / h.
// x0_last (n values) holds the previous step's x0h and is overwritten with this one's; z (n
// values of unit normal noise) may be null when eta is 0 or a_prev is 1. Returns h (the next
// call's h_last).
template <typename F>
double dpm2m_update(F* x, const F* pred, F* x0_last, int64_t n, double a, double a_prev, double h_last, bool v_pred,
                    double eta = 0, const F* z = nullptr);

// Samples x0 [B, H, W, channels] given cond: x starts as noise and runs the sampler's steps. Tile b's
// noise comes from Rng(seeds[b]) alone, so its sample does not depend on the rest of the batch
// or on the thread count. on_step(k) after each of the steps; it must not call sample (whose
// buffers are kept per thread).
template <typename F>
void sample(UNet<F>& net, const Schedule& s, const F* cond, F* x0, int64_t B, int64_t H, int64_t W,
            const SamplerOptions& o, std::span<const uint64_t> seeds,
            const std::function<void(int64_t)>& on_step = {});

// An SR model directory: config.json (UNetConfig) and model.safetensors (F32, the UNet's
// parameter names). Written under temporary names and renamed.
void save_sr_model(const std::string& dir, const UNet<float>& net);

}  // namespace genperf::sr

namespace genperf {
struct Checkpoint;
namespace sr {
// Reads one through load_checkpoint (the SR family's side of genperf/model_family.h), so that
// a quantized model (genperf quantize) loads too: unet_from_checkpoint. files, when not null,
// receives the checkpoint read: its tensors as the files hold them (a quantized model's types and
// bytes at rest; genperf/checkpoint.h's weight_types, weight_bytes).
UNet<float> load_sr_model(const std::string& dir, Checkpoint* files = nullptr);

// The UNet of a checkpoint of the SR family with its weights in f32: quantized matrices are
// decoded (the network computes in f32; the saving of a quantized UNet is its file and its
// weights' bytes at rest, not its activations, which dominate the memory of sampling).
UNet<float> unet_from_checkpoint(const Checkpoint& ck);
}  // namespace sr
}  // namespace genperf

// `genperf bench sr` (genperf/bench_sr.h).
#include <algorithm>

#include "genperf/bench_sr.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/sr_model.h"
#include "genperf/train.h"

namespace genperf::sr {

Json SRBenchResult::to_json() const {
  return Json::Object{{"batch", batch},
                      {"size", size},
                      {"parameters", int64_t(parameters)},
                      {"train_step_seconds", train_step.to_json()},
                      {"sample_step_seconds", sample_step.to_json()},
                      {"forward_flops", forward_flops},
                      {"train_images_per_s", train_images_per_s},
                      {"sample_images_per_s_per_step", sample_images_per_s},
                      {"train_gflops", train_gflops},
                      {"sample_gflops", sample_gflops},
                      {"memory", Json::Object{{"weights", int64_t(weights_bytes)},
                                              {"optimizer", int64_t(optimizer_bytes)},
                                              {"activations", int64_t(activation_bytes)},
                                              {"peak_rss", int64_t(peak_rss)}}}};
}

SRBenchResult bench_sr(const UNetConfig& c, const SRBenchOptions& o) {
  GP_CHECK(o.batch > 0 && o.size > 0 && o.reps > 0, "[bench sr] batch, size and reps must be positive");
  // Synthetic dust crops in the network's units, as training sees them.
  DustFieldSpec spec;
  spec.size = 1;
  while (spec.size < std::max<int64_t>(o.size, 64)) spec.size *= 2;
  spec.seed = o.seed;
  Degradation d;
  d.scale = c.scale;
  const TrainingPair p = training_pair(dust_field(spec), c, d, "synthetic field");
  const int64_t n = o.batch * o.size * o.size;
  std::vector<float> cond(static_cast<size_t>(n)), x0(static_cast<size_t>(n));
  for (int64_t b = 0; b < o.batch; ++b)
    for (int64_t y = 0; y < o.size; ++y)
      for (int64_t x = 0; x < o.size; ++x) {
        const size_t i = size_t((b * o.size + y) * o.size + x);
        cond[i] = float(p.cond.at(y, x)), x0[i] = float(p.x0.at(y, x));
      }

  UNet<float> net(c), ema(c);
  net.init(o.seed, false);  // every layer live, as after some training
  std::copy(net.weights().begin(), net.weights().end(), ema.weights().begin());
  const size_t np = net.weights().size();
  AdamW opt(np, AdamWOptions{0.9f, 0.999f, 1e-8f, 0.0f});
  const std::vector<ParamSegment> seg = {ParamSegment{0, np, false}};
  const Schedule s = Schedule::of(c);
  Rng rng(o.seed);
  SRBenchResult r;
  r.batch = o.batch, r.size = o.size, r.parameters = np;
  r.train_step = measure(
      [&] {
        net.zero_grad();
        diffusion_loss(net, s, cond.data(), x0.data(), o.batch, o.size, o.size, rng);
        clip_grad_norm(net.grads(), 1.0);
        opt.step(net.weights(), net.grads(), seg, 1e-5f);
        std::span<float> w = net.weights(), e = ema.weights();
        for (size_t i = 0; i < np; ++i) e[i] = 0.999f * e[i] + 0.001f * w[i];
      },
      o.warmup, o.reps);
  r.forward_flops = net.last_forward_flops();
  r.activation_bytes = net.activation_bytes();
  std::vector<float> input(static_cast<size_t>(2 * n)), t(static_cast<size_t>(o.batch), 500.f);
  std::copy(x0.begin(), x0.end(), input.begin());
  r.sample_step = measure([&] { ema.forward(input.data(), t.data(), o.batch, o.size, o.size, false); }, o.warmup, o.reps);
  r.train_images_per_s = double(o.batch) / r.train_step.median;
  r.sample_images_per_s = double(o.batch) / r.sample_step.median;
  r.train_gflops = 3 * r.forward_flops / r.train_step.median / 1e9;
  r.sample_gflops = r.forward_flops / r.sample_step.median / 1e9;
  r.weights_bytes = 2 * np * sizeof(float);  // weights and their EMA
  r.optimizer_bytes = opt.state_bytes() + np * sizeof(float);  // moments and gradients
  r.peak_rss = peak_rss_bytes();
  return r;
}

}  // namespace genperf::sr

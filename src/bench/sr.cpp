// `genperf bench sr` (genperf/bench_sr.h).
#include <algorithm>

#include "genperf/bench_sr.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/sr_model.h"
#include "genperf/sr_train.h"
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
                      {"ranks", ranks},
                      {"precision", bf16 ? "bf16" : "f32"},
                      {"shard", shard},
                      {"comm_bytes_per_step", comm_bytes_per_step},
                      {"comm_wait_seconds", comm_wait_s},
                      {"model_state_bytes", state.to_json()},
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

  // The trainer's own step (genperf/sr_train.h): data parallel and sharded under mpirun.
  SRTrainOptions to;
  to.batch = o.batch, to.crop = o.size, to.clip = 1.0, to.ema = 0.999;
  to.dist = o.dist;
  to.bf16 = o.bf16;
  Communicator& comm = o.dist.comm ? *o.dist.comm : world();
  to.dist.comm = &comm;
  to.grad_accum = o.grad_accum > 0 ? o.grad_accum : comm.size();
  SRTraining t(c, o.seed, false, to);  // every layer live, as after some training
  DataParallel& dp = t.dp();
  SRBenchResult r;
  r.batch = o.batch, r.size = o.size, r.parameters = t.net().weights().size();
  r.ranks = comm.size(), r.shard = shard_mode_name(o.dist.shard), r.bf16 = o.bf16;
  int64_t k = 0;
  r.train_step = measure(
      [&] {
        t.step(cond.data(), x0.data(), o.size, [&](int64_t m) { return o.seed + uint64_t(1000 * k + m); }, 1e-5f);
        ++k;
      },
      o.warmup, o.reps);
  r.forward_flops = t.last_flops() / 3 * double(comm.size());
  r.activation_bytes = t.net().activation_bytes();
  r.state = dp.model_state(t.optimizer());
  r.comm_bytes_per_step = dp.step_comm_bytes();
  r.comm_wait_s = dp.step_comm_wait_s();
  // The sampler's step: a forward of the EMA weights on the whole batch (on every rank).
  UNet<float> ema(c);
  ema.set_bf16(o.bf16);
  const std::vector<float> w = t.ema();
  std::copy(w.begin(), w.end(), ema.weights().begin());
  std::vector<float> input(static_cast<size_t>(2 * n)), ts(static_cast<size_t>(o.batch), 500.f);
  std::copy(x0.begin(), x0.end(), input.begin());
  r.sample_step = measure([&] { ema.forward(input.data(), ts.data(), o.batch, o.size, o.size, false); }, o.warmup, o.reps);
  const double sample_flops = ema.last_forward_flops();
  r.train_images_per_s = double(o.batch) / r.train_step.median;
  r.sample_images_per_s = double(o.batch) / r.sample_step.median;
  r.train_gflops = t.last_flops() / r.train_step.median / 1e9;
  r.sample_gflops = sample_flops / r.sample_step.median / 1e9;
  r.weights_bytes = r.state.params + t.ema_shard().size() * sizeof(float);
  r.optimizer_bytes = r.state.optimizer + r.state.grads;
  r.peak_rss = peak_rss_bytes();
  return r;
}

}  // namespace genperf::sr

// bench_train_step: full optimizer steps of a random model on random tokens, timed with the
// measurement harness (warm-up, repetitions, median/min/max), with the memory accounting.
#include "genperf/error.h"
#include "genperf/rng.h"
#include "genperf/bench_train.h"

namespace genperf {

Json TrainBenchResult::to_json() const {
  return Json::Object{
      {"batch", batch},
      {"seq", seq},
      {"attention", attention_mode_name(train.attention)},
      {"checkpoint_layers", train.checkpoint_layers},
      {"precision", precision_name(train.precision)},
      {"lora", lora ? Json(Json::Object{{"rank", int64_t(lora->rank)},
                                        {"alpha", double(lora->alpha)},
                                        {"dropout", double(lora->dropout)},
                                        {"targets", Json::Array(lora->targets.begin(), lora->targets.end())}})
                    : Json()},
      {"trainable_params", int64_t(trainable_params)},
      {"step_seconds", step_seconds.to_json()},
      {"tokens_per_s", tokens_per_s},
      {"flops_per_step", flops_per_step},
      {"gflops", gflops},
      {"memory", Json::Object{{"weights", int64_t(memory.weights)},
                              {"grads", int64_t(memory.grads)},
                              {"optimizer", int64_t(memory.optimizer)},
                              {"activations", memory.activations.to_json()},
                              {"total", int64_t(memory.total())}}},
      {"peak_rss", int64_t(peak_rss)},
      {"ranks", int64_t(ranks)},
      {"shard", shard_mode_name(shard)},
      {"overlap", overlap},
      {"comm_bytes_per_step", comm_bytes_per_step},
      {"comm_wait_seconds", comm_wait_seconds.to_json()},
      {"model_state_bytes", model_state.to_json()}};
}

TrainBenchResult bench_train_step(const LlamaConfig& c, const TrainBenchOptions& o) {
  GP_CHECK(o.batch > 0 && o.seq > 0, "[bench train] batch and sequence length must be positive, got ",
           o.batch, " x ", o.seq);
  TrainModel m(c, o.seed, o.train, RopeStyle::Neox, InitMode::Deferred);  // sharded init when fully sharded
  if (o.lora) m.enable_lora(*o.lora);
  DataParallel dp(m, o.dist, o.dist.comm ? o.dist.comm->size() : 1);
  AdamW opt(dp.shard_size());
  Rng rng(o.seed + 1 + uint64_t(dp.rank()) * 7919);  // each rank its own tokens
  const int64_t n = o.batch * o.seq;
  std::vector<int32_t> tokens(size_t(n + 1));
  for (auto& t : tokens) t = int32_t(rng.next() % uint64_t(c.vocab_size));
  const MicroBatch mb{std::span(tokens).first(size_t(n)), std::span(tokens).subspan(1), o.batch, o.seq};
  const float lr = 1e-4f;
  TrainBenchResult r;
  r.batch = o.batch;
  r.seq = o.seq;
  r.train = o.train;
  r.train.precision = effective_precision(o.train.precision);
  r.lora = o.lora;
  r.trainable_params = m.trainable_params().size();
  r.ranks = dp.ranks();
  r.shard = o.dist.shard;
  r.overlap = o.dist.overlap;
  std::vector<double> waits;
  r.step_seconds = measure(
      [&] {
        dp.step(opt, {&mb, 1}, lr, 1.0);
        waits.push_back(dp.step_comm_wait_s());
      },
      o.warmup, o.reps);
  waits.erase(waits.begin(), waits.begin() + std::min<ptrdiff_t>(o.warmup, ptrdiff_t(waits.size())));
  r.comm_wait_seconds = Stats::of(waits);
  r.comm_bytes_per_step = dp.step_comm_bytes();
  r.model_state = dp.model_state(opt);
  r.tokens_per_s = double(n) * r.ranks / r.step_seconds.median;
  r.flops_per_step = r.ranks * train_step_flops(c, o.batch, o.seq, o.lora ? &*o.lora : nullptr);
  r.gflops = r.flops_per_step / r.step_seconds.median * 1e-9;
  r.memory.weights = (m.num_params() + (o.lora ? r.trainable_params : 0)) * sizeof(float);
  r.memory.grads = r.trainable_params * sizeof(float);
  r.memory.optimizer = opt.state_bytes();
  r.memory.activations = m.activation_memory();
  r.peak_rss = peak_rss_bytes();
  return r;
}

}  // namespace genperf

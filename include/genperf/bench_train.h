// `genperf bench train`: the speed and memory of full training steps (bench/ uses train/,
// never the reverse).
#pragma once
#include <optional>

#include "genperf/bench.h"
#include "genperf/dist.h"
#include "genperf/train.h"

namespace genperf {

struct TrainBenchOptions {
  int64_t batch = 1, seq = 512;
  TrainOptions train;  // precision: the requested one (the result reports the effective one)
  std::optional<LoraConfig> lora;  // LoRA fine-tuning steps instead of full training
  int warmup = 1, reps = 3;
  uint64_t seed = 1;  // weights and tokens
  // Across ranks (mpirun): each rank runs one micro-batch of `batch` sequences (its own random
  // tokens) of a step whose global batch is ranks x batch (genperf/dist.h).
  DistOptions dist;
};

struct TrainMemory {
  size_t weights = 0, grads = 0, optimizer = 0;  // weights include LoRA adapters; grads and
                                                 // optimizer state cover the trainable ones
  ActivationMemory activations;
  size_t total() const { return weights + grads + optimizer + activations.total(); }
};

struct TrainBenchResult {
  int64_t batch = 0, seq = 0;
  TrainOptions train;  // precision: the effective one
  std::optional<LoraConfig> lora;
  size_t trainable_params = 0;
  Stats step_seconds;  // one optimizer step: zero grads, forward, backward, clip, AdamW
  double tokens_per_s = 0;  // at the median
  double flops_per_step = 0, gflops = 0;  // train_step_flops; achieved at the median
  TrainMemory memory;
  size_t peak_rss = 0;  // of the process, after the run
  // Across ranks: ranks, sharding, bytes this rank sent per step, seconds it waited on
  // communication per step (median over the timed steps), and its model-state bytes.
  int ranks = 1;
  ShardMode shard = ShardMode::None;
  bool overlap = true;
  double comm_bytes_per_step = 0;
  Stats comm_wait_seconds;
  ModelStateBytes model_state;
  Json to_json() const;
};

// Times full training steps (one micro-batch a rank, clipping at 1.0; DataParallel::step, which
// on one rank is train_step) of a randomly initialized model of config c on random tokens (LoRA
// steps when o.lora is set). tokens_per_s and gflops count every rank's work. MFU is gflops over
// a measured GEMM peak.
TrainBenchResult bench_train_step(const LlamaConfig& c, const TrainBenchOptions& o);

}  // namespace genperf

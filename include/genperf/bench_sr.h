// `genperf bench sr`: the speed and memory of the SR diffusion model's training steps and
// sampler steps (a UNet forward on a batch of tiles), against the machine's GEMM peak.
#pragma once
#include <cstdint>
#include <string>

#include "genperf/bench.h"
#include "genperf/dist.h"
#include "genperf/unet.h"

namespace genperf::sr {

struct SRBenchOptions {
  int64_t batch = 8, size = 64;  // images per step (across all ranks) and their side (high-resolution pixels)
  int warmup = 1, reps = 5;
  uint64_t seed = 1;
  int64_t grad_accum = 0;  // micro-batches per step across the ranks; 0: one per rank
  DistOptions dist;        // ranks and sharding (genperf/dist.h)
  bool bf16 = false;       // convolutions in bf16 (UNet::set_bf16), training and sampling
};

struct SRBenchResult {
  int64_t batch = 0, size = 0;
  size_t parameters = 0;
  int ranks = 1;
  std::string shard = "none";
  bool bf16 = false;
  Stats train_step;     // zero grads, forward, backward, gradient reduction, clip, AdamW, EMA: seconds
  Stats sample_step;    // one sampler step (a forward without saving activations): seconds
  double forward_flops = 0;  // of one forward on the batch
  double train_images_per_s = 0, sample_images_per_s = 0;  // at the medians (per sampler step)
  double train_gflops = 0, sample_gflops = 0;  // per rank; train: 3x forward FLOPs
  // Per rank: weights and the EMA (of the shard when sharded), gradients and AdamW's moments.
  size_t weights_bytes = 0, optimizer_bytes = 0, activation_bytes = 0, peak_rss = 0;
  ModelStateBytes state;            // this rank's model state (without the EMA)
  double comm_bytes_per_step = 0;   // sent by this rank per step (genperf/comm.h's convention)
  double comm_wait_s = 0;           // of the last step: time spent waiting on communication
  Json to_json() const;
};

// Times training and sampling steps of a randomly initialized model of config c on synthetic
// dust crops.
SRBenchResult bench_sr(const UNetConfig& c, const SRBenchOptions& o);

}  // namespace genperf::sr

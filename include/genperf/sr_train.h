// Training the SR diffusion model (genperf/diffusion.h) on high-resolution maps: random aligned
// crops with the eight flips and rotations, AdamW with warm-up and cosine decay, gradient
// clipping, an exponential moving average of the weights (the model that is saved), validation
// loss on fixed draws, checkpoints and bit-exact resume.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genperf/sr.h"
#include "genperf/unet.h"

namespace genperf::sr {

struct SRTrainOptions {
  int64_t steps = 2000, batch = 8, crop = 64;  // crop: side in high-resolution pixels
  float lr = 2e-4f, min_lr = 2e-5f;
  int64_t warmup = 100;
  double clip = 1.0, weight_decay = 0.0, ema = 0.999;
  uint64_t seed = 0;  // crops, flips and diffusion noise of step k come from (seed, k) alone
  int64_t log_every = 50, save_every = 500;
  int64_t val_batches = 2;  // fixed validation batches (the same crops and noise every time)
  Degradation degradation;  // its scale must be the config's
  int64_t stop_at = -1;     // >= 0: save and stop after this step, as an interrupted run would
};

struct SRTrainLog {
  int64_t step = 0;           // steps done
  double loss = 0;            // mean training loss since the last log
  double val_loss = -1;       // of the EMA weights; -1 without validation maps
  double lr = 0, grad_norm = 0;
  double images_per_s = 0;    // training crops per second since the last log
  double flops_per_s = 0;     // the network's forward and backward FLOPs per second (3x forward)
};

// Trains in out_dir: out_dir/model is an SR model directory of the EMA weights (written at each
// save and at the end), out_dir/state.safetensors holds the weights, Adam's moments, the EMA and
// the step, out_dir/log.jsonl a line per log. config.residual_std is measured on the training
// maps. resume continues from out_dir's state to o.steps, with the same results as a run
// without the interruption; a state of another config or seed is refused.
void train_sr(UNetConfig config, const std::vector<Map>& train, const std::vector<Map>& val,
              const SRTrainOptions& o, const std::string& out_dir, bool resume,
              const std::function<void(const SRTrainLog&)>& on_log = {});

}  // namespace genperf::sr

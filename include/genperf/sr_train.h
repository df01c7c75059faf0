// Training the SR diffusion model (genperf/diffusion.h) on high-resolution maps: random aligned
// crops with the eight flips and rotations, AdamW with warm-up and cosine decay, gradient
// clipping, an exponential moving average of the weights (the model that is saved), validation
// loss on fixed draws, checkpoints and bit-exact resume.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "genperf/diffusion.h"
#include "genperf/dist.h"
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
  // An SR model directory to fine-tune: the run starts from its weights (the EMA too) and keeps
  // its config (architecture, schedule, transform and residual_std, the network's units); the
  // config passed to train_sr is then ignored. Empty: weights drawn from the seed.
  std::string init;
  // Data parallel (genperf/dist.h): a step's batch is grad_accum micro-batches of batch /
  // grad_accum crops, split across the ranks (grad_accum a multiple of them); each micro-batch's
  // diffusion steps and noise come from (seed, step, micro-batch), so a run gives the same result
  // on any rank count. The EMA is sharded with the optimizer state.
  int64_t grad_accum = 1;
  DistOptions dist;
  bool bf16 = false;  // convolutions in bf16 (UNet::set_bf16); pass effective_precision's choice
};

// One rank's part of SR training: the network, data parallel over the ranks, AdamW over this
// rank's shard and the EMA of that shard. train_sr runs it; `bench sr` times its steps.
class SRTraining {
 public:
  // A network of config c initialized from seed (zero_out as UNet::init), or with the weights
  // `init` when given (c's size of them).
  SRTraining(const UNetConfig& c, uint64_t seed, bool zero_out, const SRTrainOptions& o,
             std::span<const float> init = {});
  // One optimizer step on the global batch, cond and x0 [batch, P, P, channels] (the same on
  // every rank): micro-batch k takes crops [k b, (k + 1) b), b = batch / grad_accum, its
  // diffusion steps and noise from Rng(noise_seed(k)); gradients clipped to o.clip, AdamW at lr,
  // then the EMA with DDPM's warm-up. Returns the mean loss over the batch (every rank).
  StepResult step(const float* cond, const float* x0, int64_t P, const std::function<uint64_t(int64_t)>& noise_seed,
                  float lr);
  UNet<float>& net() { return net_; }
  DataParallel& dp() { return *dp_; }
  AdamW& optimizer() { return opt_; }
  std::span<float> ema_shard() { return ema_; }  // [dp().shard_begin(), + shard_size())
  std::vector<float> ema();                      // whole, on every rank (collective)
  std::vector<float> weights();                  // whole, on every rank (collective)
  double last_flops() const { return flops_; }   // forward and backward FLOPs of this rank's last step

 private:
  SRTrainOptions o_;
  UNet<float> net_;
  std::unique_ptr<DistModel> view_;
  std::unique_ptr<DataParallel> dp_;
  AdamW opt_;
  std::vector<float> ema_;
  Schedule sched_;
  double flops_ = 0;
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
// maps (kept from the model of o.init when fine-tuning). resume continues from out_dir's state to o.steps, with the same results as a run
// without the interruption; a state of another config or seed is refused.
void train_sr(UNetConfig config, const std::vector<Map>& train, const std::vector<Map>& val,
              const SRTrainOptions& o, const std::string& out_dir, bool resume,
              const std::function<void(const SRTrainLog&)>& on_log = {});

}  // namespace genperf::sr

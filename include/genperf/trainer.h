// The training loop shared by `genperf train` and `genperf finetune`: batches from a DataLoader,
// gradient accumulation, the learning-rate schedule, clipping and AdamW (train_step), periodic
// validation, a JSON-lines log of losses, and resumable training state.
//
// Resumption is exact: all randomness of training is counter-based (the data order from
// (seed, epoch), LoRA dropout from (seed, step)), so the state is the trainable parameters, the
// AdamW moments and step count, the data position and the step. A run resumed from step k gives
// the same losses, bit for bit, as one that never stopped, on the same thread count.
//
// Across ranks (TrainerConfig::dist): every rank runs its share of each step's micro-batches
// (genperf/dist.h), the state file holds the whole state (sharded optimizer state is gathered
// for it) and is written by rank 0 alone, and every rank resumes from it, on any rank count that
// divides grad_accum.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genperf/dist.h"
#include "genperf/json.h"
#include "genperf/train.h"
#include "genperf/train_data.h"

namespace genperf {

struct TrainerConfig {
  int64_t batch = 8;        // sequences per micro-batch
  int64_t grad_accum = 1;   // micro-batches per optimizer step, across all ranks
  int64_t steps = 1000;     // optimizer steps in all
  LrSchedule schedule;      // total_steps is set to `steps`
  AdamWOptions adamw;
  double clip = 1.0;        // global gradient-norm clip (<= 0: none)
  int64_t eval_every = 0;   // validation loss every N steps and at the end (0: only at the end)
  int64_t eval_batches = 0; // validation micro-batches per evaluation (0: the whole set)
  int64_t save_every = 0;   // training state every N steps (0: only at the end)
  uint64_t seed = 1;        // data order
  DistOptions dist;         // ranks and sharding (genperf/dist.h); one process by default
};

struct StepRecord {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  double loss = 0, grad_norm = 0, tokens_per_s = 0, elapsed_s = 0;
  float lr = 0;
  // Across ranks: bytes this rank sent in the step (CommStats convention) and seconds it waited
  // on communication after its compute was done (what overlap did not hide).
  double comm_bytes = 0, comm_wait_s = 0;
  Json to_json() const;
};

class Trainer {
 public:
  // The model, data and validation set must outlive the trainer; validation may be empty.
  Trainer(TrainModel& model, const TokenSequences& train, const TokenSequences& validation,
          TrainerConfig config);

  // Loads training state written by save_state: checks that it belongs to this model shape,
  // trainable-parameter count and data; refuses a truncated or foreign file with a clear error.
  void load_state(const std::string& path);
  // Writes the state atomically (temporary name, then rename).
  void save_state(const std::string& path);

  // Runs optimizer steps until `until` (at most config.steps); calls on_step after each step
  // and on_eval after each validation. Saves state to state_path every save_every steps and at
  // the end when state_path is not empty.
  struct Callbacks {
    std::function<void(const StepRecord&)> on_step;
    std::function<void(int64_t step, double val_loss)> on_eval;
  };
  void run(int64_t until, const std::string& state_path, const Callbacks& cb);

  // Mean loss over the validation set (or its first eval_batches micro-batches), in order.
  double validation_loss();

  int64_t step() const { return step_; }
  const TrainerConfig& config() const { return config_; }
  DataPosition data_position() const { return loader_.position(); }
  int64_t tokens_per_step() const;  // across all ranks
  const DataParallel& data_parallel() const { return dp_; }
  // Makes the model's parameters whole on every rank (fully sharded training keeps a shard);
  // collective. Before reading the model (export).
  void gather_params() { dp_.gather_all_params(); }
  ModelStateBytes model_state() const { return dp_.model_state(opt_); }

 private:
  TrainModel& model_;
  const TokenSequences& train_;
  const TokenSequences& validation_;
  TrainerConfig config_;
  DataLoader loader_;
  DataParallel dp_;
  AdamW opt_;
  int64_t step_ = 0;
  std::vector<std::vector<int32_t>> tok_, tgt_;  // per micro-batch
};

// A training run's output directory: train_state.safetensors (the resumable state, written
// atomically every save_every steps), train_log.jsonl (a JSON record a step and a validation),
// train_run.json (how the run was started) and, at the last step, the model in HF format.
struct TrainRunFiles {
  std::string dir, state, log, run;
  explicit TrainRunFiles(const std::string& d)
      : dir(d), state(d + "/train_state.safetensors"), log(d + "/train_log.jsonl"), run(d + "/train_run.json") {}
};

struct TrainRunOptions {
  bool resume = false;   // continue from files.state; the log keeps its records up to that step
  int64_t stop_at = -1;  // stop after this step (< 0: the config's last), to split a run
  bool export_model = true;                // write the model when the last step is reached
  DType export_dtype = DType::F32;
  std::vector<std::string> extra_files;    // copied beside the exported model (tokenizer files)
  // Progress and printing (the log is written regardless); on_start sees the first step of this
  // call (0, or the resumed one) and the last, before any step runs.
  std::function<void(int64_t first, int64_t until)> on_start;
  Trainer::Callbacks callbacks;
};

// Runs `m` in the directory: resumes, writes the run record (run_info plus the data's and the
// model's sizes) before the first step, appends to the log, trains until stop_at or the end,
// exports. Returns the summary: out, step, steps, final_loss, mean_tokens_per_s, val_loss, and
// model and dtype when it exported.
Json run_training(TrainModel& m, const TokenSequences& train, const TokenSequences& val, const TrainerConfig& tc,
                  const TrainRunFiles& files, const TrainRunOptions& o, Json run_info);

// A fingerprint of token data (FNV-1a over tokens and targets), to refuse resuming on other data.
uint64_t data_fingerprint(const TokenSequences& d);

}  // namespace genperf

// Data-parallel training across the ranks of a Communicator (genperf/comm.h), as PyTorch DDP and
// DeepSpeed ZeRO-1 do it:
//   - the global batch is split across ranks: each optimizer step takes grad_accum micro-batches
//     in the data order of one process, and rank r runs micro-batches [r A, (r+1) A), A =
//     grad_accum / ranks; so a run gives the same result (reduction order aside) on any rank count;
//   - gradients are reduced in buckets (25 MiB by default) laid from the end of the trainable
//     buffer, each started as soon as backward has finished the layers it covers, while backward
//     goes on with the layers before it;
//   - ShardMode::None keeps full optimizer state on every rank and all-reduces the gradients
//     (2 P (N-1)/N elements sent per rank and step); ShardMode::Optimizer (ZeRO-1) gives rank r
//     the AdamW state of its 1/N of the parameters: buckets are reduce-scattered to their owners,
//     each rank updates its shard and the parameters are all-gathered (the same 2 P (N-1)/N).
// Model state per rank, f32 AdamW over P trainable parameters: None 16 P bytes, Optimizer
// 8 P + 8 P / N.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "genperf/comm.h"
#include "genperf/json.h"
#include "genperf/train.h"

namespace genperf {

// --shard: none (plain data parallel), optimizer (ZeRO-1). ZeRO-2 (grads) and ZeRO-3/FSDP (full)
// are not built yet and are refused by name.
enum class ShardMode : uint8_t { None = 0, Optimizer = 1 };
const char* shard_mode_name(ShardMode m);
ShardMode parse_shard_mode(std::string_view s);

struct DistOptions {
  Communicator* comm = nullptr;          // null: one process
  ShardMode shard = ShardMode::None;
  size_t bucket_bytes = size_t(25) << 20;  // PyTorch DDP's bucket_cap_mb = 25
  bool overlap = true;                   // start buckets during backward (false: after it)
};

// Bytes of model state one rank holds (trainable parameters, their gradients, optimizer state).
struct ModelStateBytes {
  size_t params = 0, grads = 0, optimizer = 0;
  size_t total() const { return params + grads + optimizer; }
  Json to_json() const;
};

class DataParallel {
 public:
  // The model must outlive this. Checks the options; grad_accum must split evenly across ranks.
  DataParallel(TrainModel& m, DistOptions o, int64_t grad_accum);

  Communicator& comm() const { return *comm_; }
  int rank() const { return comm_->rank(); }
  int ranks() const { return comm_->size(); }
  const DistOptions& options() const { return o_; }
  // Micro-batches this rank runs per step, and the first one's index in the step.
  int64_t local_micro() const { return local_; }
  int64_t first_micro() const { return int64_t(rank()) * local_; }

  // The range of trainable parameters whose optimizer state this rank holds and updates (all
  // of them for ShardMode::None), and each rank's count of them.
  size_t shard_begin() const { return shard_lo_; }
  size_t shard_size() const { return shard_hi_ - shard_lo_; }
  const std::vector<size_t>& shard_counts() const { return counts_; }

  // One optimizer step over this rank's micro-batches (local_micro() of them): zero the
  // gradients, forward and backward each (scaled by 1 / grad_accum), reduce the gradients
  // (buckets during the last backward), clip by the global norm, AdamW on this rank's shard,
  // all-gather the parameters when sharded. opt holds state for shard_size() parameters.
  // The loss is the mean over all ranks' micro-batches, the same on every rank.
  StepResult step(AdamW& opt, std::span<const MicroBatch> micro, float lr, double max_grad_norm);

  // A full copy of a sharded optimizer state (a moment) on every rank, for a checkpoint
  // (collective when sharded); to resume, each rank reads [shard_begin(), + shard_size()).
  std::vector<float> gather(std::span<const float> shard);

  ModelStateBytes model_state(const AdamW& opt) const;
  // Bytes sent per step by this rank in the last step (CommStats convention).
  double step_comm_bytes() const { return step_bytes_; }
  double step_comm_wait_s() const { return step_wait_s_; }

 private:
  void launch(size_t ready_from);  // buckets whose gradients are all at and after ready_from

  TrainModel& model_;
  DistOptions o_;
  std::unique_ptr<Communicator> own_;  // the local communicator when none is given
  Communicator* comm_ = nullptr;
  int64_t local_ = 1;
  size_t shard_lo_ = 0, shard_hi_ = 0;
  std::vector<size_t> counts_;
  std::vector<std::pair<size_t, size_t>> buckets_;  // [lo, hi), from the end of the buffer
  size_t next_bucket_ = 0;
  std::vector<CommHandle> pending_;
  double step_bytes_ = 0, step_wait_s_ = 0;
};

}  // namespace genperf

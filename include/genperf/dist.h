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
//     the AdamW state of its contiguous 1/N of the parameters: buckets are reduce-scattered to
//     their owners, each rank updates its shard and the parameters are all-gathered (the same
//     2 P (N-1)/N);
//   - ShardMode::Grads (ZeRO-2) also keeps only the shard's gradients: the full gradient buffer
//     is a window of pages that backward fills and that each bucket gives back once reduced
//     (madvise), so only the buckets in flight are resident; every micro-batch's buckets are
//     reduced (as DeepSpeed does), the shard accumulating them;
//   - ShardMode::Full (ZeRO-3, FSDP) keeps only the shard's parameters too: the parameter buffer
//     is a window as well, each unit (the embedding, a layer, the norm and head) all-gathered
//     before it is read and given back after, in forward and again in backward, the next unit's
//     gather issued while the current one computes (3 P (N-1)/N sent per step).
// Model state per rank, f32 AdamW over P trainable parameters: None 16 P bytes, Optimizer
// 8 P + 8 P / N, Grads 4 P + 12 P / N, Full 16 P / N; F frozen parameters (LoRA's base) add 4 F,
// or 4 F / N when Full (which then also gathers 2 F (N-1)/N a micro-batch); the windows'
// resident pages are reported as communication buffers.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genperf/comm.h"
#include "genperf/json.h"
#include "genperf/tensor.h"
#include "genperf/train.h"

namespace genperf {

// --shard: none (plain data parallel), optimizer (ZeRO-1), grads (ZeRO-2), full (ZeRO-3/FSDP).
// With LoRA, the modes apply to the adapters (the trainable parameters); full also shards the
// frozen base, gathered unit by unit as the adapters are (as FSDP does with frozen parameters).
enum class ShardMode : uint8_t { None = 0, Optimizer = 1, Grads = 2, Full = 3 };
const char* shard_mode_name(ShardMode m);
ShardMode parse_shard_mode(std::string_view s);

// When gradient buckets are reduced while backward still runs (DistOptions::overlap), as the
// `--comm-overlap` option says it: on, off, or auto.
enum class CommOverlap : uint8_t { Auto = 0, On = 1, Off = 2 };
CommOverlap parse_comm_overlap(std::string_view s);  // throws naming the known values
// Auto: on for sharded gradients (grads, full: their window holds only the buckets in flight
// because they drain during backward; reduced after it, it would hold all of them), and
// otherwise on where the ranks' compute threads leave a core of the node to the communication
// threads (local_ranks x threads below node_cores, and this process may run on more cores than
// its threads), off where they fill the cores. Between the ranks of one node a reduction is
// memory copies and additions on CPU threads: overlapped with backward on a full node it takes
// its core time from backward: at 110m on 2 ranks of one thread a step took 1.13x the one that
// reduces after backward (DISTRIBUTED.md, "What a run does").
bool resolve_comm_overlap(CommOverlap o, ShardMode s, int local_ranks, int threads, int node_cores,
                          int affinity_cores);

// The pages ZeRO-2 and -3 hold their windows in and give back (2 MiB, a huge page): buckets'
// inner edges fall on them (src/train/paged.h).
inline constexpr size_t kWindowPageBytes = size_t(2) << 20;

// The gradient buckets of a buffer of n values, [lo, hi) from its end (the order backward
// finishes them): bucket_bytes each (at least one window page), their inner edges on window
// pages, so that each bucket's pages can be given back without touching its neighbours'.
std::vector<std::pair<size_t, size_t>> gradient_buckets(size_t n, size_t bucket_bytes);

struct DistOptions {
  Communicator* comm = nullptr;          // null: one process
  ShardMode shard = ShardMode::None;
  size_t bucket_bytes = size_t(25) << 20;  // PyTorch DDP's bucket_cap_mb = 25
  bool overlap = true;                   // start buckets during backward (false: after it)
  // Grads and Full: buckets that may still be reducing when backward goes on to the next unit;
  // beyond them backward waits for the oldest (DeepSpeed reduces into two buffers alike), so
  // the gradient window stays bounded when the link is slower than backward.
  size_t inflight_buckets = 2;
};

// Bytes of model state one rank holds (trainable parameters, their gradients, optimizer state).
// comm_buffers: the largest resident part of the gradient and parameter windows seen in the
// last step (measured with mincore), for Grads and Full; not model state.
struct ModelStateBytes {
  size_t params = 0, grads = 0, optimizer = 0;
  size_t frozen = 0;  // parameters not trained (LoRA's base)
  size_t comm_buffers = 0;
  size_t total() const { return params + grads + optimizer + frozen; }
  Json to_json() const;
};

// What data-parallel training needs of a model: its trainable parameters and their gradients as
// flat f32 buffers, and two hooks: one into backward (the gradients from an offset on are final,
// so buckets can reduce while backward goes on) and one around the reads of its parameters, which
// come in units read as a whole (fully sharded training gathers a unit before it is read and
// frees it after). The LLM (TrainModel) and the SR UNet (genperf/sr_train.h) are such models.
class DistModel {
 public:
  virtual ~DistModel() = default;
  virtual std::span<float> params() = 0;
  virtual std::span<float> grads() = 0;
  virtual std::vector<ParamSegment> segments() const = 0;
  virtual void zero_grad() = 0;
  // hook(offset): every gradient at and after offset is final for this backward; offsets fall
  // to 0, the last call. Empty: no calls.
  virtual void set_grads_ready_hook(std::function<void(size_t offset)> hook) = 0;
  // Each unit's ranges of params(); hook(unit, false, backward) before a unit is read and
  // hook(unit, true, backward) after. Empty: no calls.
  virtual std::vector<std::vector<std::pair<size_t, size_t>>> param_units() const = 0;
  virtual void set_params_hook(std::function<void(int64_t unit, bool done, bool backward)> hook) = 0;
  // Moves the parameters and gradients into the caller's buffers of params().size() f32, copying
  // nothing; an undefined tensor keeps that buffer.
  virtual void adopt_buffers(Tensor params, Tensor grads) = 0;
  // Parameters the model reads but does not train (LoRA's base), in the same units as
  // param_units() (each unit's ranges of frozen()); ShardMode::Full shards them too. None by
  // default. adopt_frozen moves them into the caller's buffer of frozen().size() f32.
  virtual std::span<float> frozen() { return {}; }
  virtual std::vector<std::vector<std::pair<size_t, size_t>>> frozen_units() const { return {}; }
  virtual void adopt_frozen(Tensor) {}
  // Sharded initialization: a model built with its initialization deferred (TrainModel's
  // InitMode::Deferred) writes any range of its parameters on request, so that a fully sharded
  // rank writes only its shard and never holds the whole model; materialize() writes them all
  // (every other mode). By default the parameters are written already and these copy them.
  virtual void init_params(size_t lo, size_t hi, float* dst) {
    std::copy(params().begin() + ptrdiff_t(lo), params().begin() + ptrdiff_t(hi), dst);
  }
  virtual void init_frozen(size_t lo, size_t hi, float* dst) {
    std::copy(frozen().begin() + ptrdiff_t(lo), frozen().begin() + ptrdiff_t(hi), dst);
  }
  virtual void materialize() {}
};

class DataParallel {
 public:
  // The model must outlive this. Checks the options; grad_accum must split evenly across ranks.
  DataParallel(DistModel& m, DistOptions o, int64_t grad_accum);
  DataParallel(TrainModel& m, DistOptions o, int64_t grad_accum);  // the LLM
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;  // the model's hooks point at this object
  DataParallel& operator=(const DataParallel&) = delete;

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
  // The same for any model: run(i, loss_scale) runs this rank's micro-batch i (0 .. local_micro()
  // - 1), forward and backward with its loss scaled by loss_scale (grads += d(scale loss)/d
  // params), and returns its loss.
  using MicroStep = std::function<double(int64_t i, float loss_scale)>;
  StepResult step(AdamW& opt, const MicroStep& run, float lr, double max_grad_norm);

  // A full copy of a sharded state (a moment, the Full mode's parameters) on every rank, for a
  // checkpoint (collective when sharded); to resume, each rank reads [shard_begin(), + shard_size()).
  std::vector<float> gather(std::span<const float> shard);
  // Whether the optimizer state, and whether the parameters, are split across ranks (a job of
  // one rank shards nothing).
  bool sharded() const { return shard_size() != counts_total(); }
  bool params_sharded() const { return sharded() && o_.shard == ShardMode::Full; }
  // Where this rank's parameters [shard_begin(), + shard_size()) live: the model's buffer, or
  // for Full the shard of its own. Unsharded, the shard is every parameter.
  std::span<float> param_shard();
  // Full: gathers every unit into the model's parameter buffer and keeps it there, so that the
  // model can be read whole (export); collective. The next step frees it again.
  void gather_all_params();

  ModelStateBytes model_state(const AdamW& opt) const;
  // Bytes sent per step by this rank in the last step (CommStats convention).
  double step_comm_bytes() const { return step_bytes_; }
  double step_comm_wait_s() const { return step_wait_s_; }

 private:
  void init(int64_t grad_accum);
  size_t counts_total() const { return total_; }
  void launch(size_t ready_from);  // buckets whose gradients are all at and after ready_from
  void drain(size_t keep);          // Grads, Full: bucket results into the shard, pages freed
  void on_params(int64_t unit, bool done, bool backward);  // Full: gather, prefetch, free
  void gather_unit(size_t unit);
  using Units = std::vector<std::vector<std::pair<size_t, size_t>>>;
  bool page_free(const Units& units, size_t page_lo, size_t unit) const;
  void release_unit(size_t unit, float* window, const Units& units);
  void note_resident();
  bool paged() const { return o_.shard == ShardMode::Grads || o_.shard == ShardMode::Full; }

  std::unique_ptr<DistModel> adapter_;  // the LLM's view as a DistModel
  TrainModel* llm_ = nullptr;
  DistModel& model_;
  DistOptions o_;
  std::unique_ptr<Communicator> own_;  // the local communicator when none is given
  Communicator* comm_ = nullptr;
  int64_t local_ = 1;
  size_t shard_lo_ = 0, shard_hi_ = 0, total_ = 0;
  std::vector<size_t> counts_;
  std::vector<std::pair<size_t, size_t>> buckets_;  // [lo, hi), from the end of the buffer
  size_t next_bucket_ = 0;
  std::vector<CommHandle> pending_;
  double step_bytes_ = 0, step_wait_s_ = 0;
  // Grads and Full: the windows (model buffers), the shard's gradients (and Full's parameters),
  // buckets launched but not drained, and the window's lowest freed offset.
  Tensor grad_window_, param_window_;
  std::vector<float> grad_shard_, param_shard_;
  // Full with frozen parameters: their window, this rank's shard and each rank's count.
  Tensor frozen_window_;
  std::vector<float> frozen_shard_;
  std::vector<size_t> frozen_counts_;
  size_t frozen_lo_ = 0;
  std::vector<std::vector<std::pair<size_t, size_t>>> frozen_units_;
  size_t drained_ = 0, freed_from_ = 0;
  std::vector<std::vector<std::pair<size_t, size_t>>> units_;
  std::vector<std::vector<CommHandle>> gathers_;  // per unit: its gather in flight or done
  std::vector<bool> gathered_;
  size_t resident_peak_ = 0;
  bool measured_ = false;  // the windows' peak is measured in the first step (each repeats it)
};

// A training state across ranks (the LLM's and the SR model's trainers). Unsharded, rank 0
// writes one safetensors file at path. Sharded, each rank writes its range of every tensor to
// <path stem>.step<S>.rank<r>-of-<N>.safetensors (atomically), then, once every shard is
// complete (a barrier), rank 0 writes path as a manifest: the metadata and the list of shards.
// The manifest is the checkpoint: a run interrupted while writing shards resumes from the
// previous one, whose shards are removed only after the new manifest is in place. tensors: this
// rank's values, [shard_begin(), + shard_size()) of each tensor when dp.sharded(), else whole.
// Collective.
void save_dist_state(DataParallel& dp, const std::string& path, int64_t step,
                     const std::vector<std::pair<std::string, std::span<const float>>>& tensors,
                     std::map<std::string, std::string> metadata);

// Reads such a state on any rank count: its metadata first (for the caller's checks), then the
// ranges of tensors each rank needs.
class DistState {
 public:
  explicit DistState(const std::string& path);
  ~DistState();
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Checks that each named tensor holds n f32 values (one file, or the manifest's shards, each
  // of the state's step); throws naming the file otherwise.
  void check(size_t n, const std::vector<std::string>& names, int64_t step);
  // Values [from, from + dst.size()) of a tensor (after check).
  void copy(const std::string& name, size_t from, std::span<float> dst) const;

 private:
  struct Piece;
  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<Piece> pieces_;
};

}  // namespace genperf

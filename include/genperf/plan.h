// `genperf plan`: what a training (or inference) job needs per rank and how fast it would run, on
// this machine (measured in the run) or on a catalogued accelerator (vendor figures, labelled
// *modeled* wherever printed: BENCHMARKING.md, "where a model of hardware stands in for hardware").
//
// Training on N ranks with AdamW over P f32 parameters (genperf's bf16 mixed precision keeps f32
// master weights, gradients and moments too), model state per rank by shard mode:
//   none (DDP) 16 P, optimizer (ZeRO-1) 8 P + 8 P/N, grads (ZeRO-2) 4 P + 12 P/N, full (ZeRO-3 /
//   FSDP) 16 P/N; a sharded part is the largest rank's, ceil(P/N) parameters.
// Bytes sent per rank and step (ring volume, DISTRIBUTED.md): 2 P (N-1)/N x 4 for none, optimizer
// and grads (all-reduce, or reduce-scatter plus all-gather), 3 P (N-1)/N x 4 for full (the
// parameters gathered in forward and again in backward, the gradients reduce-scattered).
// Activations are TrainModel::activation_memory's, FLOPs train_step_flops (plus the recomputed
// forward of the layers under layer checkpointing).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genperf/dist.h"
#include "genperf/dtype.h"
#include "genperf/json.h"
#include "genperf/llama_config.h"
#include "genperf/train.h"

namespace genperf {

// Where a figure comes from: measured in this run, modeled (a catalogue figure, or anything
// computed from one), or given by the user (--mem-gb, --efficiency).
enum class FigureKind : uint8_t { Measured = 0, Modeled = 1, Given = 2 };
const char* figure_kind_name(FigureKind k);

struct Figure {
  double value = 0;
  FigureKind kind = FigureKind::Modeled;
  Json to_json() const;  // {"value": v, "kind": "measured" | "modeled" | "given"}
};

// Collectives as `genperf bench comm` measured them on a job of `ranks` ranks: the bus bandwidth
// (bytes a rank sends by the ring convention, over the time) of each, 1e9 bytes/s.
struct CollectiveFigures {
  int ranks = 0;
  double message_bytes = 0;
  double all_reduce_gbs = 0, reduce_scatter_gbs = 0, all_gather_gbs = 0;
  std::string source;  // the record's file
  Json to_json() const;
};
// From a `genperf bench comm --out` record; throws naming `path` when it is not one.
CollectiveFigures collective_figures(const Json& record, const std::string& path);

// One device: capacity and bandwidth of its memory, its dense (not 2:4 sparse) peak TFLOPS per
// compute type where the vendor publishes one (absent otherwise: never a guess), and the
// bandwidth a collective gets from it.
struct DeviceSpec {
  std::string id;    // the --device name: "cpu", "h100", ...
  std::string name;  // "NVIDIA H100 SXM5 80GB"
  Figure memory_bytes;
  Figure memory_gbs;  // 1e9 bytes/s
  std::optional<Figure> fp32, tf32, bf16, fp16, fp8;  // TFLOPS
  // Bytes per second one device sends while receiving as much (one direction of its links: half
  // of NVLink's bidirectional figure, all of the RoCE ports' line rate), 1e9 bytes/s.
  Figure link_gbs;
  std::string link;    // the interconnect as its vendor states it
  std::string source;  // datasheet name and URL, or how this machine was measured
  std::string note;    // what is absent and why, or how a figure was derived
  // The ranks of a job share this one device (this machine: every rank runs on its cores), so
  // each gets 1/N of its bandwidths and memory, and of its peak unless the next two say more; a
  // catalogued device is one per rank.
  bool shared_by_ranks = false;
  // A shared device's cores, and the share of its all-core peak that one core reaches alone
  // (0: unknown). A rank of N then runs cores / N threads (genperf's default) and gets the share
  // its threads reach, interpolated linearly between one core's and all of them; with more
  // ranks than cores, each core's share is split among the ranks that time-share it.
  int cores = 0;
  double one_core_share = 0;
  // The share of the peak one rank of N gets (1 / N without the two figures above).
  double rank_peak_share(int ranks) const;
  // Measured collectives (plan --comm): used in place of link_gbs for jobs of their rank count.
  std::optional<CollectiveFigures> collectives;
  // The peak that genperf's precision runs at: f32 -> fp32 (genperf's f32 never rounds to TF32),
  // bf16 -> bf16. Absent when the vendor publishes none.
  std::optional<Figure> peak_tflops(Precision p) const;
  // Every compute type under its name, in the order fp32, tf32, bf16, fp16, fp8.
  std::vector<std::pair<const char*, const std::optional<Figure>*>> peaks() const;
  Json to_json() const;
};

// V100, A100, H100, H200, Gaudi 1, 2, 3: every figure Modeled.
const std::vector<DeviceSpec>& device_catalog();
// "cpu" (this machine) and the catalogue's ids, for messages and --help.
std::vector<std::string> device_names();
// The catalogue entry of an id (case-insensitive); throws "[plan] unknown device 'x' (known: ...)".
const DeviceSpec& catalog_device(std::string_view id);

// This machine's figures: a GEMM peak of the precision that runs here, read bandwidth and
// available memory (MemAvailable, or a cap the user gives).
struct MachineFigures {
  Precision precision = Precision::F32;  // the one gemm_peak_gflops was measured for
  double gemm_peak_gflops = 0;
  // The same GEMM on one thread (0: not measured), and the cores the peak was measured on.
  double core_peak_gflops = 0;
  int cores = 0;
  double memory_gbs = 0;
  double memory_bytes = 0;
  // Measured now, or Given: the peak and bandwidth from an earlier measurement (plan's
  // --peak-gflops, --bandwidth-gbs), so that a grid of plans shares one measurement.
  FigureKind kind = FigureKind::Measured;
};
// Measures them now (bench::measure_gemm_peak_gflops, bench::measure_bandwidth_gbs; seconds).
MachineFigures measure_this_machine(Precision p);
// MemAvailable of /proc/meminfo in bytes; throws when it cannot be read.
size_t available_memory_bytes();
// Shared-memory MPI between ranks of this node moves each byte through a shared segment: the
// sender copies it in, the receiver copies it out, four passes over memory (read, write, read,
// write). So a collective's bandwidth is modeled as the measured read bandwidth over this.
inline constexpr double kShmPassesPerByte = 4;
// The DeviceSpec of this machine ("cpu"): peak and bandwidth Measured (with every thread of the
// process, which its ranks share), link Modeled from them.
DeviceSpec this_machine(const MachineFigures& m);

// The shard modes the planner compares (genperf/dist.h runs each of them).
inline constexpr ShardMode kShardModes[] = {ShardMode::None, ShardMode::Optimizer, ShardMode::Grads,
                                            ShardMode::Full};

// Model state bytes per rank (the largest rank's) for P f32 parameters under AdamW.
ModelStateBytes planned_model_state(int64_t P, ShardMode s, int ranks);
// Bytes one rank sends per step.
double planned_comm_bytes(int64_t P, ShardMode s, int ranks);
// Parameters of the largest unit full sharding gathers at once: one decoder layer, or the
// embedding (or the untied output head), V x d, where that is larger.
int64_t largest_unit_params(const LlamaConfig& c);
// Communication buffers per rank, the windows' peak as genperf's DataParallel holds them
// (DISTRIBUTED.md), replaying its schedule over the units (the embedding, each layer, the final
// norm and head) and its buckets. none and optimizer reduce their buckets in place in the
// gradient buffer (0). grads: the gradient window when backward has just finished a unit: the
// gradients from that unit up to the buckets started before it and still reducing, at most
// DistOptions::inflight_buckets of them (the most a slow link leaves); with tied embeddings the
// embedding's gradients too (the head writes them first). full: that beside the parameters of
// the unit just finished and of the next one (prefetched), or in forward a unit and the next;
// the largest of these. 0 on 1 rank. With LoRA: the adapters' windows (at most all adapters
// each), and for full the frozen base's window, which holds what the parameter window does.
size_t planned_comm_buffer_bytes(const LlamaConfig& c, ShardMode s, int ranks, size_t bucket_bytes,
                                 const LoraConfig* lora = nullptr);
// Bytes the windows take in per step and rank (the whole of each pass through them): grads, the
// gradients once (4 P); full, the parameters gathered in forward and again in backward and the
// gradients (12 P), with LoRA also the frozen base gathered twice (8 F). 0 on 1 rank or unsharded.
double planned_window_fill_bytes(int64_t P, int64_t F, ShardMode s, int ranks, bool lora);
// FLOPs per rank of one step: train_step_flops (with LoRA when given), plus with layer
// checkpointing the layers' forward again (a third of full training's step less the output head's).
double planned_step_flops(const LlamaConfig& c, int64_t batch, int64_t seq, bool checkpoint_layers,
                          const LoraConfig* lora = nullptr);

// Which communication hides behind compute. Buckets: a bucket's reduction runs during the rest of
// backward, so only the last bucket (full: the first gathered unit in forward and the last one in
// backward) is exposed, plus whatever does not fit under the compute; the parameters' all-gather
// after a sharded optimizer step is always exposed. None: all of it is exposed (this machine:
// DISTRIBUTED.md measured that overlap takes its core time from backward on a full node).
enum class PlanOverlap : uint8_t { None = 0, Buckets = 1 };
const char* plan_overlap_name(PlanOverlap o);
PlanOverlap parse_plan_overlap(std::string_view s);

// AdamW's update is bound by memory: per parameter it reads the weight, gradient and two moments
// and writes the weight and moments back.
inline constexpr double kAdamWBytesPerParam = 28;
// An unsharded plan that fits is preferred while it is within this fraction of the fastest that
// fits: the study (DISTRIBUTED.md) measured ZeRO-1 at 0.998x the unsharded step, and a difference
// smaller than the model's error is no reason to shard.
inline constexpr double kPreferUnshardedWithin = 0.05;

// Seconds of one training step of a rank of this job, timed now on this machine, beside the
// ranks that share it. Two models of the job's widths, one decoder layer and four, each run
// forward and backward on batch x seq random tokens (TrainModel, o.train's attention and
// precision, LoRA when planned; a warm-up, then the median of at least 5 steps and of enough for
// a second, at most 41); a layer is a third of the difference, the rest (embedding, final norm,
// head and loss) what the one-layer model leaves beside it (a span of three layers: the
// difference of two medians is the noisiest figure, and it is divided by the span). The step's
// passes over the parameters are timed over the four-layer model's
// trainable ones (the median of 3 each): zeroing the gradients, their norm (clip_grad_norm) and
// AdamW's update. As measure_rank_gemm_gflops, the ranks that fit the cores run in step and the
// others take turns. This times the work that is not matmuls as the job runs it: the norms,
// rotary, attention's softmax, SwiGLU and the loss, which on this machine slow more than the
// matmuls when ranks share the cores (DISTRIBUTED.md).
struct RankStepFigures {
  double layer_forward_s = 0, layer_backward_s = 0;  // one decoder layer
  double rest_forward_s = 0, rest_backward_s = 0;    // the embedding, final norm, head and loss
  // Per trainable parameter: AdamW's update, the gradients' zeroing and their norm.
  double adamw_s_per_param = 0, zero_s_per_param = 0, norm_s_per_param = 0;
  // Forward and backward of `layers` decoder layers, plus the recompute of their forward under
  // layer checkpointing.
  double forward_s(int64_t layers) const { return rest_forward_s + double(layers) * layer_forward_s; }
  double backward_s(int64_t layers, bool checkpoint) const {
    return rest_backward_s + double(layers) * (layer_backward_s + (checkpoint ? layer_forward_s : 0.0));
  }
  Json to_json() const;  // each figure, labelled measured
};

struct PlanOptions {
  int ranks = 1;
  int64_t batch = 1, seq = 512;  // per rank (training); sequences and context (inference)
  TrainOptions train;            // attention, checkpoint_layers, precision
  // LoRA fine-tuning: the adapters are trained (the shard modes' formulas apply to them), the
  // base is frozen (4 bytes a parameter, 1/N of it a rank when fully sharded) and, fully
  // sharded, gathered in forward and backward.
  std::optional<LoraConfig> lora;
  double efficiency = 0.7;       // of the device's peak (or of rank_gemm_gflops) that the step reaches
  bool efficiency_given = false; // the user's figure (Given) rather than the default assumption
  // This machine: the GFLOP/s one rank's matmuls reach at this job's shapes, timed
  // (measure_rank_gemm_gflops). Compute is then planned at this rate times the efficiency instead of
  // at the rank's share of the device's 2048^3 peak: small matmuls (few tokens a rank, or the thin
  // products of the weight gradients) run well below that peak.
  std::optional<double> rank_gemm_gflops;
  // This machine: the job's training step timed at its shapes (measure_rank_step). Where given,
  // compute and AdamW's update are planned from it and rank_gemm_gflops is not used; the
  // efficiency then applies only when the user gives one (a timed step is the step).
  std::optional<RankStepFigures> rank_step;
  double comm_efficiency = 1.0;  // of the link bandwidth that a collective reaches
  PlanOverlap overlap = PlanOverlap::Buckets;
  size_t bucket_bytes = size_t(25) << 20;
  std::optional<double> memory_cap_bytes;  // --mem-gb: at most this much memory per rank
  // Inference: weights at weight_dtype and a KV cache of `batch` sequences of seq tokens.
  bool inference = false;
  DType weight_dtype = DType::BF16, kv_dtype = DType::F32;
  void validate() const;  // throws "[plan] ..." naming the bad value
};

// The matmuls of one training step of `c` at o.batch x o.seq tokens a rank, timed now on this
// machine as TrainModel runs them (ops::matmul_forward and matmul_backward, f32 or bf16 as
// o.train.precision): one layer's four (fused QKV, output, fused gate-up, down) and the output
// head, each forward and both gradients (LoRA: the frozen weights get no gradient), a warm-up
// and then the median of 3 timings of each; FLOPs over seconds, the layers counted
// num_hidden_layers times. A rank runs max(1, cores / o.ranks) threads; the ranks that fit the
// cores run their matmuls at once, in step (so each gets what it gets beside the others: memory
// bandwidth and cache are shared), and ranks beyond the cores take turns (the rate falls by the
// share of ranks that run at once).
double measure_rank_gemm_gflops(const LlamaConfig& c, const PlanOptions& o, int cores);

// Bytes the probe holds at once on this machine: the four-layer model's weights, gradients,
// AdamW's moments and activations, for each rank that runs at once.
double rank_step_probe_bytes(const LlamaConfig& c, const PlanOptions& o, int cores);
RankStepFigures measure_rank_step(const LlamaConfig& c, const PlanOptions& o, int cores);

// One way to run the job: memory per rank and predicted time (every figure modeled).
struct ShardPlan {
  ShardMode shard = ShardMode::None;
  bool checkpoint_layers = false;
  ModelStateBytes state;
  ActivationMemory activations;
  size_t comm_buffers = 0;
  size_t total() const { return state.total() + activations.total() + comm_buffers; }
  bool fits = false;
  std::string verdict;  // "fits: X of Y" or "does not fit: needs X, has Y"
  double flops = 0, comm_bytes = 0;
  bool timed = false;  // false when the device publishes no peak of the precision
  // optimizer_s: AdamW's update (memory-bound, kAdamWBytesPerParam; with the step timed, the
  // step's passes over the parameters as timed: AdamW, the gradient norm and zeroing).
  double compute_s = 0, optimizer_s = 0, comm_s = 0, exposed_comm_s = 0, step_s = 0, tokens_per_s = 0;
  // This machine, ZeRO-2 and -3: the windows' pages, given back after use, come back as zeros the
  // next time they are written (src/train/paged.h): the kernel writes each byte a window takes in
  // a step once more, at the rank's memory bandwidth (planned_window_fill_bytes).
  double window_fill_s = 0;
  // This machine, grads and full on several ranks: the core time the communication threads take
  // from compute while collectives run beside it (grads' reduce-scatter, all of full's; plan.cpp,
  // plan_shard).
  double comm_core_s = 0;
  Json to_json() const;
};

struct InferencePlan {
  size_t weights = 0, kv_cache = 0;
  size_t total() const { return weights + kv_cache; }
  bool fits = false;
  std::string verdict;
  bool timed = false;
  double prefill_s = 0;         // the batch's prompts of seq tokens, compute-bound
  double decode_s = 0;          // one token for each sequence at a full cache, memory-bound
  double decode_tokens_per_s = 0;  // across ranks
  Json to_json() const;
};

struct PlanResult {
  std::string model;
  LlamaConfig config;
  int64_t parameters = 0;
  PlanOptions options;
  DeviceSpec device;
  Figure capacity;  // memory per rank: the device's (its share), or the --mem-gb cap where lower
  std::vector<ShardPlan> plans;        // the requested checkpointing, one per shard mode
  std::vector<ShardPlan> alternative;  // the other checkpointing setting, one per shard mode
  std::optional<InferencePlan> inference;
  std::optional<ShardPlan> recommended;  // none when nothing fits
  std::string recommendation;            // a sentence that says why
  std::vector<std::string> notes;        // what the model leaves out for this job
  Json to_json() const;
};

// The memory part of a plan (no device needed): model state, activations of one micro-batch,
// communication buffers, and whether they fit `capacity` bytes per rank, at o.train.precision as
// given (for this machine pass its effective_precision). `genperf train --mem-gb` admits a job
// by it.
ShardPlan plan_memory(const LlamaConfig& c, const PlanOptions& o, double capacity, ShardMode s, bool checkpoint);

// Plans the job of `c` on ranks of device d. Training: every shard mode with and without layer
// checkpointing, and the recommendation: the fastest plan that fits, unsharded when it fits and
// is within kPreferUnshardedWithin of that; when nothing fits, it says what is short.
PlanResult plan_job(const LlamaConfig& c, const DeviceSpec& d, const PlanOptions& o);

}  // namespace genperf

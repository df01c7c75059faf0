// The planner: memory formulas per shard mode, the figures it takes from the training library,
// the recommendation under memory caps, the device catalogue and `genperf plan` end to end. Only
// the model's arithmetic is checked; nothing here is timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/test_util.h"
#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/plan.h"

using namespace genperf;
using genperf::testing::CliResult;
using genperf::testing::run_genperf;
using genperf::testing::TempDir;

namespace {

PlanOptions options(int ranks, int64_t batch, int64_t seq) {
  PlanOptions o;
  o.ranks = ranks;
  o.batch = batch;
  o.seq = seq;
  return o;
}

// A machine of 400 GFLOP/s f32, 80 GB/s and 16 GB.
MachineFigures machine() {
  MachineFigures m;
  m.precision = Precision::F32;
  m.gemm_peak_gflops = 400;
  m.memory_gbs = 80;
  m.memory_bytes = 16e9;
  return m;
}

const ShardPlan& find(const std::vector<ShardPlan>& plans, ShardMode s) {
  for (const ShardPlan& p : plans)
    if (p.shard == s) return p;
  throw Error("no such plan");
}

}  // namespace

TEST(Plan, ModelStatePerShardMode) {
  const int64_t P = 1000;
  const int N = 4;
  const size_t p = size_t(P);
  EXPECT_EQ(planned_model_state(P, ShardMode::None, N).total(), 16 * p);
  EXPECT_EQ(planned_model_state(P, ShardMode::Optimizer, N).total(), 8 * p + 8 * p / N);
  EXPECT_EQ(planned_model_state(P, ShardMode::Grads, N).total(), 4 * p + 12 * p / N);
  EXPECT_EQ(planned_model_state(P, ShardMode::Full, N).total(), 16 * p / N);
  const ModelStateBytes z1 = planned_model_state(P, ShardMode::Optimizer, N);
  EXPECT_EQ(z1.params, 4 * p);
  EXPECT_EQ(z1.grads, 4 * p);
  EXPECT_EQ(z1.optimizer, 8 * p / N);
  // One rank holds everything in every mode; an uneven split counts the largest rank's share.
  for (ShardMode s : kShardModes) EXPECT_EQ(planned_model_state(P, s, 1).total(), 16 * p) << shard_mode_name(s);
  EXPECT_EQ(planned_model_state(1001, ShardMode::Full, 4).total(), 16u * 251);
  EXPECT_THROW(planned_model_state(P, ShardMode::None, 0), Error);
}

// The share of a shared device's peak a rank gets: 1/N without a per-core figure; with one, the
// share its cores / N threads reach (one core's share, rising linearly to 1 with all cores), and
// with more ranks than cores, one core's share split among the ranks that time-share it. A
// catalogued device is one per rank.
TEST(Plan, RanksGetThePeakTheirThreadsReach) {
  DeviceSpec d;
  d.shared_by_ranks = true;
  EXPECT_DOUBLE_EQ(d.rank_peak_share(1), 1.0);
  EXPECT_DOUBLE_EQ(d.rank_peak_share(4), 0.25);
  d.cores = 2, d.one_core_share = 0.6;
  EXPECT_DOUBLE_EQ(d.rank_peak_share(1), 1.0);
  EXPECT_DOUBLE_EQ(d.rank_peak_share(2), 0.6);
  EXPECT_DOUBLE_EQ(d.rank_peak_share(4), 0.3);
  d.cores = 8, d.one_core_share = 0.15;
  EXPECT_DOUBLE_EQ(d.rank_peak_share(2), 0.15 + 0.85 * 3.0 / 7.0);  // 4 threads a rank
  EXPECT_DOUBLE_EQ(d.rank_peak_share(8), 0.15);
  EXPECT_DOUBLE_EQ(d.rank_peak_share(16), 0.075);
  EXPECT_DOUBLE_EQ(catalog_device("h100").rank_peak_share(4), 1.0);
}

TEST(Plan, CommunicationBytesAndBuffers) {
  const int64_t P = 1200;
  for (ShardMode s : {ShardMode::None, ShardMode::Optimizer, ShardMode::Grads})
    EXPECT_DOUBLE_EQ(planned_comm_bytes(P, s, 4), 2.0 * 1200 * 3 / 4 * 4) << shard_mode_name(s);
  EXPECT_DOUBLE_EQ(planned_comm_bytes(P, ShardMode::Full, 4), 3.0 * 1200 * 3 / 4 * 4);
  EXPECT_DOUBLE_EQ(planned_comm_bytes(P, ShardMode::Full, 1), 0.0);

  const LlamaConfig c = preset_config("110m");
  const size_t state = size_t(c.num_parameters()) * 4, bucket = size_t(25) << 20;
  ASSERT_GT(state, bucket);
  // Buckets are reduced in place: no buffer beyond the gradients.
  EXPECT_EQ(planned_comm_buffer_bytes(c, ShardMode::None, 4, bucket), 0u);
  EXPECT_EQ(planned_comm_buffer_bytes(c, ShardMode::Optimizer, 4, bucket), 0u);
  EXPECT_EQ(planned_comm_buffer_bytes(c, ShardMode::Grads, 1, bucket), 0u);
  const int64_t layer = c.hidden_size * (c.q_dim() + 2 * c.kv_dim()) + c.q_dim() * c.hidden_size +
                        3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size;
  const int64_t unit = std::max(layer, c.vocab_size * c.hidden_size);
  EXPECT_EQ(largest_unit_params(c), unit);
  // The gradient window: one bucket takes every gradient, held whole until the embedding's are
  // written. With 25 MiB buckets, the peak is when the embedding's gradients are written, beside
  // the buckets still reducing (at most DistOptions::inflight_buckets of them and the part of
  // one not yet started).
  const double E = double(c.vocab_size * c.hidden_size) * 4;
  EXPECT_EQ(planned_comm_buffer_bytes(c, ShardMode::Grads, 4, 2 * state), state);
  const double grads = double(planned_comm_buffer_bytes(c, ShardMode::Grads, 4, bucket));
  EXPECT_GE(grads, E);
  EXPECT_LE(grads, E + double(DistOptions{}.inflight_buckets + 1) * double(bucket));
  // Fully sharded, the peak is the head's backward: its parameters and the last layer's
  // (prefetched) beside its gradients (the final norm's and the head's).
  // (Mpi.PlannedWindowsHoldWhatTrainingHolds measures it.)
  const double head = double(c.hidden_size + c.vocab_size * c.hidden_size);
  EXPECT_EQ(planned_comm_buffer_bytes(c, ShardMode::Full, 4, bucket), size_t(4 * (2 * head + double(layer))));
}

// LoRA: the shard modes' formulas over the adapters' P parameters; the frozen base is 4 F bytes
// a rank, 4 F / N fully sharded, which then also gathers it in forward and backward.
TEST(Plan, LoraShardsTheAdaptersAndFullShardsTheBase) {
  const LlamaConfig c = preset_config("110m");
  PlanOptions o = options(4, 1, 128);
  LoraConfig lc;
  lc.rank = 8;
  o.lora = lc;
  const int64_t F = c.num_parameters(), P = lora_parameters(c, lc);
  // q, k, v and o of every layer: r (in + out) each
  EXPECT_EQ(P, int64_t(c.num_hidden_layers) * lc.rank *
                   ((c.hidden_size + c.q_dim()) + 2 * (c.hidden_size + c.kv_dim()) + (c.q_dim() + c.hidden_size)));
  const size_t n = 4, f = size_t(F) * 4;
  for (ShardMode s : kShardModes) {
    const ShardPlan p = plan_memory(c, o, 1e12, s, false);
    const ModelStateBytes want = planned_model_state(P, s, 4);
    EXPECT_EQ(p.state.params, want.params) << shard_mode_name(s);
    EXPECT_EQ(p.state.grads, want.grads) << shard_mode_name(s);
    EXPECT_EQ(p.state.optimizer, want.optimizer) << shard_mode_name(s);
    EXPECT_EQ(p.state.frozen, s == ShardMode::Full ? (size_t(F) + n - 1) / n * 4 : f) << shard_mode_name(s);
    EXPECT_EQ(p.activations.total(), TrainModel::activation_memory(c, o.train, 1, 128, &lc, true).total());
    EXPECT_GT(p.activations.lora, 0u);
  }
  // One rank: nothing is sharded, the base included.
  o.ranks = 1;
  EXPECT_EQ(plan_memory(c, o, 1e12, ShardMode::Full, false).state.frozen, f);
  // The wire: the adapters' volume, and the base gathered twice when fully sharded.
  o.ranks = 4;
  const PlanResult r = plan_job(c, catalog_device("h100"), o);
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::None).comm_bytes, planned_comm_bytes(P, ShardMode::None, 4));
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::Full).comm_bytes,
                   planned_comm_bytes(P, ShardMode::Full, 4) + 2.0 * double(F) * 3 / 4 * 4);
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::None).flops, train_step_flops(c, 1, 128, &lc));
}

TEST(Plan, ActivationsAndFlopsComeFromTheTrainingLibrary) {
  const LlamaConfig c = preset_config("default");
  PlanOptions o = options(2, 2, 256);
  o.train.precision = Precision::Bf16;
  const PlanResult r = plan_job(c, catalog_device("a100"), o);
  ASSERT_EQ(r.plans.size(), 4u);
  ASSERT_EQ(r.alternative.size(), 4u);
  TrainOptions t{AttentionMode::Flash, false, Precision::Bf16};
  // An A100 runs bf16 whatever this CPU has: its plan holds the bf16 operands.
  const ActivationMemory want = TrainModel::activation_memory(c, t, 2, 256, nullptr, true);
  t.checkpoint_layers = true;
  const ActivationMemory want_ckpt = TrainModel::activation_memory(c, t, 2, 256, nullptr, true);
  for (const ShardPlan& p : r.plans) {
    EXPECT_FALSE(p.checkpoint_layers);
    EXPECT_EQ(p.activations.total(), want.total());
    EXPECT_EQ(p.activations.bf16_operands, want.bf16_operands);
    EXPECT_GT(p.activations.bf16_operands, 0u);  // mixed precision keeps bf16 operand copies
    EXPECT_DOUBLE_EQ(p.flops, train_step_flops(c, 2, 256));
    EXPECT_EQ(p.total(), p.state.total() + p.activations.total() + p.comm_buffers);
  }
  for (const ShardPlan& p : r.alternative) {
    EXPECT_TRUE(p.checkpoint_layers);
    EXPECT_EQ(p.activations.total(), want_ckpt.total());
    EXPECT_LT(p.activations.total(), want.total());  // checkpointing keeps less
    EXPECT_GT(p.flops, train_step_flops(c, 2, 256));  // and recomputes the layers' forward
  }
  // The recomputed forward: a third of the step, less the output head's 2 V d per token.
  const double head = 2.0 * double(c.vocab_size * c.hidden_size) * 512;
  EXPECT_DOUBLE_EQ(planned_step_flops(c, 2, 256, true), train_step_flops(c, 2, 256) * 4 / 3 - head);
}

TEST(Plan, StepTimeModel) {
  const LlamaConfig c = preset_config("default");
  const DeviceSpec& h100 = catalog_device("h100");
  PlanOptions o = options(4, 2, 256);
  o.overlap = PlanOverlap::None;
  const PlanResult r = plan_job(c, h100, o);
  const int64_t P = c.num_parameters();
  for (const ShardPlan& p : r.plans) {
    ASSERT_TRUE(p.timed);
    EXPECT_DOUBLE_EQ(p.compute_s, p.flops / (67e12 * 0.7));  // f32 runs at the fp32 peak
    EXPECT_DOUBLE_EQ(p.comm_s, p.comm_bytes / 450e9);
    EXPECT_DOUBLE_EQ(p.exposed_comm_s, p.comm_s);  // nothing overlaps
    EXPECT_DOUBLE_EQ(p.window_fill_s, 0.0);  // an accelerator's windows are not paged
    EXPECT_DOUBLE_EQ(p.step_s, p.compute_s + p.optimizer_s + p.exposed_comm_s);
    EXPECT_DOUBLE_EQ(p.tokens_per_s, 4.0 * 2 * 256 / p.step_s);
  }
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::None).optimizer_s, 28.0 * double(P) / 3350e9);
  // Overlap hides buckets behind backward: never more exposed than without it.
  o.overlap = PlanOverlap::Buckets;
  const PlanResult hidden = plan_job(c, h100, o);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LE(hidden.plans[i].exposed_comm_s, r.plans[i].exposed_comm_s);
    EXPECT_GT(hidden.plans[i].exposed_comm_s, 0.0);  // the last bucket, or the all-gather after the step
  }
}

TEST(Plan, RecommendsUnshardedWhenItFits) {
  // Enough work per rank that the sharded modes' savings (AdamW on 1/N, less exposed) stay small.
  const PlanResult r = plan_job(preset_config("110m"), catalog_device("h100"), options(4, 4, 512));
  for (const ShardPlan& p : r.plans) EXPECT_TRUE(p.fits) << shard_mode_name(p.shard);
  ASSERT_TRUE(r.recommended);
  EXPECT_EQ(r.recommended->shard, ShardMode::None);
  EXPECT_FALSE(r.recommended->checkpoint_layers);
  EXPECT_NE(r.recommendation.find("--shard none"), std::string::npos) << r.recommendation;
  // On one rank every mode holds and does the same: unsharded, without recompute.
  const PlanResult one = plan_job(preset_config("tiny"), catalog_device("gaudi3"), [] {
    PlanOptions o = options(1, 1, 64);
    o.train.precision = Precision::Bf16;
    return o;
  }());
  ASSERT_TRUE(one.recommended);
  EXPECT_EQ(one.recommended->shard, ShardMode::None);
  EXPECT_FALSE(one.recommended->checkpoint_layers);
}

TEST(Plan, TightMemoryCapRecommendsFullSharding) {
  // 110m at a short sequence: model state dominates, so only sharding everything fits.
  const LlamaConfig c = preset_config("110m");
  PlanOptions o = options(4, 1, 64);
  const PlanResult loose = plan_job(c, catalog_device("h100"), o);
  const size_t full = find(loose.plans, ShardMode::Full).total();
  size_t others = SIZE_MAX;
  for (const auto* set : {&loose.plans, &loose.alternative})
    for (const ShardPlan& p : *set)
      if (p.shard != ShardMode::Full) others = std::min(others, p.total());
  ASSERT_LT(full, others);
  o.memory_cap_bytes = double(full + others) / 2;
  const PlanResult r = plan_job(c, catalog_device("h100"), o);
  EXPECT_EQ(r.capacity.kind, FigureKind::Given);
  ASSERT_TRUE(r.recommended);
  EXPECT_EQ(r.recommended->shard, ShardMode::Full);
  EXPECT_FALSE(r.recommended->checkpoint_layers);  // fits without the recompute, so faster
  for (const ShardPlan& p : r.plans) {
    if (p.shard == ShardMode::Full) continue;
    EXPECT_FALSE(p.fits);
    // "does not fit: needs X GB, has Y GB", both figures named.
    EXPECT_EQ(p.verdict.rfind("does not fit: needs ", 0), 0u) << p.verdict;
    EXPECT_NE(p.verdict.find(", has "), std::string::npos) << p.verdict;
  }
  EXPECT_NE(r.recommendation.find("unsharded does not fit"), std::string::npos) << r.recommendation;
}

TEST(Plan, SuggestsCheckpointingOrSaysNothingFits) {
  // Activations dominate (naive attention, long sequences): only layer checkpointing fits.
  const LlamaConfig c = preset_config("tiny");
  PlanOptions o = options(2, 4, 512);
  o.train.attention = AttentionMode::Naive;
  const PlanResult loose = plan_job(c, catalog_device("a100"), o);
  size_t ckpt = SIZE_MAX, plain = SIZE_MAX;
  for (const ShardPlan& p : loose.alternative) ckpt = std::min(ckpt, p.total());
  for (const ShardPlan& p : loose.plans) plain = std::min(plain, p.total());
  ASSERT_LT(ckpt, plain);
  o.memory_cap_bytes = double(ckpt + plain) / 2;
  const PlanResult r = plan_job(c, catalog_device("a100"), o);
  for (const ShardPlan& p : r.plans) EXPECT_FALSE(p.fits);
  ASSERT_TRUE(r.recommended);
  EXPECT_TRUE(r.recommended->checkpoint_layers);
  EXPECT_NE(r.recommendation.find("--checkpoint-layers"), std::string::npos) << r.recommendation;

  o.memory_cap_bytes = double(ckpt) / 2;
  const PlanResult none = plan_job(c, catalog_device("a100"), o);
  EXPECT_FALSE(none.recommended);
  EXPECT_EQ(none.recommendation.rfind("nothing fits", 0), 0u) << none.recommendation;
}

TEST(Plan, CatalogueHasEverySourcedDevice) {
  const std::vector<std::string> want = {"v100", "a100", "h100", "h200", "gaudi1", "gaudi2", "gaudi3"};
  ASSERT_EQ(device_catalog().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const DeviceSpec& d = device_catalog()[i];
    EXPECT_EQ(d.id, want[i]);
    EXPECT_FALSE(d.name.empty());
    EXPECT_NE(d.source.find("https://"), std::string::npos) << d.id;
    EXPECT_FALSE(d.link.empty()) << d.id;
    for (const Figure& f : {d.memory_bytes, d.memory_gbs, d.link_gbs}) {
      EXPECT_GT(f.value, 0) << d.id;
      EXPECT_EQ(f.kind, FigureKind::Modeled) << d.id;
    }
    ASSERT_EQ(d.peaks().size(), 5u);
    for (const auto& [type, f] : d.peaks())
      if (*f) {
        EXPECT_GT((*f)->value, 0) << d.id << " " << type;
        EXPECT_EQ((*f)->kind, FigureKind::Modeled) << d.id << " " << type;
      }
    // Every device but the first Gaudi publishes a dense bf16 or fp16 peak.
    if (d.id != "gaudi1") {
      EXPECT_TRUE(d.bf16 || d.fp16) << d.id;
    }
  }
  const DeviceSpec& g1 = catalog_device("gaudi1");
  EXPECT_FALSE(g1.bf16);  // not clearly published: absent, and the note says so
  EXPECT_NE(g1.note.find("bf16"), std::string::npos);
  EXPECT_DOUBLE_EQ(catalog_device("H100").bf16->value, 989.4);  // case-insensitive, dense figure
  EXPECT_DOUBLE_EQ(catalog_device("h200").memory_bytes.value, 141e9);
  try {
    catalog_device("tpu");
    ADD_FAILURE() << "an unknown device was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[plan] unknown device 'tpu'"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu, v100, a100, h100, h200, gaudi1, gaudi2, gaudi3"), std::string::npos) << m;
  }
}

TEST(Plan, UnpublishedPeakPlansMemoryOnly) {
  PlanOptions o = options(2, 1, 128);
  o.train.precision = Precision::Bf16;  // V100 has no bf16
  const PlanResult r = plan_job(preset_config("tiny"), catalog_device("v100"), o);
  for (const ShardPlan& p : r.plans) EXPECT_FALSE(p.timed);
  ASSERT_TRUE(r.recommended);
  EXPECT_EQ(r.recommended->shard, ShardMode::None);
  EXPECT_NE(r.recommendation.find("no step time"), std::string::npos) << r.recommendation;
}

TEST(Plan, ThisMachineIsLabelledMeasured) {
  MachineFigures m = machine();
  const DeviceSpec d = this_machine(m);
  EXPECT_EQ(d.id, "cpu");
  ASSERT_TRUE(d.fp32);
  EXPECT_DOUBLE_EQ(d.fp32->value, 0.4);
  EXPECT_EQ(d.fp32->kind, FigureKind::Measured);
  EXPECT_FALSE(d.bf16);  // only the precision asked for is measured
  EXPECT_EQ(d.memory_gbs.kind, FigureKind::Measured);
  EXPECT_EQ(d.memory_bytes.kind, FigureKind::Measured);
  EXPECT_DOUBLE_EQ(d.link_gbs.value, 80 / kShmPassesPerByte);
  EXPECT_EQ(d.link_gbs.kind, FigureKind::Modeled);
  // Its ranks share it: each gets half of the peak, bandwidth, link and memory on two ranks.
  EXPECT_TRUE(d.shared_by_ranks);
  PlanOptions o = options(2, 1, 64);
  o.overlap = PlanOverlap::None;
  const LlamaConfig c = preset_config("tiny");
  const PlanResult r = plan_job(c, d, o);
  EXPECT_DOUBLE_EQ(r.capacity.value, 8e9);
  EXPECT_EQ(r.capacity.kind, FigureKind::Measured);
  const ShardPlan& p = find(r.plans, ShardMode::None);
  EXPECT_DOUBLE_EQ(p.compute_s, p.flops / (0.2e12 * 0.7));
  EXPECT_DOUBLE_EQ(p.comm_s, p.comm_bytes / (40e9 / kShmPassesPerByte));
  EXPECT_DOUBLE_EQ(p.optimizer_s, kAdamWBytesPerParam * double(c.num_parameters()) / 40e9);
  // The windows refill as zeros each step: the gradients once (grads), parameters twice and
  // gradients once (full), at the rank's bandwidth.
  const double P = double(c.num_parameters());
  EXPECT_DOUBLE_EQ(p.window_fill_s, 0.0);
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::Optimizer).window_fill_s, 0.0);
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::Grads).window_fill_s, 4 * P / 40e9);
  const ShardPlan& full = find(r.plans, ShardMode::Full);
  EXPECT_DOUBLE_EQ(full.window_fill_s, 12 * P / 40e9);
  EXPECT_DOUBLE_EQ(full.step_s, full.compute_s + full.optimizer_s + full.exposed_comm_s + full.window_fill_s +
                                    full.comm_core_s);
  // Grads and full reduce during backward on cores the ranks fill: nothing hides, and the core
  // time of the collectives beside compute is taken from it (grads: the reduce-scatter, half of
  // its traffic on the modeled link; full: all; a core's share a rank: the machine's cores are
  // unknown here, so 1/N).
  for (ShardMode s : {ShardMode::Grads, ShardMode::Full}) {
    const ShardPlan& w = find(r.plans, s);
    EXPECT_DOUBLE_EQ(w.exposed_comm_s, w.comm_s);
    EXPECT_DOUBLE_EQ(w.comm_core_s, w.comm_s / 2 / (s == ShardMode::Grads ? 2 : 1));
  }
  EXPECT_DOUBLE_EQ(p.comm_core_s, 0.0);
  EXPECT_DOUBLE_EQ(find(r.plans, ShardMode::Optimizer).comm_core_s, 0.0);
  DeviceSpec two = d;
  two.cores = 2;
  EXPECT_DOUBLE_EQ(find(plan_job(c, two, o).plans, ShardMode::Full).comm_core_s,
                   find(plan_job(c, two, o).plans, ShardMode::Full).comm_s);  // a core a rank
  o.ranks = 4;
  EXPECT_DOUBLE_EQ(find(plan_job(c, two, o).plans, ShardMode::Full).comm_core_s,
                   find(plan_job(c, two, o).plans, ShardMode::Full).comm_s / 2);  // two ranks a core
  EXPECT_DOUBLE_EQ(planned_window_fill_bytes(100, 1000, ShardMode::Full, 2, true), 1200.0 + 8000.0);
  EXPECT_DOUBLE_EQ(planned_window_fill_bytes(100, 1000, ShardMode::Full, 1, true), 0.0);
  m.memory_gbs = 0;
  EXPECT_THROW(this_machine(m), Error);
  EXPECT_GT(available_memory_bytes(), size_t(0));
}

// The job's own matmuls, timed: a rank's rate replaces its share of the 2048^3 peak, and falls
// when ranks outnumber the cores (they take turns).
TEST(Plan, ComputeAtTheRateOfTheJobsMatmuls) {
  const MachineFigures m = machine();
  const DeviceSpec d = this_machine(m);
  const LlamaConfig c = preset_config("tiny");
  PlanOptions o = options(2, 1, 32);
  o.overlap = PlanOverlap::None;
  o.rank_gemm_gflops = 12.5;
  const PlanResult r = plan_job(c, d, o);
  for (const ShardPlan& p : r.plans) EXPECT_DOUBLE_EQ(p.compute_s, p.flops / (12.5e9 * 0.7)) << shard_mode_name(p.shard);
  Json j = r.to_json();
  ASSERT_TRUE(j["assumptions"]["rank_gemm_gflops"].is_object());
  EXPECT_EQ(j["assumptions"]["rank_gemm_gflops"]["kind"].as_string(), "measured");

  // Four ranks on one core: each gets a quarter of it, well under one rank's rate. The matmuls
  // take microseconds, so a busy machine can slow any one probe several times over: the medians
  // of five probes of each, alternated, are compared.
  std::vector<double> ones, shareds;
  for (int i = 0; i < 5; ++i) {
    ones.push_back(measure_rank_gemm_gflops(c, options(1, 1, 32), 1));
    shareds.push_back(measure_rank_gemm_gflops(c, options(4, 1, 32), 1));
  }
  std::sort(ones.begin(), ones.end());
  std::sort(shareds.begin(), shareds.end());
  const double one = ones[2], shared = shareds[2];
  EXPECT_GT(one, 0.1);
  EXPECT_LT(one, 1e5);
  EXPECT_LT(shared, 0.5 * one);
  o.rank_gemm_gflops = -1;
  EXPECT_THROW(o.validate(), Error);
}

// The job's step, timed: compute is its layers and the rest (the recompute of the layers'
// forward under checkpointing), the passes over the parameters are each mode's, and an efficiency
// applies only where given.
TEST(Plan, ComputeFromTheTimedStep) {
  const DeviceSpec d = this_machine(machine());
  const LlamaConfig c = preset_config("tiny");
  const double L = double(c.num_hidden_layers);
  RankStepFigures t;
  t.layer_forward_s = 0.01, t.layer_backward_s = 0.02, t.rest_forward_s = 0.003, t.rest_backward_s = 0.005;
  t.adamw_s_per_param = 1e-9, t.zero_s_per_param = 2e-10, t.norm_s_per_param = 3e-10;
  PlanOptions o = options(2, 1, 32);
  o.overlap = PlanOverlap::None;
  o.rank_step = t;
  o.rank_gemm_gflops = 12.5;  // not used beside a timed step
  const PlanResult r = plan_job(c, d, o);
  const double P = double(c.num_parameters()), half = double((c.num_parameters() + 1) / 2);
  for (const ShardPlan& p : r.plans) {
    SCOPED_TRACE(shard_mode_name(p.shard));
    EXPECT_DOUBLE_EQ(p.compute_s, 0.003 + 0.005 + L * 0.03);
    const bool sharded = p.shard != ShardMode::None, window = p.shard == ShardMode::Grads || p.shard == ShardMode::Full;
    const double own = sharded ? half : P;
    EXPECT_NEAR(p.optimizer_s, own * 1e-9 + (sharded ? half : P) * 3e-10 + (window ? half : P) * 2e-10, 1e-15);
  }
  for (const ShardPlan& p : r.alternative) EXPECT_DOUBLE_EQ(p.compute_s, 0.003 + 0.005 + L * 0.04);
  const Json j = r.to_json();
  EXPECT_EQ(j.at("assumptions").at("rank_step").at("layer_forward_s").at("kind").as_string(), "measured");
  o.efficiency = 0.5;
  o.efficiency_given = true;
  EXPECT_DOUBLE_EQ(plan_job(c, d, o).plans[0].compute_s, 2 * (0.003 + 0.005 + L * 0.03));
  o.rank_step->rest_backward_s = -1;
  EXPECT_THROW(o.validate(), Error);

  // The probe on the tests' tiny model: every figure positive, and four ranks on one core take
  // turns (each rank's step is at least twice one rank's; four times, less the noise).
  const RankStepFigures one = measure_rank_step(c, options(1, 1, 32), 1);
  for (double v : {one.forward_s(2), one.backward_s(2, false), one.adamw_s_per_param, one.zero_s_per_param,
                   one.norm_s_per_param})
    EXPECT_GT(v, 0);
  EXPECT_GT(one.layer_forward_s + one.layer_backward_s, 0);
  const RankStepFigures four = measure_rank_step(c, options(4, 1, 32), 1);
  EXPECT_GT(four.forward_s(2) + four.backward_s(2, false), 2 * (one.forward_s(2) + one.backward_s(2, false)));
  EXPECT_GT(rank_step_probe_bytes(c, options(4, 1, 32), 4), 4 * 4.0 * double(preset_config("tiny").hidden_size));
}

TEST(Plan, InferenceWeightsAndKvCache) {
  const LlamaConfig c = preset_config("default");
  PlanOptions o = options(1, 3, 1024);
  o.inference = true;
  o.train.precision = Precision::Bf16;
  const PlanResult r = plan_job(c, catalog_device("gaudi2"), o);
  ASSERT_TRUE(r.inference);
  EXPECT_EQ(r.inference->weights, size_t(c.num_parameters()) * 2);  // bf16
  EXPECT_EQ(r.inference->kv_cache, size_t(2 * c.num_hidden_layers * c.kv_dim() * 1024 * 3) * 4);  // f32
  EXPECT_TRUE(r.inference->fits);
  ASSERT_TRUE(r.inference->timed);
  EXPECT_DOUBLE_EQ(r.inference->decode_s, double(r.inference->total()) / 2450e9);
  EXPECT_TRUE(r.plans.empty());
}

TEST(Plan, OptionsAreChecked) {
  const LlamaConfig c = preset_config("tiny");
  PlanOptions o = options(0, 1, 64);
  EXPECT_THROW(plan_job(c, catalog_device("h100"), o), Error);
  o = options(1, 1, 64);
  o.efficiency = 1.5;
  EXPECT_THROW(plan_job(c, catalog_device("h100"), o), Error);
  EXPECT_EQ(parse_shard_mode("grads"), ShardMode::Grads);
  EXPECT_THROW(parse_shard_mode("zero2"), Error);
  EXPECT_THROW(parse_plan_overlap("always"), Error);
}

// --comm-overlap auto: on where the ranks' threads leave the node a core, off where they fill it.
TEST(Plan, CommOverlapAutoNeedsASpareCore) {
  EXPECT_EQ(parse_comm_overlap("auto"), CommOverlap::Auto);
  EXPECT_THROW(parse_comm_overlap("yes"), Error);
  const ShardMode none = ShardMode::None;
  EXPECT_FALSE(resolve_comm_overlap(CommOverlap::Auto, none, 2, 1, 2, 2));  // 2 ranks x 1 thread on 2 cores
  EXPECT_FALSE(resolve_comm_overlap(CommOverlap::Auto, ShardMode::Optimizer, 4, 1, 2, 2));  // oversubscribed
  EXPECT_TRUE(resolve_comm_overlap(CommOverlap::Auto, none, 2, 3, 8, 8));   // 6 of 8 cores busy
  EXPECT_FALSE(resolve_comm_overlap(CommOverlap::Auto, none, 2, 3, 8, 3));  // each rank bound to its 3 cores
  // Sharded gradients drain their window during backward: always, unless told otherwise.
  EXPECT_TRUE(resolve_comm_overlap(CommOverlap::Auto, ShardMode::Grads, 2, 1, 2, 2));
  EXPECT_TRUE(resolve_comm_overlap(CommOverlap::Auto, ShardMode::Full, 4, 1, 2, 2));
  EXPECT_TRUE(resolve_comm_overlap(CommOverlap::On, none, 4, 1, 2, 2));
  EXPECT_FALSE(resolve_comm_overlap(CommOverlap::Off, ShardMode::Full, 1, 1, 8, 8));
}

TEST(PlanCli, CatalogueJsonIsLabelledModeled) {
  TempDir tmp("plan-cli");
  const CliResult r = run_genperf("plan --model random:tiny --device h100 --ranks 4 --json --out " + (tmp / "plan.json"), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("ranks").as_int(), 4);
  EXPECT_EQ(j.at("device").at("id").as_string(), "h100");
  EXPECT_EQ(j.at("device").at("memory_bytes").at("kind").as_string(), "modeled");
  EXPECT_EQ(j.at("device").at("memory_gbs").at("kind").as_string(), "modeled");
  EXPECT_EQ(j.at("device").at("link_gbs").at("kind").as_string(), "modeled");
  EXPECT_EQ(j.at("device").at("peak_tflops").at("fp32").at("kind").as_string(), "modeled");
  EXPECT_FALSE(j.at("device").at("source").as_string().empty());
  ASSERT_EQ(j.at("plans").as_array().size(), 4u);
  for (const Json& p : j.at("plans").as_array()) {
    EXPECT_EQ(p.at("kind").as_string(), "modeled");
    EXPECT_GT(p.at("step_s").as_number(), 0);
  }
  EXPECT_TRUE(j.at("recommended").find("step_s"));
  EXPECT_FALSE(j.at("recommendation").as_string().empty());
  EXPECT_EQ(Json::parse(genperf::testing::read_bytes(tmp / "plan.json")).at("ranks").as_int(), 4);

  const CliResult text = run_genperf("plan --model random:tiny --device gaudi3 --precision bf16 --sweep", tmp);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("1835 TFLOPS [modeled]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("4 ranks"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("recommend"), std::string::npos) << text.out;
}

TEST(PlanCli, BadDeviceNamesTheValidOnes) {
  TempDir tmp("plan-cli");
  const CliResult r = run_genperf("plan --model random:tiny --device tpu9", tmp);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown device 'tpu9'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("h100"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gaudi3"), std::string::npos) << r.err;
  EXPECT_EQ(run_genperf("plan --model random:tiny --device h100 --shard zero9", tmp).code, 1);
}

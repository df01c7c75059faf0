// The benchmark harness and entry points: statistics, provenance, and that each benchmark runs
// and fills its accounting (no timing is asserted: timing is not a unit test).
#include <gtest/gtest.h>

#include "bench/peaks.h"
#include "genperf/bench.h"
#include "genperf/bench_train.h"
#include "genperf/error.h"
#include "genperf/llama.h"

using namespace genperf;

TEST(Bench, StatsMedianMinMax) {
  Stats s = Stats::of({3.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  EXPECT_EQ(s.samples, (std::vector<double>{3.0, 1.0, 2.0, 10.0}));  // run order kept
  EXPECT_DOUBLE_EQ(Stats::of({4.0, 1.0, 7.0}).median, 4.0);
  EXPECT_THROW(Stats::of({}), Error);
  int calls = 0;
  Stats m = measure([&] { ++calls; }, 2, 5);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(m.samples.size(), 5u);
}

TEST(Bench, ProvenanceNamesTheMachine) {
  const Json p = provenance("genperf test").to_json();
  EXPECT_FALSE(p.at("cpu").as_string().empty());
  EXPECT_GE(p.at("threads").as_int(), 1);
  EXPECT_EQ(p.at("command").as_string(), "genperf test");
  EXPECT_GT(peak_rss_bytes(), 0u);
}

TEST(Bench, InferReportsEveryFigure) {
  LlamaModel m(random_checkpoint(preset_config("tiny"), DType::BF16, 1));
  InferBenchOptions o;
  o.prefill_lengths = {8, 24};
  o.decode_prompt = 8;
  o.decode_tokens = 3;
  o.reps = 2;
  o.measure_peaks = false;
  const Json r = bench_infer(m, o);
  ASSERT_EQ(r.at("prefill").as_array().size(), 2u);
  EXPECT_EQ(r.at("prefill").as_array()[1].at("tokens").as_int(), 24);
  EXPECT_DOUBLE_EQ(r.at("prefill").as_array()[0].at("gflops").as_number() > 0, true);
  EXPECT_EQ(r.at("decode").at("seconds_per_token").at("n").as_int(), 2);
  EXPECT_EQ(size_t(r.at("memory").at("weights_bytes").as_int()), m.weight_bytes());
  EXPECT_GT(r.at("memory").at("kv_cache_bytes").as_int(), 0);
  o.prefill_lengths = {100000};
  EXPECT_THROW(bench_infer(m, o), Error);  // beyond the model's context
}

// The floor rules (BENCHMARKING.md, rule 8): the logic, never a timing.
TEST(Bench, FigureAboveItsFloorIsFlagged) {
  EXPECT_FALSE(bench::against_floor(50.0, 80.0).exceeded);
  EXPECT_DOUBLE_EQ(bench::against_floor(50.0, 80.0).fraction, 0.625);
  EXPECT_FALSE(bench::against_floor(80.0, 80.0).exceeded);  // at the floor, not past it
  const bench::FloorFraction f = bench::against_floor(120.0, 80.0);
  EXPECT_TRUE(f.exceeded);
  EXPECT_DOUBLE_EQ(f.fraction, 1.5);
  EXPECT_THROW(bench::against_floor(1.0, 0.0), Error);
}

TEST(Bench, CacheFitAndProbeSizes) {
  EXPECT_EQ(bench::parse_cache_size("32768K"), size_t(32) << 20);
  EXPECT_EQ(bench::parse_cache_size("1M\n"), size_t(1) << 20);
  EXPECT_EQ(bench::parse_cache_size("512"), 512u);
  EXPECT_EQ(bench::parse_cache_size("big"), 0u);
  EXPECT_EQ(bench::parse_cache_size("12Q"), 0u);
  const size_t llc = size_t(32) << 20;
  EXPECT_TRUE(bench::fits_in_cache(13.6e6, llc));    // the default model's weights and cache
  EXPECT_FALSE(bench::fits_in_cache(574e6, llc));    // the 110m shape in f32
  EXPECT_TRUE(bench::fits_in_cache(double(llc), llc));
  EXPECT_FALSE(bench::fits_in_cache(1.0, 0));        // unknown size: never assumed to fit
  // The memory probe streams from memory: 1 GiB or 2x the LLC, within a quarter of the memory.
  EXPECT_EQ(bench::memory_probe_bytes(llc, 0), size_t(1) << 30);
  EXPECT_EQ(bench::memory_probe_bytes(size_t(1) << 30, 0), size_t(2) << 30);
  EXPECT_EQ(bench::memory_probe_bytes(size_t(1) << 30, size_t(4) << 30), size_t(1) << 30);
  EXPECT_GT(bench::memory_probe_bytes(), 0u);
}

TEST(Bench, PrefillPeakOfTheWeightsComputeType) {
  using bench::GemmCompute;
  EXPECT_EQ(bench::gemm_compute_type(DType::F32, false, true), GemmCompute::F32);
  EXPECT_EQ(bench::gemm_compute_type(DType::BF16, false, true), GemmCompute::BF16);
  EXPECT_EQ(bench::gemm_compute_type(DType::BF16, false, false), GemmCompute::F32);  // converted to f32
  EXPECT_EQ(bench::gemm_compute_type(DType::F16, false, true), GemmCompute::F32);
  EXPECT_EQ(bench::gemm_compute_type(DType::Q4_K, true, true), GemmCompute::Int8);
  EXPECT_EQ(bench::gemm_compute_type(DType::Q4_K, false, true), GemmCompute::BF16);  // decoded panels
  EXPECT_EQ(bench::gemm_compute_type(DType::Q4_K, false, false), GemmCompute::F32);
  EXPECT_EQ(bench::fastest({GemmCompute::BF16, GemmCompute::Int8, GemmCompute::F32}), GemmCompute::Int8);
  EXPECT_EQ(bench::fastest({GemmCompute::F32, GemmCompute::BF16}), GemmCompute::BF16);
  EXPECT_STREQ(bench::gemm_compute_name(GemmCompute::Int8), "int8");
  EXPECT_EQ(bench::gemm_compute_type(DType::F32), GemmCompute::F32);  // asks the backend
}

// With the floors measured, every fraction comes with its flag, and the record says which floor
// decode was held to; a small model fits any last-level cache the OS reports.
TEST(Bench, InferFloorsAreFlagged) {
  LlamaModel m(random_checkpoint(preset_config("tiny"), DType::F32, 1));
  InferBenchOptions o;
  o.prefill_lengths = {16};
  o.decode_prompt = 8;
  o.decode_tokens = 2;
  o.reps = 1;
  o.memory_probe_bytes = size_t(64) << 20;  // the test checks the logic, not the figure
  const Json r = bench_infer(m, o);
  const Json& mc = r.at("machine");
  EXPECT_EQ(mc.at("gemm_peak").at("type").as_string(), "f32");
  EXPECT_EQ(mc.at("memory_probe").at("gbs").at("n").as_int(), 4);  // two passes before and after the rep
  EXPECT_EQ(mc.at("memory_probe").at("bytes").as_int(), int64_t(64) << 20);
  const Json& p = r.at("prefill").as_array()[0];
  EXPECT_EQ(p.at("floor_exceeded").as_bool(), p.at("fraction_of_gemm_peak").as_number() > 1);
  const Json& d = r.at("decode");
  EXPECT_EQ(d.at("floor_exceeded").as_bool(), d.at("fraction_of_bandwidth_floor").as_number() > 1);
  EXPECT_EQ(r.at("floor_exceeded").as_bool(), p.at("floor_exceeded").as_bool() || d.at("floor_exceeded").as_bool());
  const bool fits = mc.at("working_set_fits_llc").as_bool();
  EXPECT_EQ(fits, mc.at("llc_bytes").as_int() > 0);
  EXPECT_EQ(mc.find("cache_probe") != nullptr, fits);
  if (fits) {
    EXPECT_EQ(r.at("notes").as_array().empty(), false);
  }
  EXPECT_GE(d.at("bandwidth_floor").at("gbs").as_number(), mc.at("bandwidth_gbs").as_number());
}

// The training benchmark entry point runs and fills its accounting.
TEST(Bench, TrainStepReports) {
  LlamaConfig c = preset_config("tiny");
  TrainBenchOptions o;
  o.batch = 2, o.seq = 16, o.warmup = 0, o.reps = 1;
  const TrainBenchResult r = bench_train_step(c, o);
  EXPECT_GT(r.tokens_per_s, 0);
  EXPECT_EQ(r.step_seconds.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(r.flops_per_step, train_step_flops(c, 2, 16));
  EXPECT_EQ(r.memory.weights, size_t(c.num_parameters()) * 4);
  EXPECT_EQ(r.memory.optimizer, 2 * r.memory.weights);
  const Json j = r.to_json();
  EXPECT_EQ(j.at("attention").as_string(), "flash");
  EXPECT_EQ(size_t(j.at("memory").at("total").as_int()), r.memory.total());
}

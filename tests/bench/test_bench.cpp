// The benchmark harness and entry points: statistics, provenance, and that each benchmark runs
// and fills its accounting (no timing is asserted: timing is not a unit test).
#include <gtest/gtest.h>

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

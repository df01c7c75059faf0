// Training across ranks end to end, under mpirun (OpenMPI from Debian; 2, 3 and 4 ranks
// oversubscribed on this machine's cores): the collectives against references (genperf
// test-comm), faults that end every rank, and data-parallel and ZeRO-1 training that matches the
// single-rank run with the same global batch (losses and weights within 1e-6 relative) in every
// shard mode (ZeRO-1, 2, 3), with the communication volume and model-state bytes of the formulas,
// and resumes on another rank count.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/comm.h"
#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/train.h"
#include "io/safetensors.h"

using namespace genperf;
using genperf::testing::CliResult;
using genperf::testing::kGenperf;
using genperf::testing::run_command;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

TEST(Comm, OneRankIsTheIdentity) {
  auto c = make_local_comm();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  std::vector<float> x = {1, 2, 3};
  c->all_reduce(x.data(), x.size()).wait();
  c->reduce_scatter(x.data(), {3}).wait();
  c->all_gather(x.data(), {3}).wait();
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(c->stats().bytes, 0);
  EXPECT_THROW(c->reduce_scatter(x.data(), {1, 2}), Error);
}

// One rank of a job that is never asked to communicate: what a DataParallel's construction
// sees (it sends nothing).
class IdleRank final : public Communicator {
 public:
  IdleRank(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "idle"; }
  CommHandle all_reduce(float*, size_t) override { fail("[test] IdleRank does not communicate"); }
  CommHandle all_reduce(double*, size_t) override { fail("[test] IdleRank does not communicate"); }
  CommHandle reduce_scatter(float*, std::vector<size_t>) override { fail("[test] IdleRank does not communicate"); }
  CommHandle all_gather(float*, std::vector<size_t>) override { fail("[test] IdleRank does not communicate"); }
  CommHandle broadcast(void*, size_t, int) override { fail("[test] IdleRank does not communicate"); }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }

 private:
  int rank_, size_;
};

// The process's resident and peak resident kilobytes (/proc/self/status).
int64_t status_kb(const char* key) {
  std::istringstream in(read_text_file("/proc/self/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  return -1;
}

// Sharded initialization: a fully sharded rank of 8 builds its model deferred and writes only
// its shard. Its peak resident memory grows by its shards of the parameters and gradients (8 P /
// 8 bytes), never by the whole model (an eager model alone is 8 P: parameters and gradients);
// the shard holds the eager model's values; the other modes write the model whole.
TEST(ShardedInit, AFullyShardedRankWritesOnlyItsShard) {
  LlamaConfig c = preset_config("tiny");
  c.vocab_size = 4096, c.hidden_size = 512, c.intermediate_size = 1376, c.num_hidden_layers = 8;
  c.num_attention_heads = c.num_key_value_heads = 8, c.head_dim = 64;
  std::printf("seed 7\n");
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";  // the peak resident size restarts from the current one
    reset.flush();
    if (!reset.good()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  }
  const int64_t before_kb = status_kb("VmRSS:");
  TrainModel lazy(c, 7, {}, RopeStyle::Neox, InitMode::Deferred);
  IdleRank comm(3, 8);
  DistOptions o;
  o.comm = &comm;
  o.shard = ShardMode::Full;
  DataParallel dp(lazy, o, 8);
  const double grown = double(status_kb("VmHWM:") - before_kb) * 1024;
  const double P = double(lazy.num_params());
  std::printf("P %.0f: the peak RSS grew by %.1f MB (the shards: %.1f MB; the whole model: %.1f MB)\n", P,
              grown / 1e6, 8 * P / 8 / 1e6, 8 * P / 1e6);
  EXPECT_LT(grown, 8 * P / 8 + 16e6);
  EXPECT_FALSE(lazy.init_deferred());
  const TrainModel eager(c, 7);
  const std::span<float> shard = dp.param_shard();
  ASSERT_EQ(shard.size(), dp.shard_size());
  EXPECT_EQ(0, std::memcmp(shard.data(), eager.params().data() + dp.shard_begin(), shard.size() * sizeof(float)));
  for (const ShardMode m : {ShardMode::None, ShardMode::Optimizer, ShardMode::Grads}) {
    TrainModel other(c, 7, {}, RopeStyle::Neox, InitMode::Deferred);
    o.shard = m;
    DataParallel odp(other, o, 8);
    EXPECT_FALSE(other.init_deferred()) << shard_mode_name(m);
    EXPECT_EQ(0, std::memcmp(other.params().data(), eager.params().data(), size_t(P) * sizeof(float))) << shard_mode_name(m);
  }
}

class Mpi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // OpenMPI refuses root unless told; LeakSanitizer would report OpenMPI's own allocations.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    have_ = run_command("mpirun --version >/dev/null 2>&1") == 0;
    if (!have_) return;
    dir_ = new TempDir("dist");
    // OpenMPI's session directory under this process's own: concurrent jobs (ctest -j) that share
    // /tmp/ompi.<host>.<uid> race, one removing it while another creates its job's directory in it.
    setenv("OMPI_MCA_orte_tmpdir_base", dir_->path().c_str(), 1);
    const std::string kjv = *dir_ / "kjv.txt";
    ASSERT_EQ(run_command("bash " + std::string(GENPERF_TEST_DIR) + "/../scripts/data/kjv.sh " + kjv), 0)
        << "needs Debian's bible-kjv: run scripts/deps.sh";
    ASSERT_EQ(run_command("head -n 3000 " + kjv + " > " + (*dir_ / "train.txt")), 0);
    ASSERT_EQ(run_command("spm_train --input=" + (*dir_ / "train.txt") + " --model_prefix=" + (*dir_ / "tokenizer") +
                          " --vocab_size=400 --model_type=bpe --character_coverage=1.0 --byte_fallback=true"
                          " --random_seed=1 --minloglevel=2 >/dev/null 2>&1"), 0)
        << "spm_train failed: run scripts/deps.sh";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!have_) GTEST_SKIP() << "mpirun is missing: run scripts/deps.sh (openmpi-bin)";
  }

  // `mpirun -np n genperf args` (n = 0: genperf alone), standard error kept.
  static CliResult run(int n, const std::string& args, const std::string& env = "") {
    CliResult r;
    const std::string err = *dir_ / "stderr.txt";
    const std::string launcher = n > 0 ? "mpirun --oversubscribe -np " + std::to_string(n) + " " : "";
    r.code = run_command(env + " " + launcher + kGenperf + " " + args + " 2>" + err, &r.out);
    r.err = read_bytes(err);
    return r;
  }
  static std::string read_bytes(const std::string& p) { return genperf::testing::read_bytes(p); }

  // A tiny model trained for 4 steps of 4 micro-batches (the global batch), one thread a rank.
  static std::string train_args(const std::string& out, const std::string& extra = "") {
    return "train --text " + (*dir_ / "train.txt") + " --tokenizer " + (*dir_ / "tokenizer.model") + " --shape tiny --seq 32 --batch 2 "
           "--grad-accum 4 --steps 4 --lr 3e-3 --warmup 1 --eval-every 2 --dtype f32 --threads 1 --seed 3 --out " +
           out + " " + extra;
  }

  // The SR model's: 8 steps of 4 crops, from 2 synthetic dust fields, a small UNet.
  static std::string sr_args(const std::string& out, const std::string& extra = "") {
    return "sr train --data synthetic:2:64:3 --val-data synthetic:1:64:9 --steps 8 --batch 4 --crop 32 --base 8 "
           "--mults 1,2 --attention-levels 1 --head-channels 8 --groups 4 --log-every 2 --save-every 4 --warmup 2 "
           "--threads 1 --seed 5 --out " + out + " " + extra;
  }

  static std::vector<Json> log_records(const std::string& dir, const std::string& log = "train_log.jsonl") {
    std::vector<Json> out;
    std::istringstream in(read_text_file(dir + "/" + log));
    for (std::string line; std::getline(in, line);)
      if (line.find("\"loss\"") != std::string::npos) out.push_back(Json::parse(line));
    return out;
  }

  // Losses and the weights of two runs within `tol` relative: all weights by their norm, and each
  // tensor by its own norm within 10 tol. (A tensor that starts at zero, as the blocks' last
  // layers do, stays small: summed in another order, its gradients move it by a larger share of
  // its own norm. At the AVX2 level the SR model's mid.attn.proj.weight, 4e-4 of the model's
  // norm after 8 steps, differs by 1.15e-6 of its own in ZeRO-2 and 3, whose gradient sums run
  // in an order of their own.)
  static void expect_same_run(const std::string& a, const std::string& b, double tol,
                              const std::string& log = "train_log.jsonl", const std::string& model = "model.safetensors") {
    const auto la = log_records(a, log), lb = log_records(b, log);
    ASSERT_EQ(la.size(), lb.size());
    ASSERT_FALSE(la.empty());
    for (size_t i = 0; i < la.size(); ++i) {
      const double x = la[i].at("loss").as_number(), y = lb[i].at("loss").as_number();
      EXPECT_LE(std::fabs(x - y), tol * std::fabs(x)) << b << " step " << i + 1 << ": loss " << y << " vs " << x;
    }
    const SafetensorsFile fa = read_safetensors(a + "/" + model), fb = read_safetensors(b + "/" + model);
    ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
    double diff_all = 0, norm_all = 0;
    for (const auto& [name, ta] : fa.tensors) {
      const Tensor& tb = fb.tensors.at(name);
      ASSERT_EQ(ta.numel(), tb.numel()) << name;
      const auto* pa = static_cast<const float*>(ta.raw());
      const auto* pb = static_cast<const float*>(tb.raw());
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < ta.numel(); ++i) {
        diff += (double(pa[i]) - double(pb[i])) * (double(pa[i]) - double(pb[i]));
        norm += double(pa[i]) * double(pa[i]);
      }
      EXPECT_LE(std::sqrt(diff), 10 * tol * std::sqrt(norm)) << b << ": " << name;
      diff_all += diff, norm_all += norm;
    }
    EXPECT_LE(std::sqrt(diff_all), tol * std::sqrt(norm_all)) << b << ": all weights";
  }

  static inline bool have_ = false;
  static inline TempDir* dir_ = nullptr;
  TempDir tmp_{"dist-run"};
};

TEST_F(Mpi, CollectivesMatchTheirReferences) {
  for (int n : {2, 3, 4}) {
    const CliResult r = run(n, "test-comm --n 70001 --seed " + std::to_string(n));
    ASSERT_EQ(r.code, 0) << r.err;
    for (int k = 0; k < n; ++k)
      EXPECT_NE(r.out.find("[rank " + std::to_string(k) + "/" + std::to_string(n) + "] test-comm: 7 checks passed"),
                std::string::npos)
          << r.out;
  }
}

// One rank fails (as on a bad file), dies (SIGKILL) or stops answering: every rank ends, non-zero,
// well within the timeout, and the message names the rank.
TEST_F(Mpi, FaultsEndEveryRank) {
  // Either waiting rank (0 or 2) may run out of time first and abort the job; the hung rank never does.
  struct Case {
    const char* flag;
    std::vector<std::string> names;
  } cases[] = {{"--fail-rank 1", {"[rank 1/3] genperf: [test-comm] rank 1 failed"}},
               {"--kill-rank 1", {"rank 1"}},
               {"--hang-rank 1",
                {"[rank 0/3] genperf: [comm] no progress for 3 s", "[rank 2/3] genperf: [comm] no progress for 3 s"}}};
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = run(3, std::string("test-comm ") + c.flag, "GENPERF_COMM_TIMEOUT=3 timeout 60");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(r.code, 0) << c.flag;
    EXPECT_NE(r.code, 124) << c.flag << ": the job hung until timeout(1) ended it";
    EXPECT_LT(s, 30) << c.flag;
    const std::string all = r.out + r.err;
    EXPECT_TRUE(std::any_of(c.names.begin(), c.names.end(),
                            [&](const std::string& n) { return all.find(n) != std::string::npos; }))
        << c.flag << ":\n" << all;
    EXPECT_EQ(all.find("[rank 1/3] genperf: [comm] no progress"), std::string::npos) << c.flag << ":\n" << all;
  }
}

// Data parallel (none) and each sharding (ZeRO-1, 2, 3) at 2 and 4 ranks against one rank with
// the same global batch: the same losses and weights within 1e-6, the formulas' bytes on the wire
// and in memory, and the shared files written once.
TEST_F(Mpi, DataParallelAndShardingMatchOneRank) {
  const CliResult one = run(0, train_args(tmp_ / "one"));
  ASSERT_EQ(one.code, 0) << one.err;
  const double P = Json::parse(read_text_file(tmp_ / "one/train_run.json")).at("trainable_parameters").as_number();
  for (int n : {2, 4})
    for (const std::string shard : {"none", "optimizer", "grads", "full"}) {
      const std::string out = tmp_ / cat("r", n, shard);
      const CliResult r = run(n, train_args(out, "--json --shard " + shard + " --bucket-mb 0.05"));
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out.find("[rank 1/"), std::string::npos) << "only rank 0 reports:\n" << r.out;
      expect_same_run(tmp_ / "one", out, 1e-6);
      // Values sent per rank and step, in units of P (N-1)/N: 2 for data parallel and ZeRO-1
      // (all-reduce, or reduce-scatter plus all-gather); ZeRO-2 reduce-scatters each of the A
      // micro-batches a rank runs and gathers once (A + 1); ZeRO-3 gathers twice and
      // reduce-scatters once per micro-batch (3 A). Within 1% (the loss and norm scalars).
      const double A = 4.0 / n;
      const double units = shard == "grads" ? A + 1 : shard == "full" ? 3 * A : 2;
      const double want = units * P * double(n - 1) / double(n) * 4;
      for (const Json& rec : log_records(out)) {
        EXPECT_NEAR(rec.at("comm_bytes").as_number(), want, 0.01 * want) << out;
      }
      // Model state per rank (ZeRO's formulas, within 5%): 16 P; 8 P + 8 P / N; 4 P + 12 P / N;
      // 16 P / N.
      const Json state = Json::parse(r.out).at("model_state_bytes_per_rank");
      const double formula = shard == "none"        ? 16 * P
                             : shard == "optimizer" ? 8 * P + 8 * P / n
                             : shard == "grads"     ? 4 * P + 12 * P / n
                                                    : 16 * P / n;
      EXPECT_NEAR(state.at("total").as_number(), formula, 0.05 * formula) << out;
    }
}

// ZeRO-1 and ZeRO-3 at 2 ranks stopped at step 2 (each rank's shard of the state in a file of its
// own), resumed at 4 ranks: the uninterrupted run's losses and weights; at 2 ranks: the same bits.
// The SR model's training, data parallel and in each shard mode at 2 and 4 ranks, against one
// rank with the same micro-batches: the same losses (training and validation) and EMA weights
// within 1e-6; its model state per rank and bytes on the wire by ZeRO's formulas (bench sr).
TEST_F(Mpi, SrTrainingMatchesOneRankInEveryShardMode) {
  const CliResult one = run(0, sr_args(tmp_ / "one", "--grad-accum 4"));
  ASSERT_EQ(one.code, 0) << one.err;
  for (int n : {2, 4})
    for (const std::string shard : {"none", "optimizer", "grads", "full"}) {
      const std::string dir = tmp_ / ("r" + std::to_string(n) + shard);
      const CliResult r = run(n, sr_args(dir, "--grad-accum 4 --shard " + shard + " --bucket-mb 0.01"));
      ASSERT_EQ(r.code, 0) << n << " " << shard << ": " << r.err;
      expect_same_run(tmp_ / "one", dir, 1e-6, "log.jsonl", "model/model.safetensors");
      for (const Json& l : log_records(dir, "log.jsonl")) EXPECT_GT(l.at("val_loss").as_number(), 0) << dir;
      EXPECT_EQ(r.out.find("[rank 1/"), std::string::npos) << "rank 0 alone prints:\n" << r.out;
    }
  // bench sr times the trainer's step: the state it holds and the bytes it sends, per mode.
  const double N = 2;
  for (const std::string shard : {"none", "optimizer", "grads", "full"}) {
    const CliResult b = run(2, "bench sr --model " + (tmp_ / "one/model") + " --batch 4 --size 32 --reps 2 --no-peaks "
                               "--threads 1 --json --shard " + shard);
    ASSERT_EQ(b.code, 0) << shard << ": " << b.err;
    const Json j = Json::parse(b.out);
    const double P = j.at("parameters").as_number();
    const double state = j.at("model_state_bytes").at("total").as_number();
    const double want = shard == "none" ? 16 * P : shard == "optimizer" ? 8 * P + 8 * P / N
                      : shard == "grads" ? 4 * P + 12 * P / N : 16 * P / N;
    EXPECT_NEAR(state, want, 0.05 * want) << shard;
    const double bytes = j.at("comm_bytes_per_step").as_number();
    const double wire = (shard == "full" ? 3 : 2) * P * (N - 1) / N * 4;
    EXPECT_NEAR(bytes, wire, 0.01 * wire) << shard;
    EXPECT_EQ(j.at("ranks").as_int(), 2);
  }
}

// An SR run stopped at step 4 on 2 ranks, fully sharded, and resumed on one rank (and one
// stopped on one rank, resumed on 4, unsharded): the same run within 1e-6.
TEST_F(Mpi, SrTrainingResumesOnAnotherRankCount) {
  const CliResult one = run(0, sr_args(tmp_ / "one", "--grad-accum 4"));
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string a = tmp_ / "a", b = tmp_ / "b";
  ASSERT_EQ(run(2, sr_args(a, "--grad-accum 4 --shard full --stop-at 4")).code, 0);
  EXPECT_TRUE(fs::exists(a + "/state.step4.rank1-of-2.safetensors"));
  const CliResult ra = run(0, sr_args(a, "--grad-accum 4 --resume"));
  ASSERT_EQ(ra.code, 0) << ra.err;
  expect_same_run(tmp_ / "one", a, 1e-6, "log.jsonl", "model/model.safetensors");
  ASSERT_EQ(run(0, sr_args(b, "--grad-accum 4 --stop-at 4")).code, 0);
  const CliResult rb = run(4, sr_args(b, "--grad-accum 4 --shard optimizer --resume"));
  ASSERT_EQ(rb.code, 0) << rb.err;
  expect_same_run(tmp_ / "one", b, 1e-6, "log.jsonl", "model/model.safetensors");
}

TEST_F(Mpi, ResumesOnAnotherRankCount) {
  for (const std::string mode : {"optimizer", "full"}) {
    const std::string shard = "--shard " + mode + " --bucket-mb 0.05", whole = tmp_ / ("whole-" + mode);
    ASSERT_EQ(run(2, train_args(whole, shard)).code, 0);
    for (int n : {2, 4}) {
      const std::string out = tmp_ / cat("split-", mode, n);
      const CliResult first = run(2, train_args(out, shard + " --stop-at 2 --save-every 1"));
      ASSERT_EQ(first.code, 0) << first.err;
      // The state is sharded: a file a rank beside the manifest (which holds no tensor), those
      // of step 1 removed once step 2's manifest was written.
      EXPECT_TRUE(fs::exists(out + "/train_state.step2.rank0-of-2.safetensors"));
      EXPECT_TRUE(fs::exists(out + "/train_state.step2.rank1-of-2.safetensors"));
      EXPECT_FALSE(fs::exists(out + "/train_state.step1.rank0-of-2.safetensors"));
      EXPECT_TRUE(read_safetensors(out + "/train_state.safetensors").tensors.empty());
      const CliResult rest = run(n, train_args(out, shard + " --resume"));
      ASSERT_EQ(rest.code, 0) << rest.err;
      EXPECT_TRUE(fs::exists(out + cat("/train_state.step4.rank", n - 1, "-of-", n, ".safetensors")));
      EXPECT_FALSE(fs::exists(out + "/train_state.step2.rank0-of-2.safetensors"));
      if (n == 2) {
        EXPECT_EQ(read_bytes(whole + "/model.safetensors"), read_bytes(out + "/model.safetensors")) << mode;
      }
      expect_same_run(whole, out, n == 2 ? 0.0 : 1e-6);
    }
  }
}

// LoRA with dropout in every shard mode: each rank draws the masks of its micro-batches as one
// rank would, so the run (losses, the merged model, the adapter) is one rank's within 1e-6. The
// modes shard the adapters (P of them) by ZeRO's formulas; full also shards the frozen base (F
// parameters: 4 F / N bytes a rank) and gathers it with each unit (2 A F (N-1)/N more a step).
TEST_F(Mpi, LoraFineTuningMatchesOneRankInEveryShardMode) {
  ASSERT_EQ(run(0, train_args(tmp_ / "base")).code, 0);
  const std::string ft = "finetune --model " + (tmp_ / "base") + " --text " + (*dir_ / "train.txt") +
                         " --seq 32 --batch 2 --grad-accum 4 --steps 3 --lr 1e-3 --lora-rank 4 --lora-dropout 0.2 "
                         "--dtype f32 --threads 1 --json --out ";
  ASSERT_EQ(run(0, ft + (tmp_ / "ft1")).code, 0);
  const Json info = Json::parse(read_text_file(tmp_ / "ft1/train_run.json"));
  const double P = info.at("trainable_parameters").as_number(), F = info.at("parameters").as_number();
  ASSERT_GT(F, 20 * P);
  const std::vector<std::pair<int, std::string>> jobs{{2, "none"}, {2, "optimizer"}, {2, "grads"}, {2, "full"}, {4, "full"}};
  for (const auto& [n, shard] : jobs) {
    const std::string out = tmp_ / cat("ft", n, shard);
    const CliResult r = run(n, ft + out + " --shard " + shard + " --bucket-mb 0.01");
    ASSERT_EQ(r.code, 0) << n << " " << shard << ": " << r.err;
    expect_same_run(tmp_ / "ft1", out, 1e-6);
    const double A = 4.0 / n, f = double(n - 1) / double(n);
    const double units = shard == "grads" ? A + 1 : shard == "full" ? 3 * A : 2;
    const double wire = (units * P + (shard == "full" ? 2 * A * F : 0)) * f * 4;
    for (const Json& rec : log_records(out)) {
      EXPECT_NEAR(rec.at("comm_bytes").as_number(), wire, 0.01 * wire) << out;
    }
    const Json state = Json::parse(r.out).at("model_state_bytes_per_rank");
    const double trained = state.at("params").as_number() + state.at("grads").as_number() +
                           state.at("optimizer").as_number();
    const double formula = shard == "none"        ? 16 * P
                           : shard == "optimizer" ? 8 * P + 8 * P / n
                           : shard == "grads"     ? 4 * P + 12 * P / n
                                                  : 16 * P / n;
    EXPECT_NEAR(trained, formula, 0.05 * formula) << out;
    const double frozen = shard == "full" ? 4 * F / n : 4 * F;
    EXPECT_NEAR(state.at("frozen").as_number(), frozen, 0.01 * frozen) << out;
  }
  // The adapter alone, exported after fully sharded training on 2 ranks.
  ASSERT_EQ(run(0, ft + (tmp_ / "ad1") + " --adapter").code, 0);
  const CliResult r = run(2, ft + (tmp_ / "ad2") + " --adapter --shard full");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_run(tmp_ / "ad1", tmp_ / "ad2", 1e-6, "train_log.jsonl", "adapter/adapter_model.safetensors");
}

// A rank killed (SIGKILL) mid-run ends the job, non-zero, naming the rank; a resume from the
// last complete sharded state (its manifest) finishes the run with the losses of one that never
// stopped.
TEST_F(Mpi, AKilledRankEndsTheJobAndTheRunResumes) {
  const std::string opts = "--steps 80 --save-every 1 --eval-every 0 --shard full --bucket-mb 0.05";
  const std::string out = tmp_ / "killed", args = train_args(out, opts);
  ASSERT_EQ(run(2, train_args(tmp_ / "whole", opts)).code, 0);
  // In the background; once step 3 is logged, rank 1 (the process whose launcher environment
  // says so) is killed.
  std::string script = R"(
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0
mpirun --oversubscribe -np 2 GENPERF ARGS >TMP/job.txt 2>&1 &
job=$!
for i in $(seq 1 600); do grep -q '"step":3,' OUT/train_log.jsonl 2>/dev/null && break; sleep 0.05; done
for p in $(pgrep -f 'genperf train.*OUT'); do
  tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && kill -9 $p
done
start=$(date +%s)
wait $job
echo "rc=$? after $(( $(date +%s) - start )) s"
)";
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"GENPERF", kGenperf}, {"ARGS", args},
                                   {"TMP", tmp_.path()}, {"OUT", out}})
    for (size_t at = 0; (at = script.find(key, at)) != std::string::npos; at += value.size())
      script.replace(at, key.size(), value);
  genperf::testing::write_bytes(tmp_ / "kill.sh", script);
  std::string said;
  run_command("bash " + (tmp_ / "kill.sh"), &said);
  const std::string job = read_bytes(tmp_ / "job.txt");
  EXPECT_EQ(said.find("rc=0 "), std::string::npos) << said << job;
  EXPECT_NE(job.find("rank 1"), std::string::npos) << job;
  const Json log_end = log_records(out).back();
  EXPECT_LT(log_end.at("step").as_number(), 80) << "the job finished before the kill: make it longer";
  // Resume from the last complete state: the uninterrupted run's losses and weights, bit for bit.
  const CliResult rest = run(2, args + " --resume");
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_EQ(read_bytes(tmp_ / "whole/model.safetensors"), read_bytes(out + "/model.safetensors"));
  expect_same_run(tmp_ / "whole", out, 0.0);
}

// Under a memory cap below 10 P bytes a rank, full sharding runs where the other modes are
// refused before they start, with what they need and what there is.
TEST_F(Mpi, UnderAMemoryCapOnlyFullShardingRuns) {
  auto args = [&](const std::string& out, const std::string& shard) {
    return "train --text " + (*dir_ / "train.txt") + " --tokenizer " + (*dir_ / "tokenizer.model") +
           " --shape default --seq 16 --batch 1 --grad-accum 4 --steps 2 --dtype f32 --threads 1 --mem-gb 0.042 --bucket-mb 1 "
           "--shard " + shard + " --out " + out;
  };
  const CliResult full = run(4, args(tmp_ / "full", "full"));
  ASSERT_EQ(full.code, 0) << full.err;
  const double P = Json::parse(read_text_file(tmp_ / "full/train_run.json")).at("trainable_parameters").as_number();
  EXPECT_LT(0.042e9, 10 * P);
  for (const char* shard : {"none", "optimizer", "grads"}) {
    const CliResult r = run(4, args(tmp_ / shard, shard));
    EXPECT_NE(r.code, 0) << shard;
    EXPECT_NE(r.err.find("does not fit: needs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("has 0.042 GB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--shard full would fit"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp_ / (std::string(shard) + "/train_log.jsonl"))) << shard;
  }
}

// LoRA under a memory cap set between what full sharding and the other modes need (as
// `genperf plan` counts them): full runs, the others are refused before they start.
TEST_F(Mpi, LoraUnderAMemoryCapOnlyFullShardingRuns) {
  ASSERT_EQ(run(0, train_args(tmp_ / "base")).code, 0);
  const CliResult plan = run(0, "plan --model " + (tmp_ / "base") + " --ranks 4 --batch 2 --seq 32 --lora-rank 4 "
                                "--bucket-mb 1 --threads 1 --peak-gflops 10 --bandwidth-gbs 10 --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const Json j = Json::parse(plan.out);
  double full = 0, others = 1e300;
  for (const Json& p : j.at("plans").as_array()) {
    const double total = p.at("memory").at("total").as_number();
    if (p.at("shard").as_string() == "full") full = total;
    else others = std::min(others, total);
    EXPECT_GT(p.at("memory").at("frozen").as_number(), 0) << p.dump();
  }
  ASSERT_LT(full, others);
  char cap[32];
  std::snprintf(cap, sizeof cap, "%.9g", (full + others) / 2 / 1e9);
  auto args = [&](const std::string& out, const std::string& shard) {
    return "finetune --model " + (tmp_ / "base") + " --text " + (*dir_ / "train.txt") +
           " --seq 32 --batch 2 --grad-accum 4 --steps 2 --lr 1e-3 --lora-rank 4 --dtype f32 --threads 1 --bucket-mb 1 "
           "--mem-gb " + std::string(cap) + " --shard " + shard + " --out " + out;
  };
  const CliResult r = run(4, args(tmp_ / "full", "full"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* shard : {"none", "grads"}) {
    const CliResult no = run(4, args(tmp_ / shard, shard));
    EXPECT_NE(no.code, 0) << shard;
    EXPECT_NE(no.err.find("does not fit: needs"), std::string::npos) << no.err;
    EXPECT_NE(no.err.find("--shard full would fit"), std::string::npos) << no.err;
    EXPECT_FALSE(fs::exists(tmp_ / (std::string(shard) + "/train_log.jsonl"))) << shard;
  }
}

// The windows' peak that `plan` counts (replaying DataParallel's schedule: units gathered and
// prefetched, buckets started and at most two still reducing, 2 MiB pages) against the peak
// `bench train` measures with mincore at the schedule's high points, ZeRO-2 and -3 at 2 ranks:
// the plan counts values (4 KiB pages); where the kernel backs the windows with 2 MiB pages they
// hold up to a page more at each edge of what is held (three edges at the peak: the gradients'
// and the held units'). Within a page the other way.
TEST_F(Mpi, PlannedWindowsHoldWhatTrainingHolds) {
  for (const std::string shard : {"grads", "full"}) {
    const CliResult b = run(2, "bench train --model random:default --seq 32 --batch 1 --reps 1 --no-peaks --threads 1 "
                               "--shard " + shard + " --json");
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(Json::parse(b.out).at("inflight_buckets").as_number(), 2) << shard;  // the default limit
    const double measured = Json::parse(b.out).at("model_state_bytes").at("comm_buffers").as_number();
    const CliResult p = run(0, "plan --model random:default --ranks 2 --seq 32 --batch 1 --shard " + shard + " --json");
    ASSERT_EQ(p.code, 0) << p.err;
    double planned = -1;
    const Json plans = Json::parse(p.out);
    for (const Json& j : plans.at("plans").as_array())
      if (j.at("shard").as_string() == shard) planned = j.at("memory").at("comm_buffers").as_number();
    std::printf("%s: windows' peak measured %.2f MB, planned %.2f MB\n", shard.c_str(), measured / 1e6, planned / 1e6);
    EXPECT_GT(measured, 0) << shard;
    EXPECT_LE(measured - planned, 3.0 * double(kWindowPageBytes)) << shard;
    EXPECT_LE(planned - measured, 1.0 * double(kWindowPageBytes)) << shard;
  }
}

TEST_F(Mpi, ABatchThatDoesNotSplitIsRefused) {
  const CliResult limit = run(0, "bench train --model random:tiny --seq 16 --reps 1 --no-peaks --inflight-buckets -1");
  EXPECT_NE(limit.code, 0);
  EXPECT_NE(limit.err.find("--inflight-buckets must be 0 (no limit) or more, got -1"), std::string::npos) << limit.err;
  const CliResult r = run(4, train_args(tmp_ / "odd", "--grad-accum 6"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--grad-accum 6"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("across 4 ranks"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "odd/model.safetensors"));
  const CliResult z = run(2, train_args(tmp_ / "z3", "--shard zero3"));
  EXPECT_NE(z.code, 0);
  EXPECT_NE(z.err.find("--shard 'zero3'"), std::string::npos) << z.err;
}

}  // namespace

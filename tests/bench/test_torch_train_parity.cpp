// bench/torch_train.py trains the same model as genperf, so that compare_train.py compares the
// two engines on equal work: from the same weights (a TrainModel saved as a HF directory) and
// batch, its losses and gradient norms over a few AdamW steps match train_step's, and its
// parameter and FLOP counts match num_parameters and train_step_flops. Skipped where Debian's
// python3-torch is not installed (GENPERF_WITH_TORCH=1 bash scripts/deps.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/rng.h"
#include "genperf/train.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260417;

TEST(TorchTrainParity, SameLossesGradNormsAndFlops) {
  if (run_command(cat(GENPERF_PYTHON, " -c 'import torch' 2>/dev/null")) != 0)
    GTEST_SKIP() << "python3-torch is not installed for " << GENPERF_PYTHON;
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  // The tiny preset (GQA 4/2 heads, untied) with B, T not multiples of any tile size.
  const LlamaConfig c = preset_config("tiny");
  const int64_t B = 2, T = 13;
  const int steps = 4;
  const float lr = 3e-3f;
  Rng rng(kSeed);
  std::vector<int32_t> tokens, targets;
  for (int64_t i = 0; i < B * T; ++i) tokens.push_back(int32_t(rng.next() % uint64_t(c.vocab_size)));
  for (int64_t i = 0; i < B * T; ++i)  // random targets, every fifth position not scored
    targets.push_back(i % 5 == 3 ? -1 : int32_t(rng.next() % uint64_t(c.vocab_size)));

  for (AttentionMode mode : {AttentionMode::Flash, AttentionMode::Naive}) {
    std::printf(" genperf attention %s\n", attention_mode_name(mode));
    TrainModel m(c, kSeed, {mode, false});
    TempDir tmp("torch-parity");
    const std::string dir = tmp / "model";
    save_hf_checkpoint(dir, c, m.tensors());
    const std::string cmd = cat(GENPERF_PYTHON, " ", GENPERF_TEST_DIR, "/../bench/torch_train.py --check ", dir,
                                " --batch ", B, " --seq ", T, " --tokens ", join_ids(tokens), " --targets ",
                                join_ids(targets), " --steps ", steps, " --lr ", lr, " --threads 1");
    std::string out;
    ASSERT_EQ(run_command(cmd, &out), 0) << cmd;
    const Json ref = Json::parse(out, "torch_train.py --check");
    EXPECT_EQ(ref.at("parameters").as_int(), int64_t(m.num_params()));
    EXPECT_EQ(ref.at("parameters").as_int(), c.num_parameters());
    EXPECT_NEAR(ref.at("flops_per_step").as_number() / train_step_flops(c, B, T), 1.0, 1e-12);
    const auto& losses = ref.at("losses").as_array();
    const auto& norms = ref.at("grad_norms").as_array();
    ASSERT_EQ(losses.size(), size_t(steps));

    AdamW opt(m.num_params());  // the defaults torch_train.py uses: 0.9/0.95, 1e-8, wd 0.1
    const MicroBatch mb{tokens, targets, B, T};
    bool clipped = false;
    for (int s = 0; s < steps; ++s) {
      const StepResult r = train_step(m, opt, {&mb, 1}, lr, 1.0);
      const double tl = losses[size_t(s)].as_number(), tn = norms[size_t(s)].as_number();
      std::printf("  step %d: loss %.7f torch %.7f | grad norm %.6f torch %.6f\n", s, r.loss, tl, r.grad_norm, tn);
      EXPECT_NEAR(r.loss / tl, 1.0, 1e-5) << "step " << s;
      EXPECT_NEAR(r.grad_norm / tn, 1.0, 1e-4) << "step " << s;
      clipped |= r.grad_norm > 1.0;
    }
    // The loss must move, or equal losses would not show that the optimizers agree.
    EXPECT_GT(std::abs(losses.front().as_number() - losses.back().as_number()), 1e-3);
    std::printf("  clipped: %s\n", clipped ? "yes" : "no");
  }
}

}  // namespace

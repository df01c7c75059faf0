// The trainable model (TrainModel over LlamaGraph): whole-model gradients against float64 finite
// differences, logits equal to the inference model's on the same weights, checkpointing and
// attention modes, gradient accumulation, determinism, and an end-to-end comparison of loss,
// every gradient and ten AdamW steps with the independent NumPy reference train_ref.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "common/test_util.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "train/graph.h"
#include "train/paged.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260303;

// Weights spread like a trained model's (1/sqrt(fan_in)), not the small training init.
TrainModel spread_model(const LlamaConfig& c, TrainOptions o, RopeStyle rope = RopeStyle::Neox) {
  Checkpoint ck = random_checkpoint(c, DType::F32, kSeed);
  ck.rope_style = rope;
  return TrainModel(ck, o);
}

TEST(TrainModel, WholeModelGradientMatchesFiniteDifferences) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  struct Variant {
    const char* name;
    LlamaConfig c;
    TrainOptions o;
    RopeStyle rope;
  };
  const Variant variants[] = {
      {"gqa untied flash neox", tiny(4, 2, false, false), {AttentionMode::Flash, false}, RopeStyle::Neox},
      {"mha tied bias naive interleaved ckpt", tiny(2, 2, true, true), {AttentionMode::Naive, true},
       RopeStyle::Interleaved},
  };
  for (const Variant& v : variants) {
    std::printf(" variant %s\n", v.name);
    TrainModel m = spread_model(v.c, v.o, v.rope);
    std::vector<double> p(m.params().begin(), m.params().end()), g(p.size(), 0.0);
    train::LlamaGraph<double> graph(v.c, v.rope, v.o);
    const Batch b = make_batch(kSeed, 2, 5, v.c.vocab_size);
    auto loss = [&] { return graph.forward(p.data(), b.tokens, b.targets, b.B, b.T); };
    loss();
    graph.backward(p.data(), g.data(), 1.0);
    Rng r(kSeed);
    for (const ParamInfo& pi : m.param_info()) {
      std::vector<double> x(p.begin() + long(pi.offset), p.begin() + long(pi.offset + pi.numel));
      std::vector<double> gx(g.begin() + long(pi.offset), g.begin() + long(pi.offset + pi.numel));
      auto sub_loss = [&] {
        std::copy(x.begin(), x.end(), p.begin() + long(pi.offset));
        return loss();
      };
      check_fd(pi.name, x, gx, sub_loss, r, 6);
      std::copy(x.begin(), x.end(), p.begin() + long(pi.offset));
    }
  }
}

double max_row_rel_error(const float* a, const float* b, int64_t rows, int64_t cols) {
  double worst = 0;
  for (int64_t i = 0; i < rows; ++i) worst = std::max(worst, rel_error(a + i * cols, b + i * cols, size_t(cols)));
  return worst;
}

TEST(TrainModel, LogitsMatchInferenceModelAndRoundTrip) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (bool tied : {false, true})
    for (AttentionMode mode : {AttentionMode::Naive, AttentionMode::Flash}) {
      const LlamaConfig c = tiny(4, 2, tied, !tied);
      TrainModel m = spread_model(c, {mode, false});
      TempDir tmp("train");
      const std::string dir = tmp / "model";
      save_hf_checkpoint(dir, c, m.tensors());
      LlamaModel inf(load_checkpoint(dir, false));
      const int64_t B = 2, T = 23;
      Batch b = make_batch(kSeed + 1, B, T, c.vocab_size, 0);
      m.forward(b.tokens, std::vector<int32_t>(size_t(B * T), -1), B, T);
      const Tensor logits = m.logits();
      for (int64_t s = 0; s < B; ++s) {
        Session sess(inf, T);
        const Tensor ref = inf.forward(sess, std::span(b.tokens).subspan(size_t(s * T), size_t(T)), LogitsFor::All);
        const double e = max_row_rel_error(logits.data<float>() + s * T * c.vocab_size, ref.data<float>(), T, c.vocab_size);
        EXPECT_LT(e, 1e-5) << attention_mode_name(mode) << (tied ? " tied" : " untied") << " sequence " << s;
      }
      // Saved and reloaded, the weights are bit-identical.
      TrainModel back(load_checkpoint(dir, false));
      ASSERT_EQ(back.num_params(), m.num_params());
      EXPECT_EQ(0, std::memcmp(back.params().data(), m.params().data(), m.num_params() * 4));
    }
}

// GGUF-style rotary pairing: the checkpoint handed over in memory, without a file.
TEST(TrainModel, InterleavedRopeLogitsMatchInferenceModel) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 4, false, false);
  TrainModel m = spread_model(c, {AttentionMode::Flash, false}, RopeStyle::Interleaved);
  LlamaModel inf(m.to_checkpoint());
  ASSERT_EQ(inf.rope_style(), RopeStyle::Interleaved);
  const int64_t T = 19;
  const Batch b = make_batch(kSeed + 7, 1, T, c.vocab_size, 0);
  m.forward(b.tokens, std::vector<int32_t>(size_t(T), -1), 1, T);
  Session sess(inf, T);
  const Tensor ref = inf.forward(sess, b.tokens, LogitsFor::All);
  EXPECT_LT(max_row_rel_error(m.logits().data<float>(), ref.data<float>(), T, c.vocab_size), 1e-5);
}

TEST(TrainModel, ActivationAccounting) {
  const LlamaConfig c = tiny(4, 2, false, false);
  const int64_t B = 3, T = 20, L = c.num_hidden_layers, H = c.num_attention_heads;
  const ActivationMemory naive = TrainModel::activation_memory(c, {AttentionMode::Naive, false}, B, T);
  const ActivationMemory flash = TrainModel::activation_memory(c, {AttentionMode::Flash, false}, B, T);
  EXPECT_EQ(naive.attention_scores, size_t(L * B * H * T * T) * 4);  // quadratic in T
  EXPECT_EQ(flash.attention_scores, size_t(L * B * H * T) * 4);      // linear in T
  EXPECT_EQ(naive.logits, size_t(B * T * (c.vocab_size + 1)) * 4);
  EXPECT_EQ(naive.residual, flash.residual);
  EXPECT_EQ(naive.residual, size_t((L + 1) * B * T * c.hidden_size + L * B * T * c.hidden_size) * 4);
  TrainModel m(c, kSeed, {AttentionMode::Flash, false});
  EXPECT_EQ(m.num_params(), size_t(c.num_parameters()));
  const Batch b = make_batch(kSeed, B, T, c.vocab_size);
  m.forward(b.tokens, b.targets, B, T);
  EXPECT_EQ(m.activation_memory().total(), flash.total());
  const Json j = flash.to_json();
  EXPECT_EQ(size_t(j.at("total").as_int()), flash.total());
}

TEST(TrainModel, CheckpointingGivesIdenticalGradients) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 1, false, true);
  const Batch b = make_batch(kSeed + 2, 2, 33, c.vocab_size);
  for (AttentionMode mode : {AttentionMode::Naive, AttentionMode::Flash}) {
    TrainModel plain = spread_model(c, {mode, false}), ckpt = spread_model(c, {mode, true});
    const float l1 = plain.forward(b.tokens, b.targets, b.B, b.T);
    const float l2 = ckpt.forward(b.tokens, b.targets, b.B, b.T);
    EXPECT_EQ(l1, l2);
    plain.backward();
    ckpt.backward();
    EXPECT_EQ(0, std::memcmp(plain.grads().data(), ckpt.grads().data(), plain.num_params() * 4))
        << attention_mode_name(mode);
    const ActivationMemory a = plain.activation_memory(), k = ckpt.activation_memory();
    EXPECT_LT(k.total(), a.total());
    EXPECT_EQ(k.attention_scores * 2, a.attention_scores);  // one layer's of two
  }
}

TEST(TrainModel, FlashAndNaiveTrainAlike) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  const Batch b = make_batch(kSeed + 3, 2, 40, c.vocab_size);
  const MicroBatch mb{b.tokens, b.targets, b.B, b.T};
  TrainModel naive(c, kSeed, {AttentionMode::Naive, false}), flash(c, kSeed, {AttentionMode::Flash, false});
  AdamW on(naive.num_params()), of(flash.num_params());
  for (int step = 0; step < 5; ++step) {
    const StepResult rn = train_step(naive, on, {&mb, 1}, 1e-2f, 1.0);
    const StepResult rf = train_step(flash, of, {&mb, 1}, 1e-2f, 1.0);
    std::printf("  step %d: naive %.7f flash %.7f\n", step, rn.loss, rf.loss);
    EXPECT_NEAR(rf.loss / rn.loss, 1.0, 1e-5) << "step " << step;
  }
}

TEST(TrainModel, GradientAccumulationMatchesOneBatch) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, true, false);
  const Batch b = make_batch(kSeed + 4, 2, 17, c.vocab_size, 0);  // all scored: equal counts
  TrainModel one(c, kSeed), two(c, kSeed);
  AdamW o1(one.num_params()), o2(two.num_params());
  const MicroBatch whole{b.tokens, b.targets, 2, 17};
  const auto half = size_t(17);
  const MicroBatch parts[] = {{std::span(b.tokens).first(half), std::span(b.targets).first(half), 1, 17},
                              {std::span(b.tokens).subspan(half), std::span(b.targets).subspan(half), 1, 17}};
  const StepResult r1 = train_step(one, o1, {&whole, 1}, 1e-3f, 0.0);
  const StepResult r2 = train_step(two, o2, parts, 1e-3f, 0.0);
  EXPECT_NEAR(r1.loss, r2.loss, 1e-6 * r1.loss);
  EXPECT_NEAR(r1.grad_norm, r2.grad_norm, 1e-5 * r1.grad_norm);
  EXPECT_LT(rel_error(two.grads().data(), one.grads().data(), one.num_params()), 1e-5);
}

TEST(TrainModel, DeterministicForFixedThreads) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  const Batch b = make_batch(kSeed + 5, 3, 70, c.vocab_size);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    TrainModel m(c, kSeed, {AttentionMode::Flash, false});
    m.forward(b.tokens, b.targets, b.B, b.T);
    m.backward();
    if (run == 0) first.assign(m.grads().begin(), m.grads().end());
    else EXPECT_EQ(0, std::memcmp(first.data(), m.grads().data(), first.size() * 4));
  }
}

TEST(TrainModel, ErrorsNameTheProblem) {
  const LlamaConfig c = tiny(4, 2, false, false);
  TrainModel m(c, kSeed);
  EXPECT_THROW(m.backward(), Error);  // no forward yet
  const std::vector<int32_t> tok = {1, 2, 3}, bad_tgt = {1, 2, 99}, tgt = {1, 2, 3};
  EXPECT_THROW(m.forward(tok, tgt, 2, 2), Error);  // sizes
  EXPECT_THROW(m.forward(tok, bad_tgt, 1, 3), Error);
  const std::vector<int32_t> bad_tok = {1, -5, 3};
  EXPECT_THROW(m.forward(bad_tok, tgt, 1, 3), Error);
  EXPECT_THROW(m.param("model.layers.9.mlp.up_proj.weight"), Error);
  EXPECT_THROW(parse_attention_mode("fast"), Error);
  m.forward(tok, tgt, 1, 3);
  m.backward();
  EXPECT_THROW(m.backward(), Error);  // one backward per forward
  Checkpoint ck = m.to_checkpoint();
  ck.tensors.erase("model.norm.weight");
  EXPECT_THROW(TrainModel{ck}, Error);
}

// Deferred (sharded) initialization: nothing is written or resident at construction; any range
// drawn alone is the eager model's, bit for bit, across tensor boundaries and the generators'
// 65536-value chunks; from a checkpoint alike; forward and export refuse until materialize(),
// which gives the eager model.
TEST(TrainModel, DeferredInitWritesAnyRangeAsTheEagerModel) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  LlamaConfig c = tiny(4, 2, false, true);
  c.vocab_size = 3000;  // embedding and head of 96000 values: two chunks each
  const Checkpoint ck = random_checkpoint(c, DType::BF16, kSeed);
  for (const bool from_checkpoint : {false, true}) {
    SCOPED_TRACE(from_checkpoint ? "from a bf16 checkpoint" : "random");
    const TrainModel eager = from_checkpoint ? TrainModel(ck) : TrainModel(c, kSeed);
    TrainModel lazy = from_checkpoint ? TrainModel(ck, {}, InitMode::Deferred)
                                      : TrainModel(c, kSeed, {}, RopeStyle::Neox, InitMode::Deferred);
    const size_t P = lazy.num_params();
    ASSERT_EQ(P, eager.num_params());
    EXPECT_TRUE(lazy.init_deferred());
    EXPECT_FALSE(eager.init_deferred());
    EXPECT_EQ(train::resident_bytes(lazy.params().data(), P), 0u);
    EXPECT_EQ(train::resident_bytes(lazy.grads().data(), P), 0u);

    std::vector<std::pair<size_t, size_t>> ranges = {{0, P}, {0, 0}, {P, P}, {P - 1, P}, {65535, 65537},
                                                     {65536 - 7, 2 * 65536 + 100}};
    for (const ParamInfo& pi : lazy.param_info())
      if (pi.offset > 0) ranges.push_back({pi.offset - 1, std::min(P, pi.offset + 3)});
    Rng rng(kSeed + 1);
    for (int i = 0; i < 20; ++i) {
      const size_t a = size_t(rng.next() % P), b = size_t(rng.next() % P);
      ranges.push_back({std::min(a, b), std::max(a, b)});
    }
    for (const auto& [lo, hi] : ranges) {
      std::vector<float> got(hi - lo, -1.0f);
      lazy.init_params(lo, hi, got.data());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), eager.params().begin() + ptrdiff_t(lo),
                             [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }))
          << "[" << lo << ", " << hi << ")";
    }
    EXPECT_THROW(lazy.init_params(1, P + 1, nullptr), Error);
    // Drawing ranges wrote nothing of the model's own.
    EXPECT_EQ(train::resident_bytes(lazy.params().data(), P), 0u);
    const Batch b = make_batch(kSeed + 2, 1, 8, c.vocab_size);
    EXPECT_THROW(lazy.forward(b.tokens, b.targets, b.B, b.T), Error);
    EXPECT_THROW(lazy.tensors(), Error);

    lazy.materialize();
    EXPECT_FALSE(lazy.init_deferred());
    EXPECT_EQ(0, std::memcmp(lazy.params().data(), eager.params().data(), P * sizeof(float)));
    EXPECT_EQ(lazy.forward(b.tokens, b.targets, b.B, b.T), TrainModel(eager.to_checkpoint()).forward(b.tokens, b.targets, b.B, b.T));
  }
}

std::vector<double> read_doubles(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<double> v(size_t(in.tellg()) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(double)));
  return v;
}

TEST(TrainModel, MatchesNumpyReference) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LrSchedule sched{1e-2f, 1e-3f, 3, 10};
  const AdamWOptions ao{0.9f, 0.95f, 1e-8f, 0.1f};
  const double clip = 1.0;
  for (bool variant : {false, true}) {
    const LlamaConfig c = variant ? tiny(2, 2, true, true) : tiny(4, 2, false, false);
    std::printf(" variant %s\n", variant ? "mha tied bias" : "gqa untied");
    TrainModel m = spread_model(c, {variant ? AttentionMode::Naive : AttentionMode::Flash, false});
    TempDir tmp("train-ref");
    const std::string dir = tmp / "model";
    save_hf_checkpoint(dir, c, m.tensors());
    const Batch b = make_batch(kSeed + 6, 2, 7, c.vocab_size);
    const std::string cmd = cat(GENPERF_PYTHON, " ", GENPERF_TEST_DIR, "/train/train_ref.py --model ", dir,
                                " --batch 2 --seq 7 --tokens ", join_ids(b.tokens), " --targets ", join_ids(b.targets),
                                " --grads ", tmp / "grads.bin", " --steps 10 --losses ", tmp / "losses.bin",
                                " --lr-max ", sched.max_lr, " --lr-min ", sched.min_lr, " --warmup ",
                                sched.warmup_steps, " --total ", sched.total_steps, " --beta1 ", ao.beta1,
                                " --beta2 ", ao.beta2, " --eps ", ao.eps, " --wd ", ao.weight_decay,
                                " --clip ", clip);
    ASSERT_EQ(run_command(cmd), 0) << cmd << "\n(needs python3-numpy for /usr/bin/python3)";
    const auto ref = read_doubles(tmp / "grads.bin");
    const auto ref_losses = read_doubles(tmp / "losses.bin");
    ASSERT_EQ(ref.size(), 1 + m.num_params());
    ASSERT_EQ(ref_losses.size(), 10u);

    const float loss = m.forward(b.tokens, b.targets, b.B, b.T);
    m.backward();
    EXPECT_NEAR(loss / ref[0], 1.0, 1e-5);
    std::map<std::string, const ParamInfo*> sorted;  // the reference's order
    for (const ParamInfo& pi : m.param_info()) sorted[pi.name] = &pi;
    size_t at = 1;
    double worst = 0;
    for (const auto& [name, pi] : sorted) {
      const double e = rel_error(m.grads().data() + pi->offset, ref.data() + at, pi->numel);
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-4) << name;
      at += pi->numel;
    }
    std::printf("  loss %.8f (ref %.8f), worst gradient rel. error %.2e\n", loss, ref[0], worst);

    AdamW opt(m.num_params(), ao);
    const MicroBatch mb{b.tokens, b.targets, b.B, b.T};
    bool clipped = false;
    for (int step = 0; step < 10; ++step) {
      const StepResult r = train_step(m, opt, {&mb, 1}, sched.at(step), clip);
      clipped |= r.grad_norm > clip;
      std::printf("  step %d: lr %.5f loss %.8f ref %.8f grad norm %.4f\n", step, r.lr, r.loss,
                  ref_losses[size_t(step)], r.grad_norm);
      EXPECT_NEAR(r.loss / ref_losses[size_t(step)], 1.0, 1e-4) << "step " << step;
    }
    EXPECT_TRUE(clipped) << "the test should exercise clipping";
  }
}

}  // namespace

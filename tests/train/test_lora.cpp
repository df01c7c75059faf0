// LoRA: adapter gradients (and the input gradient through them) against float64 finite
// differences with and without dropout, the frozen base, B = 0 giving the base model exactly,
// merged export, PEFT adapter directories (round trip, atomic replace, clear errors), dropout
// masks reproduced on resume, and the memory accounting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "genperf/bench_train.h"
#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/runtime.h"
#include "genperf/train.h"
#include "io/safetensors.h"
#include "train/graph.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260311;

TrainModel spread_model(const LlamaConfig& c, TrainOptions o = {}) {
  return TrainModel(random_checkpoint(c, DType::F32, kSeed), o);
}

LoraConfig all_targets(int rank, float alpha, float dropout) {
  LoraConfig l;
  l.rank = rank, l.alpha = alpha, l.dropout = dropout, l.seed = kSeed;
  l.targets = lora_target_names();
  return l;
}

// Non-zero B (and A) so that every adapter term is exercised.
void randomize_adapters(TrainModel& m, uint64_t seed, double scale = 0.2) {
  Rng r(seed);
  for (float& x : m.trainable_params()) x = float(r.normal() * scale);
}

// Expects fn to throw genperf::Error whose message contains `part`.
template <typename Fn>
void expect_error(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(TrainLora, GradientsMatchFiniteDifferences) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  struct Variant {
    const char* name;
    LlamaConfig c;
    TrainOptions o;
    float dropout;
  };
  const Variant variants[] = {
      {"gqa flash, dropout 0", tiny(4, 2, false, true), {AttentionMode::Flash, false}, 0.0f},
      {"gqa flash ckpt, dropout 0.3", tiny(4, 2, false, true), {AttentionMode::Flash, true}, 0.3f},
      {"mha naive tied, dropout 0.5", tiny(2, 2, true, false), {AttentionMode::Naive, false}, 0.5f},
  };
  for (const Variant& v : variants) {
    std::printf(" variant %s\n", v.name);
    TrainModel m = spread_model(v.c);
    const LoraConfig lc = all_targets(3, 5.0f, v.dropout);
    m.enable_lora(lc);
    randomize_adapters(m, kSeed + 1);
    std::vector<double> p(m.params().begin(), m.params().end()), g(p.size(), 0.0);
    std::vector<double> a(m.trainable_params().begin(), m.trainable_params().end()), ga(a.size(), 0.0);
    train::LlamaGraph<double> graph(v.c, RopeStyle::Neox, v.o);
    graph.set_lora(&lc);
    const Batch b = make_batch(kSeed + 2, 2, 5, v.c.vocab_size);
    // The same mask for every evaluation: the step is set before each forward.
    auto loss = [&] {
      graph.set_lora_step(7);
      return graph.forward(p.data(), b.tokens, b.targets, b.B, b.T, a.data());
    };
    loss();
    graph.backward(p.data(), g.data(), 1.0, a.data(), ga.data());
    Rng r(kSeed);
    const auto& lay = *graph.lora();
    for (const ParamInfo& pi : lay.params) {
      std::vector<double> x(a.begin() + long(pi.offset), a.begin() + long(pi.offset + pi.numel));
      std::vector<double> gx(ga.begin() + long(pi.offset), ga.begin() + long(pi.offset + pi.numel));
      auto sub = [&] {
        std::copy(x.begin(), x.end(), a.begin() + long(pi.offset));
        return loss();
      };
      check_fd(pi.name, x, gx, sub, r, 4);
      std::copy(x.begin(), x.end(), a.begin() + long(pi.offset));
    }
    // Base gradients carry the adapters' input-gradient terms (dx through A and B): the
    // embedding and norm weights see every layer's, the projections' biases their own.
    for (const ParamInfo& pi : m.param_info()) {
      const bool probe = pi.name.find("embed") != std::string::npos || pi.name.find("norm") != std::string::npos ||
                         pi.name.find("layers.0") != std::string::npos;
      if (!probe) continue;
      std::vector<double> x(p.begin() + long(pi.offset), p.begin() + long(pi.offset + pi.numel));
      std::vector<double> gx(g.begin() + long(pi.offset), g.begin() + long(pi.offset + pi.numel));
      auto sub = [&] {
        std::copy(x.begin(), x.end(), p.begin() + long(pi.offset));
        return loss();
      };
      check_fd(pi.name, x, gx, sub, r, 4);
      std::copy(x.begin(), x.end(), p.begin() + long(pi.offset));
    }
    // With dropout, another step draws another mask: the loss changes.
    if (v.dropout > 0) {
      const double l7 = loss();
      graph.set_lora_step(8);
      EXPECT_NE(l7, graph.forward(p.data(), b.tokens, b.targets, b.B, b.T, a.data()));
    }
  }
}

// The float model's adapter gradients equal the float64 graph's (frozen base in float).
TEST(TrainLora, FloatGradientsMatchFloat64) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  const LoraConfig lc = all_targets(4, 8.0f, 0.2f);
  TrainModel m = spread_model(c);
  m.enable_lora(lc);
  randomize_adapters(m, kSeed + 3);
  const Batch b = make_batch(kSeed + 4, 2, 21, c.vocab_size);
  m.set_lora_step(3);
  const float lf = m.forward(b.tokens, b.targets, b.B, b.T);
  m.zero_grad();
  m.backward();
  std::vector<double> p(m.params().begin(), m.params().end()), g(p.size(), 0.0);
  std::vector<double> a(m.trainable_params().begin(), m.trainable_params().end()), ga(a.size(), 0.0);
  train::LlamaGraph<double> graph(c, RopeStyle::Neox, {});
  graph.set_lora(&lc);
  graph.set_lora_step(3);
  const double ld = graph.forward(p.data(), b.tokens, b.targets, b.B, b.T, a.data());
  graph.backward(p.data(), g.data(), 1.0, a.data(), ga.data());
  EXPECT_NEAR(lf / ld, 1.0, 1e-5);
  const double e = rel_error(m.trainable_grads().data(), ga.data(), ga.size());
  std::printf("  loss %.7f (f64 %.7f), adapter gradient rel. error %.2e\n", lf, ld, e);
  EXPECT_LT(e, 1e-4);
}

TEST(TrainLora, FrozenBaseAndZeroBGivesBaseLoss) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, true);
  const Batch b = make_batch(kSeed + 5, 2, 19, c.vocab_size);
  TrainModel base = spread_model(c), m = spread_model(c);
  const float base_loss = base.forward(b.tokens, b.targets, b.B, b.T);
  LoraConfig lc = all_targets(4, 16.0f, 0.1f);
  m.enable_lora(lc);
  EXPECT_TRUE(m.lora_enabled());
  EXPECT_EQ(m.lora_config().rank, 4);
  // B = 0: the adapters add exact zeros, dropout or not.
  EXPECT_EQ(m.forward(b.tokens, b.targets, b.B, b.T), base_loss);
  m.backward();
  EXPECT_TRUE(m.grads().empty());
  expect_error([&] { m.grad("model.norm.weight"); }, "frozen");
  // Trainable: A and B of each of the 7 targets of 2 layers; B gets gradients, A none yet (B = 0).
  EXPECT_EQ(m.lora_param_info().size(), 2u * 7 * 2);
  const size_t expect_n = size_t(2 * 4 * ((32 + 32) + 2 * (32 + 16) + (32 + 32) + 2 * (32 + 40) + (40 + 32)));
  EXPECT_EQ(m.trainable_params().size(), expect_n);
  EXPECT_EQ(m.trainable_segments().size(), m.lora_param_info().size());
  // A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0; the draw does not depend on the thread count.
  for (const ParamInfo& pi : m.lora_param_info()) {
    const float* x = m.trainable_params().data() + pi.offset;
    const bool is_a = pi.name.find("lora_A") != std::string::npos;
    double mx = 0;
    for (size_t i = 0; i < pi.numel; ++i) mx = std::max(mx, double(std::fabs(x[i])));
    if (is_a) EXPECT_TRUE(mx > 0.5 / std::sqrt(double(pi.shape[1])) && mx <= 1 / std::sqrt(double(pi.shape[1]))) << pi.name;
    else EXPECT_EQ(mx, 0.0) << pi.name;
  }
  const int saved = num_threads();
  set_num_threads(1);
  TrainModel one = spread_model(c);
  one.enable_lora(lc);
  set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(one.trainable_params().data(), m.trainable_params().data(), m.trainable_params().size() * 4));
  const std::vector<float> before(m.params().begin(), m.params().end());
  AdamW opt(m.trainable_params().size());
  const MicroBatch mb{b.tokens, b.targets, b.B, b.T};
  double first = 0, last = 0;
  for (int step = 0; step < 8; ++step) {
    const StepResult r = train_step(m, opt, {&mb, 1}, 1e-2f, 1.0);
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  std::printf("  base loss %.5f, LoRA loss after 8 steps %.5f\n", first, last);
  EXPECT_LT(last, first);
  EXPECT_EQ(0, std::memcmp(before.data(), m.params().data(), before.size() * 4));  // frozen
  EXPECT_EQ(m.lora_step(), 7);  // train_step set it to the optimizer's count
}

TEST(TrainLora, MergedExportEqualsBasePlusScaledBA) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  TrainModel m = spread_model(c);
  LoraConfig lc;
  lc.rank = 3, lc.alpha = 6, lc.dropout = 0.25f, lc.targets = {"k_proj", "up_proj", "down_proj", "o_proj"};
  m.enable_lora(lc);
  randomize_adapters(m, kSeed + 6);
  const auto merged = m.tensors();
  const auto adapters = m.lora_tensors();
  EXPECT_EQ(adapters.size(), 2u * 4 * 2);
  for (const ParamInfo& pi : m.param_info()) {
    const Tensor& t = merged.at(pi.name);
    const float* base = m.params().data() + pi.offset;
    const auto dot = pi.name.rfind(".weight");
    const std::string module = pi.name.substr(0, dot), leaf = module.substr(module.rfind('.') + 1);
    const bool targeted = dot != std::string::npos && pi.shape.size() == 2 &&
                          std::find(lc.targets.begin(), lc.targets.end(), leaf) != lc.targets.end();
    if (!targeted) {
      EXPECT_EQ(0, std::memcmp(t.data<float>(), base, pi.numel * 4)) << pi.name;
      continue;
    }
    const Tensor& A = adapters.at("base_model.model." + module + ".lora_A.weight");
    const Tensor& B = adapters.at("base_model.model." + module + ".lora_B.weight");
    const int64_t out = pi.shape[0], in = pi.shape[1];
    ASSERT_EQ(A.shape(), (std::vector<int64_t>{3, in})) << pi.name;
    ASSERT_EQ(B.shape(), (std::vector<int64_t>{out, 3})) << pi.name;
    std::vector<double> ref(pi.numel);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < 3; ++k) s += double(B.data<float>()[o * 3 + k]) * double(A.data<float>()[k * in + i]);
        ref[size_t(o * in + i)] = double(base[o * in + i]) + 2.0 * s;
      }
    EXPECT_LT(rel_error(t.data<float>(), ref.data(), pi.numel), 1e-6) << pi.name;
  }
  // The merged model computes what the adapted one does (in evaluation: no dropout).
  const Batch b = make_batch(kSeed + 7, 2, 13, c.vocab_size, 0);
  TrainModel plain(m.to_checkpoint());
  m.set_training(false);
  const int64_t before = m.lora_step();
  m.forward(b.tokens, b.targets, b.B, b.T);
  const Tensor la = m.logits();
  plain.forward(b.tokens, b.targets, b.B, b.T);
  EXPECT_LT(rel_error(la.data<float>(), plain.logits().data<float>(), size_t(la.numel())), 1e-5);
  EXPECT_EQ(m.lora_step(), before);
  LlamaModel inf(m.to_checkpoint());  // the inference engine accepts the merged weights
  EXPECT_EQ(inf.config().hidden_size, c.hidden_size);
}

TEST(TrainLora, AdapterDirectoryRoundTrip) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  TrainModel m = spread_model(c);
  LoraConfig lc;
  lc.rank = 2, lc.alpha = 8, lc.dropout = 0.05f, lc.targets = {"q_proj", "v_proj", "gate_proj"};
  m.enable_lora(lc);
  randomize_adapters(m, kSeed + 8);
  TempDir tmp("lora");
  const std::string dir = tmp / "adapter";
  m.save_lora_adapter(dir, "my/base-model");
  const Json cfg = Json::parse_file(dir + "/adapter_config.json");
  EXPECT_EQ(cfg.at("peft_type").as_string(), "LORA");
  EXPECT_EQ(cfg.at("r").as_int(), 2);
  EXPECT_EQ(cfg.at("lora_alpha").as_number(), 8.0);
  EXPECT_EQ(cfg.at("lora_dropout").as_number(), 0.05);
  EXPECT_EQ(cfg.at("base_model_name_or_path").as_string(), "my/base-model");
  EXPECT_EQ(cfg.at("target_modules").as_array().size(), 3u);
  const SafetensorsFile st = read_safetensors(dir + "/adapter_model.safetensors");
  EXPECT_TRUE(st.tensors.count("base_model.model.model.layers.1.mlp.gate_proj.lora_B.weight"));
  EXPECT_EQ(st.tensors.size(), 2u * 3 * 2);

  TrainModel back = spread_model(c);
  back.load_lora_adapter(dir, 99);
  EXPECT_EQ(back.lora_config().rank, 2);
  EXPECT_EQ(back.lora_config().seed, 99u);
  EXPECT_FLOAT_EQ(back.lora_config().dropout, 0.05f);
  ASSERT_EQ(back.trainable_params().size(), m.trainable_params().size());
  EXPECT_EQ(0, std::memcmp(back.trainable_params().data(), m.trainable_params().data(),
                           m.trainable_params().size() * 4));
  // Loading into a model whose LoRA is already on (same configuration) also works.
  TrainModel again = spread_model(c);
  again.enable_lora(lc);
  again.load_lora_adapter(dir);
  EXPECT_EQ(0, std::memcmp(again.trainable_params().data(), m.trainable_params().data(),
                           m.trainable_params().size() * 4));
  // Saving over an existing adapter replaces it whole; no temporary is left beside it.
  randomize_adapters(m, kSeed + 9);
  m.save_lora_adapter(dir);
  TrainModel third = spread_model(c);
  third.load_lora_adapter(dir);
  EXPECT_EQ(0, std::memcmp(third.trainable_params().data(), m.trainable_params().data(),
                           m.trainable_params().size() * 4));
  const auto entries = std::distance(std::filesystem::directory_iterator(tmp.path()),
                                     std::filesystem::directory_iterator());
  EXPECT_EQ(entries, 1);

  // Mismatches are named.
  TrainModel other = spread_model(c);
  LoraConfig r4 = lc;
  r4.rank = 4;
  other.enable_lora(r4);
  expect_error([&] { other.load_lora_adapter(dir); }, "does not match");
  expect_error([&] { spread_model(c).save_lora_adapter(tmp / "none"); }, "not enabled");
  const std::string bad = tmp / "bad";
  std::filesystem::create_directories(bad);
  std::ofstream(bad + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 8,
      "target_modules": ["q_proj", "qkv_proj"]})";
  expect_error([&] { spread_model(c).load_lora_adapter(bad); }, "qkv_proj");
  std::ofstream(bad + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 8,
      "target_modules": ["q_proj", "v_proj", "gate_proj"], "use_dora": true})";
  expect_error([&] { spread_model(c).load_lora_adapter(bad); }, "use_dora");
  std::ofstream(bad + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 8,
      "target_modules": ["q_proj", "v_proj", "gate_proj"]})";
  auto t = m.lora_tensors();
  t["base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight"] = Tensor::zeros({2, 31});
  write_safetensors(bad + "/adapter_model.safetensors", {t.begin(), t.end()});
  TrainModel fresh = spread_model(c);
  expect_error([&] { fresh.load_lora_adapter(bad); }, "v_proj.lora_A.weight");
  EXPECT_FALSE(fresh.lora_enabled());  // checked before the model changed
  t = m.lora_tensors();
  t["base_model.model.lm_head.lora_A.weight"] = Tensor::zeros({2, 32});
  write_safetensors(bad + "/adapter_model.safetensors", {t.begin(), t.end()});
  expect_error([&] { spread_model(c).load_lora_adapter(bad); }, "unexpected tensor");
  expect_error([&] { spread_model(c).load_lora_adapter(tmp / "missing"); }, "missing");
}

TEST(TrainLora, InvalidConfigurationsAreNamed) {
  const LlamaConfig c = tiny(4, 2, false, false);
  auto with = [](auto edit) {
    LoraConfig l;
    edit(l);
    return l;
  };
  expect_error([&] { spread_model(c).enable_lora(with([](LoraConfig& l) { l.rank = 0; })); }, "rank");
  expect_error([&] { spread_model(c).enable_lora(with([](LoraConfig& l) { l.dropout = 1.0f; })); }, "dropout");
  expect_error([&] { spread_model(c).enable_lora(with([](LoraConfig& l) { l.targets = {"qkv_proj"}; })); },
               "unknown target module 'qkv_proj'");
  expect_error([&] { spread_model(c).enable_lora(with([](LoraConfig& l) { l.targets = {"q_proj", "q_proj"}; })); },
               "twice");
  expect_error([&] { spread_model(c).enable_lora(with([](LoraConfig& l) { l.targets.clear(); })); }, "no target");
  TrainModel m = spread_model(c);
  m.enable_lora({});
  expect_error([&] { m.enable_lora({}); }, "already enabled");
  TrainModel off = spread_model(c);
  expect_error([&] { off.lora_config(); }, "not enabled");
  expect_error([&] { off.lora_tensors(); }, "not enabled");
  EXPECT_TRUE(off.lora_param_info().empty());
}

// A run resumed from its trainable parameters and AdamW state reproduces the losses bit for
// bit, dropout masks included; evaluation mode has no dropout.
TEST(TrainLora, DropoutMasksReproduceOnResume) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  const LoraConfig lc = all_targets(4, 8.0f, 0.3f);
  const Batch b = make_batch(kSeed + 10, 4, 11, c.vocab_size);
  const auto half = size_t(2 * 11);
  const MicroBatch mbs[] = {{std::span(b.tokens).first(half), std::span(b.targets).first(half), 2, 11},
                            {std::span(b.tokens).subspan(half), std::span(b.targets).subspan(half), 2, 11}};
  TrainModel full = spread_model(c);
  full.enable_lora(lc);
  AdamW of(full.trainable_params().size());
  std::vector<double> losses;
  for (int s = 0; s < 4; ++s) losses.push_back(train_step(full, of, mbs, 1e-2f, 1.0).loss);

  TrainModel first = spread_model(c);
  first.enable_lora(lc);
  AdamW o1(first.trainable_params().size());
  for (int s = 0; s < 2; ++s) EXPECT_EQ(train_step(first, o1, mbs, 1e-2f, 1.0).loss, losses[size_t(s)]);
  TrainModel resumed = spread_model(c);
  resumed.enable_lora(lc);
  std::copy(first.trainable_params().begin(), first.trainable_params().end(), resumed.trainable_params().begin());
  AdamW o2(resumed.trainable_params().size());
  std::copy(o1.first_moment().begin(), o1.first_moment().end(), o2.first_moment().begin());
  std::copy(o1.second_moment().begin(), o1.second_moment().end(), o2.second_moment().begin());
  o2.set_step_count(o1.step_count());
  for (int s = 2; s < 4; ++s) {
    const double l = train_step(resumed, o2, mbs, 1e-2f, 1.0).loss;
    std::printf("  step %d: resumed %.8f, uninterrupted %.8f\n", s, l, losses[size_t(s)]);
    EXPECT_EQ(l, losses[size_t(s)]) << "step " << s;
  }
  EXPECT_EQ(0, std::memcmp(resumed.trainable_params().data(), full.trainable_params().data(),
                           full.trainable_params().size() * 4));

  // Evaluation: no dropout, so it equals a dropout-free twin; training forwards differ per call.
  LoraConfig nodrop = lc;
  nodrop.dropout = 0;
  TrainModel twin = spread_model(c);
  twin.enable_lora(nodrop);
  std::copy(full.trainable_params().begin(), full.trainable_params().end(), twin.trainable_params().begin());
  full.set_training(false);
  EXPECT_FALSE(full.training());
  const float eval = full.forward(mbs[0].tokens, mbs[0].targets, 2, 11);
  EXPECT_EQ(eval, twin.forward(mbs[0].tokens, mbs[0].targets, 2, 11));
  full.set_training(true);
  full.set_lora_step(100);
  const float t1 = full.forward(mbs[0].tokens, mbs[0].targets, 2, 11);
  const float t2 = full.forward(mbs[0].tokens, mbs[0].targets, 2, 11);  // the next micro-batch's mask
  EXPECT_NE(t1, t2);
  full.set_lora_step(100);
  EXPECT_EQ(t1, full.forward(mbs[0].tokens, mbs[0].targets, 2, 11));
}

TEST(TrainLora, AccountingAndBench) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const LlamaConfig c = tiny(4, 2, false, false);
  const LoraConfig lc = all_targets(8, 16.0f, 0.1f);
  TrainModel m(c, kSeed, {AttentionMode::Flash, true});
  m.enable_lora(lc);
  const Batch b = make_batch(kSeed + 11, 3, 20, c.vocab_size);
  m.forward(b.tokens, b.targets, b.B, b.T);
  const ActivationMemory a = m.activation_memory();
  EXPECT_EQ(a.total(), TrainModel::activation_memory(c, m.options(), b.B, b.T, &lc).total());
  // v per adapter [N, r] (14 adapters), dropout(x) [N, max in = 40], dv [N, r].
  EXPECT_EQ(a.lora, size_t(14 * 60 * 8 + 60 * 40 + 60 * 8) * 4);
  EXPECT_EQ(TrainModel::activation_memory(c, m.options(), b.B, b.T).lora, 0u);

  TrainBenchOptions o;
  o.batch = 2, o.seq = 16, o.warmup = 0, o.reps = 1, o.lora = lc;
  const LlamaConfig pc = preset_config("tiny");
  const TrainBenchResult r = bench_train_step(pc, o);
  EXPECT_LT(r.trainable_params, size_t(pc.num_parameters()) / 4);
  EXPECT_EQ(r.memory.optimizer, 2 * r.trainable_params * 4);
  EXPECT_EQ(r.memory.grads, r.trainable_params * 4);
  EXPECT_DOUBLE_EQ(r.flops_per_step, train_step_flops(pc, 2, 16, &lc));
  EXPECT_LT(r.flops_per_step, train_step_flops(pc, 2, 16));
  const Json j = r.to_json();
  EXPECT_EQ(j.at("lora").at("rank").as_int(), 8);
  EXPECT_EQ(j.at("trainable_params").as_int(), int64_t(r.trainable_params));
}

// LoRA under bf16 matmuls tracks LoRA in f32 (where the CPU runs bf16).
TEST(TrainLora, Bf16TracksF32) {
  if (effective_precision(Precision::Bf16) != Precision::Bf16) GTEST_SKIP() << "no AVX512-BF16";
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  LlamaConfig c = tiny(4, 2, false, false);
  c.hidden_size = 64, c.head_dim = 16, c.intermediate_size = 96;
  const LoraConfig lc = all_targets(4, 8.0f, 0.1f);
  const Batch b = make_batch(kSeed + 12, 4, 17, c.vocab_size);
  const MicroBatch mb{b.tokens, b.targets, b.B, b.T};
  TrainModel f = spread_model(c, {AttentionMode::Flash, false, Precision::F32});
  TrainModel h = spread_model(c, {AttentionMode::Flash, false, Precision::Bf16});
  f.enable_lora(lc);
  h.enable_lora(lc);
  AdamW of(f.trainable_params().size()), oh(h.trainable_params().size());
  for (int s = 0; s < 6; ++s) {
    const double lf = train_step(f, of, {&mb, 1}, 1e-2f, 1.0).loss, lh = train_step(h, oh, {&mb, 1}, 1e-2f, 1.0).loss;
    EXPECT_NEAR(lh / lf, 1.0, 0.03) << "step " << s;
  }
}

}  // namespace

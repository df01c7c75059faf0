// Perplexity, multiple choice and KL divergence against independent computations: logits from
// the NumPy reference (tests/models/llama_ref.py) scored here in double, and multiple-choice
// scores from a fresh full forward pass per choice (no shared-prefix cache).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/eval.h"
#include "genperf/fileio.h"

using namespace genperf;
using genperf::testing::TempDir;

namespace {

// Bytes as tokens 0..255, BOS 256, EOS 257: a tokenizer whose behaviour the test knows exactly.
class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(bool with_bos) : with_bos_(with_bos) {}
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos && with_bos_) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t i : ids) if (i < 256) s += char(i);
    return s;
  }
  std::string piece(int32_t id) const override { return id < 256 ? std::string(1, char(id)) : ""; }
  int32_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return with_bos_ ? 256 : -1; }
  int32_t eos_id() const override { return 257; }
  bool add_bos() const override { return with_bos_; }
  const char* kind() const override { return "bytes"; }
  TokenizerVocab vocab() const override { return {}; }

 private:
  bool with_bos_;
};

LlamaConfig byte_config() {
  LlamaConfig c;
  c.vocab_size = 258;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  return c;
}

LlamaModel byte_model(uint64_t seed, const std::string& save_dir = "", bool with_bos = true) {
  Checkpoint ck = random_checkpoint(byte_config(), DType::F32, seed);
  if (!save_dir.empty()) save_hf_checkpoint(save_dir, ck.config, ck.tensors);
  ck.tokenizer = std::make_unique<ByteTokenizer>(with_bos);
  return LlamaModel(std::move(ck));
}

std::vector<float> ref_logits(const std::string& dir, const std::vector<int32_t>& ids, const TempDir& tmp) {
  const std::string list = genperf::testing::join_ids(ids);
  const std::string out = tmp / "logits.bin";
  const std::string cmd = std::string(GENPERF_PYTHON) + " " + GENPERF_TEST_DIR + "/models/llama_ref.py --model " +
                          dir + " --ids " + list + " --logits " + out;
  EXPECT_EQ(genperf::testing::run_command(cmd), 0) << cmd;
  return genperf::testing::read_floats(out);
}

double ref_log_prob(const std::vector<float>& logits, int64_t V, int64_t row, int32_t tok) {
  double mx = -INFINITY, s = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(logits[size_t(row * V + i)]));
  for (int64_t i = 0; i < V; ++i) s += std::exp(double(logits[size_t(row * V + i)]) - mx);
  return double(logits[size_t(row * V + tok)]) - mx - std::log(s);
}

const std::string kText = "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.";

TEST(Eval, PerplexityMatchesReferenceWindows) {
  const uint64_t seed = 11;
  std::printf("seed %llu\n", (unsigned long long)seed);
  TempDir tmp("ppl");
  LlamaModel m = byte_model(seed, tmp / "m");
  const int64_t ctx = 40, V = 258;
  const PerplexityResult r = perplexity(m, kText, ctx);
  // Independent: windows of ctx bytes, each fed as [BOS] + window[:-1], all window bytes scored.
  double nll = 0;
  int64_t n = 0;
  for (size_t start = 0; start < kText.size(); start += size_t(ctx)) {
    const std::string w = kText.substr(start, size_t(ctx));
    std::vector<int32_t> in = {256};
    for (size_t i = 0; i + 1 < w.size(); ++i) in.push_back((unsigned char)w[i]);
    const auto l = ref_logits(tmp / "m", in, tmp);
    for (size_t i = 0; i < w.size(); ++i) nll -= ref_log_prob(l, V, int64_t(i), (unsigned char)w[i]), ++n;
  }
  EXPECT_EQ(r.tokens, int64_t(kText.size()));
  EXPECT_EQ(r.windows, int64_t((kText.size() + ctx - 1) / ctx));
  EXPECT_NEAR(r.nll, nll / double(n), 1e-5 * nll / double(n));
  EXPECT_NEAR(r.ppl, std::exp(nll / double(n)), 1e-4 * r.ppl);
  EXPECT_THROW(perplexity(m, kText, 65), Error);  // beyond max_position_embeddings
  EXPECT_THROW(perplexity(m, "", 16), Error);
}

TEST(Eval, MultipleChoiceMatchesFullRecompute) {
  const uint64_t seed = 12;
  std::printf("seed %llu\n", (unsigned long long)seed);
  LlamaModel m = byte_model(seed);
  std::vector<McTask> tasks = {
      {"The cat sat on the", {" mat", " moon", " quietly singing"}, 0},
      {"Anne Elliot", {" walked", " ran", " was", " sat"}, 2},
      {"x", {"yz", "q"}, 1},
  };
  const McResult r = multiple_choice(m, tasks);
  // Independent: score each full sequence from scratch.
  std::vector<double> lp;
  int correct = 0, correct_norm = 0, correct_pmi = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    double best = -INFINITY, best_norm = -INFINITY, best_pmi = -INFINITY;
    int pick = -1, pick_norm = -1, pick_pmi = -1;
    for (size_t c = 0; c < tasks[t].choices.size(); ++c) {
      const auto ids = m.tokenizer()->encode(tasks[t].context + tasks[t].choices[c], true);
      Session s(m, 64);
      Tensor l = m.forward(s, ids, LogitsFor::All);
      const size_t n_ctx = tasks[t].context.size() + 1;
      double score = 0;
      for (size_t i = n_ctx; i < ids.size(); ++i) {
        log_softmax(l.row<float>(int64_t(i - 1)), l.size(1), lp);
        score += lp[size_t(ids[i])];
      }
      const double norm = score / double(tasks[t].choices[c].size());
      // PMI: the choice's bytes after BOS alone, scored from scratch too.
      std::vector<int32_t> u = {256};
      u.insert(u.end(), ids.begin() + int64_t(n_ctx), ids.end());
      Session su(m, 64);
      Tensor lu = m.forward(su, u, LogitsFor::All);
      double uncond = 0;
      for (size_t i = 1; i < u.size(); ++i) {
        log_softmax(lu.row<float>(int64_t(i - 1)), lu.size(1), lp);
        uncond += lp[size_t(u[i])];
      }
      const double pmi = score - uncond;
      if (score > best) best = score, pick = int(c);
      if (norm > best_norm) best_norm = norm, pick_norm = int(c);
      if (pmi > best_pmi) best_pmi = pmi, pick_pmi = int(c);
    }
    EXPECT_EQ(r.predictions[t], pick) << "task " << t;
    EXPECT_EQ(r.predictions_norm[t], pick_norm) << "task " << t;
    EXPECT_EQ(r.predictions_pmi[t], pick_pmi) << "task " << t;
    correct += pick == tasks[t].gold;
    correct_norm += pick_norm == tasks[t].gold;
    correct_pmi += pick_pmi == tasks[t].gold;
  }
  EXPECT_DOUBLE_EQ(r.acc, correct / 3.0);
  EXPECT_DOUBLE_EQ(r.acc_norm, correct_norm / 3.0);
  EXPECT_DOUBLE_EQ(r.acc_pmi, correct_pmi / 3.0);
}

TEST(Eval, McTaskFileErrorsNameTheLine) {
  TempDir tmp("mc");
  write_file_atomic(tmp / "ok.jsonl", "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 1}\n\n");
  EXPECT_EQ(read_mc_tasks(tmp / "ok.jsonl").size(), 1u);
  for (const std::string bad : {"{\"context\": \"a\", \"choices\": [\"b\"], \"gold\": 0}",
                                "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 2}",
                                "{\"context\": 3, \"choices\": [\"b\", \"c\"], \"gold\": 0}",
                                "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 0",
                                "[1, 2]"}) {
    write_file_atomic(tmp / "bad.jsonl", "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 1}\n" + bad + "\n");
    try {
      read_mc_tasks(tmp / "bad.jsonl");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
    }
  }
}

TEST(Eval, KlDivergence) {
  const uint64_t seed = 13;
  std::printf("seed %llu\n", (unsigned long long)seed);
  TempDir tmp("kl");
  LlamaModel a = byte_model(seed, tmp / "a"), a2 = byte_model(seed), b = byte_model(seed + 1, tmp / "b");
  const KlResult same = kl_divergence(a, a2, kText, 32);
  EXPECT_LT(same.kl_mean, 1e-9);
  EXPECT_DOUBLE_EQ(same.top1_agreement, 1.0);
  EXPECT_NEAR(same.ppl_delta(), 0.0, 1e-9);
  // Against an independent computation from the NumPy reference logits of both models.
  const KlResult r = kl_divergence(b, a, kText, 32);
  const int64_t V = 258;
  std::vector<double> kls;
  int agree = 0;
  for (size_t start = 0; start < kText.size(); start += 32) {
    const std::string w = kText.substr(start, 32);
    std::vector<int32_t> in = {256};
    for (size_t i = 0; i + 1 < w.size(); ++i) in.push_back((unsigned char)w[i]);
    const auto la = ref_logits(tmp / "a", in, tmp), lb = ref_logits(tmp / "b", in, tmp);
    for (size_t t = 0; t < w.size(); ++t) {
      double kl = 0;
      int64_t am = 0, bm = 0;
      for (int64_t i = 0; i < V; ++i) {
        const double pa = ref_log_prob(la, V, int64_t(t), int32_t(i)), pb = ref_log_prob(lb, V, int64_t(t), int32_t(i));
        kl += std::exp(pa) * (pa - pb);
        if (la[t * V + i] > la[t * V + am]) am = i;
        if (lb[t * V + i] > lb[t * V + bm]) bm = i;
      }
      kls.push_back(kl);
      agree += am == bm;
    }
  }
  double mean = 0;
  for (double k : kls) mean += k;
  mean /= double(kls.size());
  EXPECT_EQ(r.tokens, int64_t(kls.size()));
  EXPECT_NEAR(r.kl_mean, mean, 1e-4 * mean);
  EXPECT_NEAR(r.top1_agreement, double(agree) / double(kls.size()), 1e-12);
  EXPECT_GT(r.kl_p99, r.kl_mean);
}

}  // namespace

// Training data and the training loop: packing text with EOS separators, prompt/response loss
// masks (checked against the tokenizer independently), the validation split, the seeded loader
// and its position, and resumable state (a run split at step k gives the same losses bit for bit;
// truncated or foreign state files are refused with a clear error).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/llama.h"
#include "genperf/rng.h"
#include "genperf/trainer.h"

using namespace genperf;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A small tokenizer trained once for the suite on seeded synthetic sentences.
class Data : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("trainer");
    const char* words[] = {"the", "king", "went", "to", "a", "house", "and", "said", "unto", "them",
                           "she", "was", "very", "happy", "with", "her", "sister", "in", "town", "of"};
    Rng rng(7);
    std::string text;
    for (int line = 0; line < 600; ++line) {
      const int n = 3 + int(rng.next() % 12);
      for (int w = 0; w < n; ++w) text += cat(w ? " " : "", words[rng.next() % 20]);
      text += ".\n";
    }
    write_file_atomic(*dir_ / "text.txt", text);
    train_sentencepiece({*dir_ / "text.txt"}, *dir_ / "tok.model", 300, 1);
    tok_ = load_sentencepiece(*dir_ / "tok.model").release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete dir_;
  }
  static const Tokenizer& tok() { return *tok_; }
  static std::string text() { return read_text_file(*dir_ / "text.txt"); }
  static TempDir* dir_;
  static Tokenizer* tok_;
};
TempDir* Data::dir_ = nullptr;
Tokenizer* Data::tok_ = nullptr;

TEST_F(Data, TrainedTokenizerHasTheRequestedShape) {
  EXPECT_EQ(tok().vocab_size(), 300);
  EXPECT_EQ(tok().bos_id(), 1);
  EXPECT_EQ(tok().eos_id(), 2);
  EXPECT_EQ(tok().decode(tok().encode("the king said unto them", false)), "the king said unto them");
  EXPECT_THROW(train_sentencepiece({*dir_ / "missing.txt"}, *dir_ / "x.model", 300, 1), Error);
  EXPECT_FALSE(fs::exists(*dir_ / "x.model"));
}

TEST_F(Data, PackedTextIsTheDocumentStreamWithEos) {
  const std::string t = "the king went to a house.\n\nshe was very happy.\nand said unto them.\n";
  // The expected stream, built independently: BOS? + ids + EOS per non-empty line.
  std::vector<int32_t> stream;
  for (const char* line : {"the king went to a house.", "she was very happy.", "and said unto them."}) {
    auto ids = tok().encode(line, true);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(tok().eos_id());
  }
  for (int64_t T : {int64_t(1), int64_t(3), int64_t(7), int64_t(stream.size()) - 1}) {
    const TokenSequences s = pack_text(tok(), t, T, "t");
    const int64_t n = (int64_t(stream.size()) - 1) / T;
    ASSERT_EQ(s.size(), n) << "T " << T;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < T; ++j) {
        EXPECT_EQ(s.tokens_of(i)[size_t(j)], stream[size_t(i * T + j)]);
        EXPECT_EQ(s.targets_of(i)[size_t(j)], stream[size_t(i * T + j + 1)]);
      }
  }
  EXPECT_THROW(pack_text(tok(), t, int64_t(stream.size()), "t"), Error);  // no room for the last target
  EXPECT_THROW(pack_text(tok(), "\n  \n", 4, "t"), Error);
}

TEST_F(Data, PromptResponseScoresOnlyTheResponse) {
  TempDir d("pr");
  const std::string f = d / "qa.jsonl";
  write_file_atomic(f, "{\"prompt\": \"the king went to\", \"response\": \" a house.\"}\n\n"
                       "{\"prompt\": \"she said\", \"response\": \" unto them.\"}\n");
  const int64_t T = 24;
  const TokenSequences s = read_prompt_response(tok(), f, T);
  ASSERT_EQ(s.size(), 2);
  const std::pair<const char*, const char*> recs[] = {{"the king went to", " a house."}, {"she said", " unto them."}};
  for (int i = 0; i < 2; ++i) {
    std::vector<int32_t> all = tok().encode(std::string(recs[i].first) + recs[i].second, true);
    all.push_back(tok().eos_id());
    const auto prompt = tok().encode(recs[i].first, true);
    size_t start = 0;
    while (start < prompt.size() && prompt[start] == all[start]) ++start;
    std::vector<int32_t> scored;
    for (int64_t j = 0; j < T; ++j)
      if (s.targets_of(i)[size_t(j)] >= 0) scored.push_back(s.targets_of(i)[size_t(j)]);
    // Exactly the response's tokens and the EOS are scored.
    EXPECT_EQ(scored, std::vector<int32_t>(all.begin() + ptrdiff_t(start), all.end())) << i;
    EXPECT_EQ(s.tokens_of(i)[0], all[0]);
  }
  // Too long: an error naming the file and line, or truncation keeping the response.
  try {
    read_prompt_response(tok(), f, 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(f + ":1"), std::string::npos) << e.what();
  }
  const TokenSequences cut = read_prompt_response(tok(), f, 5, true);
  EXPECT_EQ(cut.size(), 2);
  EXPECT_GT(cut.scored(), 0);
  // Malformed records.
  for (const char* bad : {"{\"prompt\": \"a\"}", "[1, 2]", "{\"prompt\": 1, \"response\": \"x\"}", "{oops"}) {
    write_file_atomic(d / "bad.jsonl", std::string(bad) + "\n");
    EXPECT_THROW(read_prompt_response(tok(), d / "bad.jsonl", T), Error) << bad;
  }
}

TEST_F(Data, ValidationSplitAndLoaderAreSeeded) {
  const TokenSequences all = pack_text(tok(), text(), 8, "text");
  ASSERT_GT(all.size(), 100);
  const DataSplit a = split_validation(all, 0.1, 1), b = split_validation(all, 0.1, 1), c = split_validation(all, 0.1, 2);
  EXPECT_EQ(a.validation.size(), all.size() / 10);
  EXPECT_EQ(a.train.size() + a.validation.size(), all.size());
  EXPECT_EQ(a.validation.tokens, b.validation.tokens);
  EXPECT_NE(a.validation.tokens, c.validation.tokens);
  EXPECT_THROW(split_validation(all, 1.0, 1), Error);

  DataLoader l1(a.train, 4, 9), l2(a.train, 4, 9);
  std::vector<int32_t> t1, g1, t2, g2;
  std::multiset<int32_t> epoch_first;
  const int64_t per_epoch = l1.batches_per_epoch();
  // An epoch draws distinct sequences: its first tokens are a sub-multiset of the data's.
  for (int64_t i = 0; i < per_epoch; ++i) {
    l1.next(t1, g1);
    for (int b = 0; b < 4; ++b) epoch_first.insert(t1[size_t(b) * 8]);
  }
  std::multiset<int32_t> all_first;
  for (int64_t i = 0; i < a.train.size(); ++i) all_first.insert(a.train.tokens_of(i)[0]);
  EXPECT_TRUE(std::includes(all_first.begin(), all_first.end(), epoch_first.begin(), epoch_first.end()));
  // A second loader sought to the first one's position continues identically, across epochs.
  for (int i = 0; i < 3; ++i) l1.next(t1, g1);
  l2.seek(l1.position());
  for (int i = 0; i < per_epoch + 5; ++i) {
    l1.next(t1, g1);
    l2.next(t2, g2);
    ASSERT_EQ(t1, t2);
    ASSERT_EQ(g1, g2);
  }
  EXPECT_GE(l1.position().epoch, 2);
  EXPECT_THROW(l2.seek({0, a.train.size() + 1}), Error);
  EXPECT_THROW(DataLoader(a.validation, a.validation.size() + 1, 1), Error);
}

// A tiny model and a trainer over the synthetic text.
struct TinyRun {
  LlamaConfig c;
  TokenSequences train, val;
  explicit TinyRun(const Tokenizer& tok, const std::string& text) {
    c = preset_config("tiny");
    c.vocab_size = tok.vocab_size();
    const DataSplit s = split_validation(pack_text(tok, text, 16, "text"), 0.05, 3);
    train = s.train;
    val = s.validation;
  }
  TrainerConfig config() const {
    TrainerConfig tc;
    tc.batch = 3;
    tc.grad_accum = 2;
    tc.steps = 8;
    tc.schedule.max_lr = 3e-3f;
    tc.schedule.warmup_steps = 2;
    tc.save_every = 3;
    tc.seed = 5;
    return tc;
  }
};

std::vector<double> losses(Trainer& t, int64_t until, const std::string& state) {
  std::vector<double> out;
  Trainer::Callbacks cb;
  cb.on_step = [&](const StepRecord& r) { out.push_back(r.loss); };
  t.run(until, state, cb);
  return out;
}

TEST_F(Data, ResumedRunGivesTheSameLossesBitForBit) {
  const TinyRun run(tok(), text());
  TempDir d("resume");
  TrainModel whole(run.c, 11);
  Trainer tw(whole, run.train, run.val, run.config());
  const std::vector<double> ref = losses(tw, 8, "");
  ASSERT_EQ(ref.size(), 8u);
  EXPECT_LT(ref.back(), ref.front());  // it learns

  // Stopped after step 5 (state saved at 3 and 5), then resumed in a fresh model and trainer.
  std::vector<double> split;
  {
    TrainModel m(run.c, 11);
    Trainer t(m, run.train, run.val, run.config());
    split = losses(t, 5, d / "state.safetensors");
    EXPECT_EQ(t.step(), 5);
  }
  TrainModel m2(run.c, 99);  // other initial weights: the state must overwrite them
  Trainer t2(m2, run.train, run.val, run.config());
  t2.load_state(d / "state.safetensors");
  EXPECT_EQ(t2.step(), 5);
  const std::vector<double> rest = losses(t2, 8, d / "state.safetensors");
  split.insert(split.end(), rest.begin(), rest.end());
  ASSERT_EQ(split.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(split[i], ref[i]) << "step " << i + 1;
  // The final weights agree bit for bit as well.
  const auto pw = whole.params(), p2 = m2.params();
  EXPECT_TRUE(std::equal(pw.begin(), pw.end(), p2.begin()));
  EXPECT_EQ(tw.validation_loss(), t2.validation_loss());
}

TEST_F(Data, BadStateFilesAreRefused) {
  const TinyRun run(tok(), text());
  TempDir d("badstate");
  TrainModel m(run.c, 1);
  Trainer t(m, run.train, run.val, run.config());
  losses(t, 3, d / "s.safetensors");
  const std::string good = d / "s.safetensors";
  auto expect_refused = [&](const std::string& path, const std::string& what, Trainer& tr) {
    try {
      tr.load_state(path);
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  // Cut short.
  fs::copy_file(good, d / "cut.safetensors");
  fs::resize_file(d / "cut.safetensors", fs::file_size(good) - 100);
  TrainModel m1(run.c, 1);
  Trainer t1(m1, run.train, run.val, run.config());
  expect_refused(d / "cut.safetensors", "", t1);
  EXPECT_EQ(t1.step(), 0);
  // Another model shape.
  LlamaConfig other = run.c;
  other.intermediate_size += 8;
  TrainModel m3(other, 1);
  Trainer t3(m3, run.train, run.val, run.config());
  expect_refused(good, "another model", t3);
  // Other data order.
  TrainerConfig seeded = run.config();
  seeded.seed = 6;
  TrainModel m4(run.c, 1);
  Trainer t4(m4, run.train, run.val, seeded);
  expect_refused(good, "other training data", t4);
  // Not a state at all: a model file.
  TrainModel m5(run.c, 1);
  Trainer t5(m5, run.train, run.val, run.config());
  save_hf_checkpoint(d / "model", run.c, m5.tensors());
  expect_refused(d / "model/model.safetensors", "not a genperf training state", t5);
}

}  // namespace

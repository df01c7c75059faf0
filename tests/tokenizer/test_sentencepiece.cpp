// SentencePiece: genperf's tokenizer against python3-sentencepiece on held-out Bible text, for
// a BPE model shaped like Llama's (identity normalizer, byte fallback) and a unigram model with
// SentencePiece's default NFKC normalizer; both also rebuilt from their GGUF vocabulary.
#include <gtest/gtest.h>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/tokenizer.h"
#include "test_helpers.h"

using namespace genperf;
using namespace tokenizer_test;

namespace {

constexpr uint32_t kSeed = 20240611;
constexpr size_t kTexts = 2500;

// Trains both models once for the whole binary; `failure` says why when it could not.
struct SpmModels {
  TempDir dir;
  std::string failure;
  std::string bpe, unigram;  // model paths
  std::vector<std::string> texts;
};

std::string train(const TempDir& dir, const std::string& name, const std::string& flags) {
  const std::string cmd = "spm_train --input=" + shell_quote(dir.file("train.txt")) + " --model_prefix=" +
                          shell_quote(dir.file(name)) +
                          " --vocab_size=2000 --character_coverage=1.0 --byte_fallback=true --num_threads=2"
                          " --minloglevel=2 " + flags;
  std::printf("%s\n", cmd.c_str());
  std::string out;
  if (run_command(cmd, &out) != 0) return "spm_train failed: " + out;
  return "";
}

void prepare(SpmModels& s) {
  const std::vector<std::pair<std::string, std::string>> tools = {
      {"command -v spm_train", "sentencepiece"},
      {"command -v bible", "bible-kjv"},
      {std::string(python()) + " -c 'import sentencepiece'", "python3-sentencepiece"}};
  for (const auto& [probe, pkg] : tools) {
    if (auto r = have(probe, pkg); !r) {
      s.failure = r.message();
      return;
    }
  }
  std::string train_text;
  for (const auto& l : training_lines(5000)) train_text += l + "\n";
  write_file(s.dir.file("train.txt"), train_text);
  s.failure = train(s.dir, "bpe", "--model_type=bpe --normalization_rule_name=identity --remove_extra_whitespaces=false");
  if (s.failure.empty()) s.failure = train(s.dir, "unigram", "--model_type=unigram");
  s.bpe = s.dir.file("bpe.model");
  s.unigram = s.dir.file("unigram.model");
  std::printf("seed %u for the held-out texts\n", kSeed);
  s.texts = held_out_texts(kSeed, kTexts, /*multiline=*/true);
  describe(s.texts);
  write_texts(s.dir.file("texts.json"), s.texts);
}

SpmModels& models() {
  static SpmModels m;
  static const bool ready = (prepare(m), true);
  (void)ready;
  return m;
}

// python3-sentencepiece's ids and decoded texts for `model`.
Json python_encode(const std::string& model) {
  const auto& m = models();
  const std::string out = model + ".ids.json";
  const std::string cmd = std::string(python()) + " " + shell_quote(test_dir() + "/spm_ref.py") + " " +
                          shell_quote(model) + " " + shell_quote(m.dir.file("texts.json")) + " " + shell_quote(out);
  std::string log;
  if (run_command(cmd, &log) != 0) throw Error("spm_ref.py failed: " + log);
  return Json::parse_file(out);
}

// Encodes every held-out text with `tok` and compares with Python; counts mismatches.
void expect_same_ids(const Tokenizer& tok, const std::vector<std::vector<int32_t>>& want, const char* what) {
  const auto& texts = models().texts;
  ASSERT_EQ(want.size(), texts.size());
  int bad = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tok.encode(texts[i], false);
    if (got != want[i] && ++bad <= 3) {
      ADD_FAILURE() << what << ": text " << i << " '" << texts[i] << "'\n  genperf " << ids_str(got)
                    << "\n  python  " << ids_str(want[i]);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << texts.size() << " texts differ";
}

}  // namespace

TEST(SentencePiece, BpeModelMatchesPythonAndRoundTrips) {
  const auto& m = models();
  ASSERT_TRUE(m.failure.empty()) << m.failure;
  const Json ref = python_encode(m.bpe);
  const auto want = id_lists(ref.at("ids"));
  const auto tok = load_sentencepiece(m.bpe);
  EXPECT_STREQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 2000);
  expect_same_ids(*tok, want, "tokenizer.model");

  // Identity normalization and byte fallback make decoding exact, and the pieces of a stream
  // concatenate to the text behind the dummy-prefix space.
  int bad_decode = 0, bad_stream = 0;
  for (size_t i = 0; i < m.texts.size(); ++i) {
    const auto ids = tok->encode(m.texts[i], false);
    if (tok->decode(ids) != m.texts[i] && ++bad_decode <= 3) ADD_FAILURE() << "decode differs: '" << m.texts[i] << "'";
    std::string stream;
    for (int32_t id : ids) stream += tok->piece(id);
    if (stream != " " + m.texts[i] && ++bad_stream <= 3) ADD_FAILURE() << "pieces differ: '" << stream << "'";
  }
  EXPECT_EQ(bad_decode, 0);
  EXPECT_EQ(bad_stream, 0);

  // GGUF route: the vocabulary alone rebuilds the same tokenizer.
  const TokenizerVocab v = tok->vocab();
  EXPECT_TRUE(v.precompiled_charsmap.empty());
  EXPECT_FALSE(v.remove_extra_whitespaces);
  const auto rebuilt = tokenizer_from_vocab(v, "bpe.gguf");
  expect_same_ids(*rebuilt, want, "tokenizer_from_vocab");
  EXPECT_EQ(rebuilt->decode(rebuilt->encode(m.texts[7], false)), m.texts[7]);
}

TEST(SentencePiece, UnigramNfkcModelMatchesPython) {
  const auto& m = models();
  ASSERT_TRUE(m.failure.empty()) << m.failure;
  const Json ref = python_encode(m.unigram);
  const auto want = id_lists(ref.at("ids"));
  const auto& decoded = ref.at("decoded").as_array();
  const auto tok = load_sentencepiece(m.unigram);
  expect_same_ids(*tok, want, "tokenizer.model");
  int bad = 0;
  for (size_t i = 0; i < m.texts.size(); ++i)
    if (tok->decode(want[i]) != decoded[i].as_string() && ++bad <= 3) ADD_FAILURE() << "decode of text " << i;
  EXPECT_EQ(bad, 0);

  // The rebuilt model must find out it is unigram and carry the NFKC character map.
  const TokenizerVocab v = tok->vocab();
  EXPECT_FALSE(v.precompiled_charsmap.empty());
  EXPECT_TRUE(v.remove_extra_whitespaces);
  expect_same_ids(*tokenizer_from_vocab(v, "unigram.gguf"), want, "tokenizer_from_vocab");
}

TEST(SentencePiece, VocabularyAndSpecialTokens) {
  const auto& m = models();
  ASSERT_TRUE(m.failure.empty()) << m.failure;
  const Json ref = python_encode(m.bpe);
  const auto tok = load_sentencepiece(m.bpe);
  const TokenizerVocab v = tok->vocab();
  EXPECT_EQ(v.model, "llama");
  ASSERT_EQ(v.tokens.size(), 2000u);
  ASSERT_EQ(v.scores.size(), 2000u);
  ASSERT_EQ(v.token_types.size(), 2000u);
  EXPECT_EQ(v.unk_id, ref.at("unk").as_int());
  EXPECT_EQ(v.bos_id, ref.at("bos").as_int());
  EXPECT_EQ(v.eos_id, ref.at("eos").as_int());
  EXPECT_EQ(v.pad_id, ref.at("pad").as_int());
  EXPECT_EQ(v.token_types[v.unk_id], 2);
  EXPECT_EQ(v.token_types[v.bos_id], 3);
  EXPECT_EQ(v.tokens[v.bos_id], "<s>");
  EXPECT_EQ(std::count(v.token_types.begin(), v.token_types.end(), 6), 256);
  EXPECT_EQ(tok->piece(tok->encode("\xF0\x9F\x98\x80", false).back()), "\x80");  // last byte of U+1F600
  EXPECT_EQ(tok->piece(v.bos_id), "");
  EXPECT_TRUE(tok->add_bos());
  const auto with_bos = tok->encode("In the beginning", true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], v.bos_id);
  EXPECT_EQ(tok->decode(with_bos), "In the beginning");  // control tokens are skipped
  EXPECT_THROW(tok->decode({2000}), Error);
  EXPECT_THROW(tok->piece(-1), Error);

  // A model directory: tokenizer_config.json turns BOS off and EOS on.
  TempDir dir;
  std::filesystem::copy_file(m.bpe, dir.file("tokenizer.model"));
  write_file(dir.file("tokenizer_config.json"),
             R"({"add_bos_token": false, "add_eos_token": true, "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  const auto configured = load_tokenizer_dir(dir.path());
  EXPECT_FALSE(configured->add_bos());
  const auto ids = configured->encode("In the beginning", true);
  EXPECT_EQ(ids, [&] { auto x = tok->encode("In the beginning", false); x.push_back(v.eos_id); return x; }());
  EXPECT_FALSE(configured->vocab().add_bos);
  EXPECT_TRUE(configured->vocab().add_eos);

  // Llama 2 directories also carry a byte-fallback tokenizer.json; the .model is what is read.
  write_file(dir.file("tokenizer.json"),
             R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}, "merges": []}, "pre_tokenizer": null})");
  EXPECT_STREQ(load_tokenizer_dir(dir.path())->kind(), "sentencepiece");
  std::filesystem::remove(dir.file("tokenizer.model"));
  try {
    load_tokenizer_dir(dir.path());
    ADD_FAILURE() << "a byte-fallback tokenizer.json alone must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte_fallback"), std::string::npos) << e.what();
  }
}

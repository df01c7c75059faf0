// Broken inputs: every malformed tokenizer.json, tokenizer.model, config file or GGUF vocabulary
// must give a genperf::Error that names the file and the problem, never a crash or another
// exception; seeded mutations of valid files must load or fail the same way.
#include <gtest/gtest.h>

#include <random>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/tokenizer.h"
#include "io/unicode.h"
#include "test_helpers.h"

using namespace genperf;
using namespace tokenizer_test;

namespace {

// Runs `f`, which must throw a genperf::Error whose message names `file` and contains `detail`.
template <typename F>
void expect_error(F&& f, const std::string& file, const std::string& detail) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << file << " with '" << detail << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(file), std::string::npos) << "message does not name " << file << ": " << m;
    EXPECT_NE(m.find(detail), std::string::npos) << "message lacks '" << detail << "': " << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a genperf::Error: " << e.what();
  }
}

// A small valid byte-level tokenizer.json: the 256 byte tokens, "Ġt", "he", "Ġthe", and <|end|>.
Json tiny_bpe_json() {
  Json vocab = Json::Object{};
  for (int b = 0; b < 256; ++b) {
    std::string s;
    unicode::append_utf8(s, unicode::byte_to_code_point(uint8_t(b)));
    vocab[s] = b;
  }
  vocab["\u0120t"] = 256;
  vocab["he"] = 257;
  vocab["\u0120the"] = 258;
  Json j = Json::Object{};
  j["added_tokens"] = Json::Array{Json::Object{{"id", 259}, {"content", "<|end|>"}, {"special", true}}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = Json::Object{
      {"type", "Sequence"},
      {"pretokenizers",
       Json::Array{Json::Object{{"type", "Split"},
                                {"pattern", Json::Object{{"Regex", R"( ?\p{L}+|\s+|[^\s\p{L}]+)"}}},
                                {"behavior", "Isolated"}},
                   Json::Object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  j["model"] = Json::Object{{"type", "BPE"}, {"vocab", vocab},
                            {"merges", Json::Array{"\u0120 t", "h e", "\u0120t he"}}};
  return j;
}

std::string write_json(const TempDir& dir, const Json& j, const std::string& name = "tokenizer.json") {
  write_file(dir.file(name), j.dump());
  return dir.file(name);
}

}  // namespace

TEST(TokenizerErrors, ValidTinyJsonLoads) {
  TempDir dir;
  const auto tok = load_bpe_json(write_json(dir, tiny_bpe_json()));
  EXPECT_EQ(tok->encode(" the", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok->encode("he<|end|>", false), (std::vector<int32_t>{257, 259}));
  EXPECT_EQ(tok->decode({258, 259}), " the");
  // A pre-tokenizer regex of its own works, but has no GGUF name.
  expect_error([&] { tok->vocab(); }, dir.file("tokenizer.json"), "no GGUF name");
}

TEST(TokenizerErrors, MalformedTokenizerJson) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.json");
  auto load_text = [&](const std::string& text) {
    write_file(path, text);
    return [&] { load_bpe_json(path); };
  };
  expect_error([&] { load_bpe_json(dir.file("absent.json")); }, dir.file("absent.json"), "not found");
  expect_error(load_text(""), path, "empty");
  expect_error(load_text("{\"model\": "), path, "");
  expect_error(load_text("[1, 2]"), path, "expected an object");

  auto broken = [&](auto&& edit, const std::string& detail) {
    Json j = tiny_bpe_json();
    edit(j);
    write_json(dir, j);
    expect_error([&] { load_bpe_json(path); }, path, detail);
  };
  broken([](Json& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece");
  broken([](Json& j) { j["model"] = 3; }, "model");
  broken([](Json& j) { j["model"]["vocab"] = Json::Array{}; }, "vocab");
  broken([](Json& j) { j["model"]["vocab"]["x"] = "seven"; }, "expected");
  broken([](Json& j) { j["model"]["vocab"]["x"] = 1.5; }, "");
  broken([](Json& j) { j["model"]["vocab"]["x"] = -5; }, "id -5");
  broken([](Json& j) { j["model"]["vocab"]["x"] = 1e12; }, "has id");
  broken([](Json& j) { j["model"]["vocab"]["x"] = 7; }, "is given to both");
  broken([](Json& j) { j["model"]["merges"].push_back("q zz"); }, "needs token 'zz'");
  broken([](Json& j) { j["model"]["merges"].push_back("t h"); }, "needs token 'th'");
  broken([](Json& j) { j["model"]["merges"].push_back("nospace"); }, "not two tokens");
  broken([](Json& j) { j["model"]["merges"].push_back(Json::Array{"t"}); }, "neither");
  broken([](Json& j) { j["model"]["merges"] = nullptr; }, "merges");
  broken([](Json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
  broken([](Json& j) { j["model"]["unk_token"] = "<unk>"; }, "'<unk>' is not in the vocabulary");
  broken([](Json& j) { j["normalizer"] = Json::Object{{"type", "Lowercase"}}; }, "normalizer 'Lowercase'");
  broken([](Json& j) { j["pre_tokenizer"] = nullptr; }, "pre_tokenizer");
  broken([](Json& j) { j["pre_tokenizer"] = Json::Object{{"type", "Whitespace"}}; }, "'Whitespace'");
  broken([](Json& j) { j["pre_tokenizer"]["pretokenizers"].as_array().pop_back(); }, "ByteLevel");
  broken([](Json& j) { j["pre_tokenizer"]["pretokenizers"].as_array()[0]["pattern"] = Json::Object{{"Regex", "(?<"}}; },
         "does not compile");
  broken([](Json& j) { j["pre_tokenizer"]["pretokenizers"].as_array()[0]["pattern"] = Json::Object{{"Regex", "\\p{Nope}"}}; },
         "unknown property");
  broken([](Json& j) { j["pre_tokenizer"]["pretokenizers"].as_array()[0]["behavior"] = "Removed"; }, "'Removed'");
  broken([](Json& j) { j["added_tokens"].as_array()[0]["content"] = ""; }, "empty");
  broken([](Json& j) { j["added_tokens"].as_array()[0]["id"] = 258; }, "is given to both");
  broken([](Json& j) { j["added_tokens"].as_array()[0].as_object().clear(); }, "id");
  broken([](Json& j) {
    j["post_processor"] = Json::Object{{"type", "TemplateProcessing"},
                                       {"single", Json::Array{Json::Object{{"SpecialToken", Json::Object{{"id", "<s>"}}}}}}};
  }, "'<s>' is not in the vocabulary");
}

// A pattern that backtracks without end loads, but encoding stops at PCRE2's match limit with an
// error naming the file, instead of running for hours.
TEST(TokenizerErrors, RunawayRegexIsAnError) {
  TempDir dir;
  Json j = tiny_bpe_json();
  j["pre_tokenizer"]["pretokenizers"].as_array()[0]["pattern"] = Json::Object{{"Regex", "(a|a)+$"}};
  const std::string path = write_json(dir, j);
  const auto tok = load_bpe_json(path);
  EXPECT_EQ(tok->encode("aa", false).size(), 2u);  // short text: matched in full
  expect_error([&] { tok->encode(std::string(64, 'a') + "!", false); }, path, "match limit");
}

TEST(TokenizerErrors, MalformedModelDirectory) {
  TempDir dir;
  expect_error([&] { load_tokenizer_dir(dir.file("nothing")); }, dir.file("nothing"), "not a directory");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, dir.path(), "neither tokenizer.json nor tokenizer.model");
  write_json(dir, tiny_bpe_json());
  ASSERT_NO_THROW(load_tokenizer_dir(dir.path()));

  const std::string tc = dir.file("tokenizer_config.json"), mc = dir.file("config.json");
  write_file(tc, R"({"bos_token": "<|nope|>"})");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, tc, "'<|nope|>' is not in the vocabulary");
  write_file(tc, R"({"add_bos_token": "yes"})");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, tc, "expected");
  write_file(tc, "{");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, tc, "");
  write_file(tc, R"({"add_bos_token": true, "bos_token": {"content": "<|end|>"}, "eos_token": null})");
  write_file(mc, R"({"eos_token_id": [259, 1]})");
  const auto tok = load_tokenizer_dir(dir.path());
  EXPECT_EQ(tok->bos_id(), 259);
  EXPECT_EQ(tok->eos_id(), -1);  // tokenizer_config.json wins over config.json
  EXPECT_EQ(tok->encode("he", true), (std::vector<int32_t>{259, 257}));
  std::filesystem::remove(tc);
  EXPECT_EQ(load_tokenizer_dir(dir.path())->eos_id(), 259);
  write_file(mc, R"({"eos_token_id": 100000})");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, mc, "eos_token_id 100000 out of range");
  write_file(mc, R"({"bos_token_id": "one"})");
  expect_error([&] { load_tokenizer_dir(dir.path()); }, mc, "expected");
}

TEST(TokenizerErrors, MalformedVocabulary) {
  TokenizerVocab spm;
  spm.model = "llama";
  spm.tokens = {"<unk>", "<s>", "</s>", "\u2581a", "a"};
  spm.scores = {0, 0, 0, -1, -2};
  spm.token_types = {2, 3, 3, 1, 1};
  spm.bos_id = 1, spm.eos_id = 2, spm.unk_id = 0;
  ASSERT_NO_THROW(tokenizer_from_vocab(spm, "good.gguf"));
  EXPECT_EQ(tokenizer_from_vocab(spm, "good.gguf")->encode("a", true), (std::vector<int32_t>{1, 3}));

  auto broken = [](TokenizerVocab v, auto&& edit, const std::string& detail) {
    edit(v);
    expect_error([&] { tokenizer_from_vocab(v, "bad.gguf"); }, "bad.gguf", detail);
  };
  broken(spm, [](TokenizerVocab& v) { v.model = "bert"; }, "'bert'");
  broken(spm, [](TokenizerVocab& v) { v.scores.pop_back(); }, "4 scores");
  broken(spm, [](TokenizerVocab& v) { v.token_types.push_back(1); }, "6 token types");
  broken(spm, [](TokenizerVocab& v) { v.token_types[3] = 9; }, "type 9");
  broken(spm, [](TokenizerVocab& v) { v.bos_id = 5; }, "bos id 5");
  broken(spm, [](TokenizerVocab& v) { v.token_types[0] = 1, v.unk_id = -1; }, "no unknown token");
  broken(spm, [](TokenizerVocab& v) { v.tokens[4] = ""; }, "token 4 is empty");
  // libsentencepiece's trie takes NUL-terminated keys: a NUL inside a piece once aborted it.
  broken(spm, [](TokenizerVocab& v) { v.tokens[4] = std::string("\0a", 2); }, "piece 4 contains a NUL byte");
  broken(spm, [](TokenizerVocab& v) { v.tokens[4] = "\u2581a"; }, "rejected");
  broken(spm, [](TokenizerVocab& v) { v.tokens.clear(); }, "no tokens");
  broken(spm, [](TokenizerVocab& v) { v.precompiled_charsmap = std::string("\x08\0\0\0\xff\xff\xff\xff\x01\0\0\0x", 13); },
         "character map");

  TokenizerVocab bpe;
  bpe.model = "gpt2";
  bpe.pre = "llama-bpe";
  bpe.tokens = {"a", "b", "ab", "<|end|>"};
  bpe.token_types = {1, 1, 1, 3};
  bpe.merges = {"a b"};
  ASSERT_NO_THROW(tokenizer_from_vocab(bpe, "good.gguf"));
  EXPECT_EQ(tokenizer_from_vocab(bpe, "good.gguf")->encode("ab<|end|>", false), (std::vector<int32_t>{2, 3}));
  broken(bpe, [](TokenizerVocab& v) { v.pre = "mystery"; }, "'mystery'");
  broken(bpe, [](TokenizerVocab& v) { v.merges = {"a c"}; }, "needs token 'c'");
  broken(bpe, [](TokenizerVocab& v) { v.merges = {"a  b"}; }, "not two tokens");
  broken(bpe, [](TokenizerVocab& v) { v.token_types.pop_back(); }, "3 token types");
  broken(bpe, [](TokenizerVocab& v) { v.eos_id = 4; }, "eos id 4");

  const auto tok = tokenizer_from_vocab(bpe, "good.gguf");
  expect_error([&] { tok->decode({0, 4}); }, "good.gguf", "token id 4 out of range");
  expect_error([&] { tok->piece(-3); }, "good.gguf", "token id -3 out of range");
}

TEST(TokenizerErrors, MalformedSentencePieceModel) {
  ASSERT_TRUE(have("command -v spm_train", "sentencepiece"));
  ASSERT_TRUE(have("command -v bible", "bible-kjv"));
  TempDir dir;
  std::string text;
  for (const auto& l : training_lines(600)) text += l + "\n";
  write_file(dir.file("train.txt"), text);
  for (const char* kind : {"identity", "nmt_nfkc"}) {
    const std::string cmd = "spm_train --input=" + shell_quote(dir.file("train.txt")) + " --model_prefix=" +
                            shell_quote(dir.file(kind)) + " --vocab_size=400 --model_type=bpe --byte_fallback=true"
                            " --minloglevel=2 --num_threads=2 --normalization_rule_name=" + kind;
    std::string log;
    ASSERT_EQ(run_command(cmd, &log), 0) << log;
  }
  const std::string path = dir.file("tokenizer.model");
  expect_error([&] { load_sentencepiece(path); }, path, "not found");
  write_file(path, "");
  expect_error([&] { load_sentencepiece(path); }, path, "empty");
  write_file(path, tiny_bpe_json().dump());
  expect_error([&] { load_sentencepiece(path); }, path, "not a valid SentencePiece model");
  expect_error([&] { load_sentencepiece(dir.path()); }, dir.path(), "is a directory");

  // Truncations and seeded byte mutations: a genperf::Error or a working tokenizer, nothing else.
  const uint32_t seed = 31337;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (const char* kind : {"identity", "nmt_nfkc"}) {
    std::ifstream in(dir.file(std::string(kind) + ".model"), std::ios::binary);
    const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(good.size(), 1000u);
    int loaded = 0, rejected = 0;
    auto attempt = [&](const std::string& bytes) {
      write_file(path, bytes);
      try {
        const auto tok = load_sentencepiece(path);
        tok->decode(tok->encode("In the beginning God created the heaven and the earth. caf\u00e9 \ufb01", true));
        ++loaded;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        ++rejected;
      }
    };
    for (size_t cut = 1; cut < good.size(); cut += 1 + good.size() / 40) attempt(good.substr(0, cut));
    for (int i = 0; i < 150; ++i) {
      std::string bad = good;
      for (int k = 0, flips = 1 + int(rng() % 4); k < flips; ++k) bad[rng() % bad.size()] = char(rng());
      attempt(bad);
    }
    std::printf("%s model: %d mutated copies loaded, %d rejected\n", kind, loaded, rejected);
    EXPECT_GT(rejected, 0);
  }
}

TEST(TokenizerErrors, MutatedTokenizerJsonNeverCrashes) {
  TempDir dir;
  const std::string good = tiny_bpe_json().dump(1);
  const std::string path = dir.file("tokenizer.json");
  const uint32_t seed = 2718;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bad = good;
    for (int k = 0, flips = 1 + int(rng() % 3); k < flips; ++k) {
      const size_t at = rng() % bad.size();
      if (rng() % 2) bad[at] = "{}[]\",:0123456789 \\ntruefalse"[rng() % 29];
      else bad.erase(at, 1 + rng() % 8);
    }
    write_file(path, bad);
    try {
      const auto tok = load_bpe_json(path);
      tok->decode(tok->encode("the theme<|end|> of the\n thesis", true));
      ++loaded;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      ++rejected;
    }
  }
  std::printf("tokenizer.json: %d mutated copies loaded, %d rejected\n", loaded, rejected);
  EXPECT_GT(rejected, 0);
}

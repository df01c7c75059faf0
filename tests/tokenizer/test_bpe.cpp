// Byte-level BPE: genperf against bpe_ref.py, an independent standard-library Python reference
// that trains a small vocabulary on Bible text, writes tokenizer.json, and encodes held-out texts
// (with newlines, digits, non-ASCII words and special tokens) for the Llama 3, Qwen2 and GPT-2
// pre-tokenizer patterns. Also: the GGUF route, BOS/EOS settings, arbitrary bytes, speed.
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/tokenizer.h"
#include "test_helpers.h"

using namespace genperf;
using namespace tokenizer_test;

namespace {

constexpr uint32_t kSeed = 4099;
constexpr int kMerges = 500;

struct Pattern {
  std::string name;                   // bpe_ref.py's name
  std::string gguf_pre;               // expected TokenizerVocab::pre
  std::vector<std::string> specials;  // special: true added tokens (as bpe_ref.py writes them)
  size_t texts;
};

const Pattern kLlama3{"llama3", "llama-bpe", {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"}, 3000};
const Pattern kQwen2{"qwen2", "qwen2", {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, 3000};
const Pattern kGpt2{"gpt2", "gpt-2", {"<|endoftext|>"}, 1000};
const std::string kPlainAdded = "<genperf_note>";  // special: false, so decode keeps it

// One trained reference tokenizer and its encoding of the held-out texts.
struct Trained {
  TempDir dir;
  std::string failure;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> want;
  bool all_nfc = false;
};

std::string run_ref(const std::string& args) {
  const std::string cmd = std::string(python()) + " " + shell_quote(test_dir() + "/bpe_ref.py") + " " + args;
  std::printf("%s\n", cmd.c_str());
  std::string out;
  return run_command(cmd, &out) == 0 ? "" : "bpe_ref.py failed: " + out;
}

void prepare(const Pattern& p, Trained& t) {
  for (auto r : {have("command -v bible", "bible-kjv"), have(std::string(python()) + " -c 'import unicodedata'", "python3")}) {
    if (!r) {
      t.failure = r.message();
      return;
    }
  }
  std::string train_text;
  for (const auto& l : training_lines(4000)) train_text += l + "\n";
  write_file(t.dir.file("train.txt"), train_text);
  t.failure = run_ref("train --pattern " + p.name + " --merges " + std::to_string(kMerges) + " --corpus " +
                      shell_quote(t.dir.file("train.txt")) + " --out " + shell_quote(t.dir.path()));
  if (!t.failure.empty()) return;
  std::printf("seed %u for the held-out texts\n", kSeed);
  auto added = p.specials;
  added.push_back(kPlainAdded);
  t.texts = held_out_texts(kSeed, p.texts, /*multiline=*/true, added);
  describe(t.texts, added);
  write_texts(t.dir.file("texts.json"), t.texts);
  t.failure = run_ref("encode --pattern " + p.name + " --tokenizer " + shell_quote(t.dir.file("tokenizer.json")) +
                      " --input " + shell_quote(t.dir.file("texts.json")) + " --output " +
                      shell_quote(t.dir.file("ids.json")));
  if (!t.failure.empty()) return;
  const Json ref = Json::parse_file(t.dir.file("ids.json"));
  t.want = id_lists(ref.at("ids"));
  t.all_nfc = ref.at("all_nfc").as_bool();
}

const Trained& trained(const Pattern& p) {
  static std::map<std::string, Trained> cache;
  auto [it, fresh] = cache.try_emplace(p.name);
  if (fresh) prepare(p, it->second);
  return it->second;
}

std::string without(std::string s, const std::vector<std::string>& tokens) {
  for (const auto& t : tokens)
    for (size_t at; (at = s.find(t)) != std::string::npos;) s.erase(at, t.size());
  return s;
}

void expect_same_ids(const Tokenizer& tok, const Trained& t, const char* what, size_t limit = SIZE_MAX) {
  int bad = 0;
  const size_t n = std::min(limit, t.texts.size());
  for (size_t i = 0; i < n; ++i) {
    const auto got = tok.encode(t.texts[i], false);
    if (got != t.want[i] && ++bad <= 3) {
      ADD_FAILURE() << what << ": text " << i << " '" << t.texts[i] << "'\n  genperf   " << ids_str(got)
                    << "\n  reference " << ids_str(t.want[i]);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " texts differ";
}

int32_t id_of(const Tokenizer& tok, const std::string& special) {
  const auto ids = tok.encode(special, false);
  return ids.size() == 1 ? ids[0] : -2;
}

// Everything the reference comparison checks, for one pattern.
void check_pattern(const Pattern& p) {
  const Trained& t = trained(p);
  ASSERT_TRUE(t.failure.empty()) << t.failure;
  ASSERT_EQ(t.want.size(), t.texts.size());
  // genperf does not apply Qwen2's NFC normalizer; the texts must not need it.
  ASSERT_TRUE(t.all_nfc) << "held-out texts must be in NFC";
  const auto tok = load_tokenizer_dir(t.dir.path());
  EXPECT_STREQ(tok->kind(), "bpe");
  const Json doc = Json::parse_file(t.dir.file("tokenizer.json"));
  EXPECT_EQ(tok->vocab_size(), int(doc.at("model").at("vocab").as_object().size() + p.specials.size() + 1));
  EXPECT_GE(tok->vocab_size(), 256 + kMerges);
  expect_same_ids(*tok, t, "tokenizer.json");

  // Decoding restores the text without the special tokens; pieces concatenate to the same.
  int bad_decode = 0, bad_stream = 0;
  for (size_t i = 0; i < t.texts.size(); ++i) {
    const auto ids = tok->encode(t.texts[i], false);
    const std::string want = without(t.texts[i], p.specials);
    if (tok->decode(ids) != want && ++bad_decode <= 3) ADD_FAILURE() << "decode differs: '" << t.texts[i] << "'";
    std::string stream;
    for (int32_t id : ids) stream += tok->piece(id);
    if (stream != want && ++bad_stream <= 3) ADD_FAILURE() << "pieces differ: '" << t.texts[i] << "'";
  }
  EXPECT_EQ(bad_decode, 0);
  EXPECT_EQ(bad_stream, 0);

  // GGUF route.
  const TokenizerVocab v = tok->vocab();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, p.gguf_pre);
  EXPECT_EQ(v.merges.size(), size_t(kMerges));
  EXPECT_EQ(v.token_types[id_of(*tok, p.specials[0])], 3);
  EXPECT_EQ(v.token_types[id_of(*tok, kPlainAdded)], 4);
  const auto rebuilt = tokenizer_from_vocab(v, p.name + ".gguf");
  expect_same_ids(*rebuilt, t, "tokenizer_from_vocab");
  EXPECT_EQ(rebuilt->bos_id(), tok->bos_id());
  EXPECT_EQ(rebuilt->eos_id(), tok->eos_id());
  EXPECT_EQ(rebuilt->add_bos(), tok->add_bos());
  EXPECT_EQ(rebuilt->encode(t.texts[0], true), tok->encode(t.texts[0], true));
}

}  // namespace

TEST(Bpe, Llama3PatternMatchesReference) {
  check_pattern(kLlama3);
  const Trained& t = trained(kLlama3);
  ASSERT_TRUE(t.failure.empty());
  // BOS comes from the TemplateProcessing post-processor, EOS from tokenizer_config.json.
  const auto tok = load_tokenizer_dir(t.dir.path());
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), id_of(*tok, "<|begin_of_text|>"));
  EXPECT_EQ(tok->eos_id(), id_of(*tok, "<|eot_id|>"));
  const auto with_bos = tok->encode("And God said", true);
  EXPECT_EQ(with_bos.front(), tok->bos_id());
  EXPECT_EQ(tok->decode(with_bos), "And God said");
  const auto bare = load_bpe_json(t.dir.file("tokenizer.json"));
  EXPECT_TRUE(bare->add_bos());
  EXPECT_EQ(bare->eos_id(), -1);
  expect_same_ids(*bare, t, "load_bpe_json", 300);
}

TEST(Bpe, Qwen2PatternMatchesReference) {
  check_pattern(kQwen2);
  const Trained& t = trained(kQwen2);
  ASSERT_TRUE(t.failure.empty());
  const auto tok = load_tokenizer_dir(t.dir.path());
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_id(), id_of(*tok, "<|endoftext|>"));
  EXPECT_EQ(tok->encode("And God said", true), tok->encode("And God said", false));
}

TEST(Bpe, Gpt2ByteLevelRegexMatchesReference) { check_pattern(kGpt2); }

TEST(Bpe, SpecialTokensStayWholeAndStripWhenAsked) {
  const Trained& t = trained(kLlama3);
  ASSERT_TRUE(t.failure.empty()) << t.failure;
  const auto tok = load_tokenizer_dir(t.dir.path());
  const int32_t eot = id_of(*tok, "<|eot_id|>");
  ASSERT_GE(eot, 0);
  auto cat_ids = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(tok->encode("light<|eot_id|>dark", false),
            cat_ids(cat_ids(tok->encode("light", false), {eot}), tok->encode("dark", false)));
  const auto partial = tok->encode("<|eot_id", false);  // not the whole token: ordinary text
  EXPECT_EQ(std::count(partial.begin(), partial.end(), eot), 0);
  EXPECT_EQ(tok->decode(partial), "<|eot_id");

  // rstrip: true swallows the whitespace after the token.
  Json j = Json::parse_file(t.dir.file("tokenizer.json"));
  for (auto& a : j["added_tokens"].as_array())
    if (a.at("content").as_string() == "<|eot_id|>") a["rstrip"] = true;
  TempDir dir;
  write_file(dir.file("tokenizer.json"), j.dump());
  const auto stripped = load_bpe_json(dir.file("tokenizer.json"));
  EXPECT_EQ(stripped->encode("light<|eot_id|>  \n dark", false),
            cat_ids(cat_ids(tok->encode("light", false), {eot}), tok->encode("dark", false)));
}

TEST(Bpe, ArbitraryBytesRoundTrip) {
  const Trained& t = trained(kLlama3);
  ASSERT_TRUE(t.failure.empty()) << t.failure;
  const auto tok = load_tokenizer_dir(t.dir.path());
  const uint32_t seed = 77;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = char(i % 2 ? rng() % 256 : " \n\tab1\xC3\xA9\xE2\x80\xF0"[rng() % 12]);
    const auto ids = tok->encode(s, false);
    ASSERT_EQ(tok->decode(ids), s) << "case " << i;
  }
}

TEST(Bpe, EncodesQuickly) {
  const Trained& t = trained(kQwen2);
  ASSERT_TRUE(t.failure.empty()) << t.failure;
  const auto tok = load_tokenizer_dir(t.dir.path());
  std::string all;
  for (int rep = 0; rep < 4; ++rep)
    for (const auto& s : t.texts) all += s + "\n";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok->encode(all, false);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("encoded %.2f MB into %zu tokens in %.3f s (%.1f MB/s)\n", all.size() / 1e6, ids.size(), sec,
              all.size() / 1e6 / sec);
  EXPECT_EQ(tok->decode(ids), without(all, kQwen2.specials));
  EXPECT_LT(sec, 30.0);  // a quadratic merge or a per-piece regex compile would blow far past this
}

TEST(Bpe, LongRunsOfOneCharacterClass) {
  const Trained& t = trained(kLlama3);
  ASSERT_TRUE(t.failure.empty()) << t.failure;
  const auto tok = load_tokenizer_dir(t.dir.path());
  // One pre-tokenizer piece of 200 kB each: the regex and the merge loop must stay linear-ish.
  for (const std::string unit : {" ", "\n", "a", "7", "!", "\u00e9", " \n"}) {
    std::string s;
    while (s.size() < 200000) s += unit;
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tok->encode(s, false);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(tok->decode(ids), s);
    EXPECT_LT(sec, 10.0) << "run of '" << unit << "'";
  }
}

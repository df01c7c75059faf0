// llama.cpp as an independent reader of the GGUF files genperf writes: the default model, saved
// unquantized and in every ggml format genperf writes (and the Q4_K_M mix), runs in llama.cpp's
// prebuilt CPU build (node-llama-cpp, installed by scripts/deps.sh into tools/llamacpp/). Its
// next-token distributions must match genperf's on the same file far more closely than the
// quantized model matches the unquantized one: a block layout read differently by the two would
// show as a KL of the order of the quantization's own or more. Its tokenization of texts from the
// file's vocabulary must equal genperf's where the tokenizer's normalizer leaves the text alone.
// It must name each file's type from general.file_type (not guess it), and find
// general.quantization_version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/checkpoint.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/quantize.h"
#include "genperf/tokenizer.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kRoot = std::string(GENPERF_TEST_DIR) + "/..";
const std::string kTool = kRoot + "/tools/llamacpp";

// Why llama.cpp cannot run here, or "" when it can.
std::string llamacpp_missing() {
  if (!fs::exists(kTool + "/node_modules/node-llama-cpp/package.json") ||
      !fs::exists(kTool + "/node_modules/@node-llama-cpp/linux-x64/package.json"))
    return "node-llama-cpp is not installed in tools/llamacpp (scripts/deps.sh installs it with npm where Node.js "
           ">= 20 and the npm registry are available)";
  std::string v;
  if (testing::run_command("node --version 2>/dev/null", &v) != 0 || v.size() < 2 || std::atoi(v.c_str() + 1) < 20)
    return "node-llama-cpp needs Node.js >= 20; found '" + v + "'";
  return "";
}

// Mean KL(P || Q) and argmax agreement over rows of logits.
struct Compare {
  double kl = 0, kl_max = 0, top1 = 0;
};

std::vector<double> log_softmax(const float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(s);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
  return out;
}

Compare compare(const std::vector<float>& p, const std::vector<float>& q, int64_t V) {
  Compare c;
  const int64_t rows = int64_t(p.size()) / V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = p.data() + r * V;
    const float* b = q.data() + r * V;
    const auto la = log_softmax(a, V), lb = log_softmax(b, V);
    double kl = 0;
    for (int64_t i = 0; i < V; ++i) kl += std::exp(la[size_t(i)]) * (la[size_t(i)] - lb[size_t(i)]);
    c.kl += kl;
    c.kl_max = std::max(c.kl_max, kl);
    c.top1 += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b);
  }
  c.kl /= double(rows);
  c.top1 /= double(rows);
  return c;
}

// genperf's logits for every position of every window, BOS first: the rows check.mjs writes.
std::vector<float> genperf_logits(Checkpoint ck, const std::vector<std::vector<int32_t>>& windows) {
  const int32_t bos = ck.tokenizer->bos_id();
  const LlamaModel m(std::move(ck));
  std::vector<float> out;
  for (const auto& w : windows) {
    std::vector<int32_t> ids;
    if (bos >= 0) ids.push_back(bos);
    ids.insert(ids.end(), w.begin(), w.end());
    Session s(m, int64_t(ids.size()));
    const Tensor l = m.forward(s, ids, LogitsFor::All);
    out.insert(out.end(), l.data<float>(), l.data<float>() + l.numel());
  }
  return out;
}

// The opening of Pride and Prejudice (public domain), then texts for the tokenizers' edges.
const char* kText =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
    "of a wife. However little known the feelings or views of such a man may be on his first entering a "
    "neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered "
    "as the rightful property of some one or other of their daughters. \"My dear Mr. Bennet,\" said his lady to "
    "him one day, \"have you heard that Netherfield Park is let at last?\" Mr. Bennet replied that he had not.";
const std::vector<std::string> kEdgeTexts = {
    "And God said, Let there be light: and there was light.", "  two  spaces,\ttab\nnewline", "naïve café — «quoted» 1815",
    "x", "ALL CAPS 12345 67.89"};

TEST(LlamaCpp, RunsGenperfGgufLikeGenperf) {
  const std::string missing = llamacpp_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  TempDir dir("llamacpp");
  const Checkpoint src = load_checkpoint(kRoot + "/models/default");
  ASSERT_TRUE(src.tokenizer);
  const std::vector<int32_t> all = src.tokenizer->encode(kText, false);
  ASSERT_GE(all.size(), 80u);
  const std::vector<std::vector<int32_t>> windows = {{all.begin(), all.begin() + 40}, {all.begin() + 40, all.begin() + 80}};

  // The unquantized model (converted as it is: bf16 matrices), each ggml format and the Q4_K_M mix.
  std::vector<std::string> plans = {"source", "q4_k_m"};
  for (const char* f : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"})
    plans.push_back(std::string("uniform:") + f);
  Json jobs = Json::Object{{"threads", 2}, {"jobs", Json::Array{}}};
  Json::Array& list = jobs["jobs"].as_array();
  std::vector<std::string> files;
  for (const std::string& p : plans) {
    const std::string file = dir / (p.substr(p.find(':') + 1) + ".gguf");
    if (p == "source") save_gguf_checkpoint(file, src);
    else save_quantized(file, quantize_checkpoint(src, recipe_plan(src, p), QuantizeOptions{}));
    files.push_back(file);
    Json::Array ws;
    for (const auto& w : windows) {
      Json::Array ids;
      for (int32_t t : w) ids.push_back(Json(int64_t(t)));
      ws.push_back(Json(std::move(ids)));
    }
    Json::Array texts;
    if (p == "source") {
      texts.push_back(kText);
      for (const auto& t : kEdgeTexts) texts.push_back(t);
    }
    list.push_back(Json::Object{{"model", file}, {"windows", Json(std::move(ws))}, {"texts", Json(std::move(texts))}});
  }
  write_file_atomic(dir / "jobs.json", jobs.dump());
  std::string log;
  const std::string cmd = "cd " + kTool + " && node check.mjs " + (dir / "jobs.json") + " " + (dir / "out") + " 2>&1";
  ASSERT_EQ(testing::run_command(cmd, &log), 0) << cmd << "\n" << log;
  const Json res = Json::parse_file(dir / "out.json");
  const std::vector<float> lc = testing::read_floats(dir / "out.logits");

  const int64_t V = src.config.vocab_size;
  const std::vector<float> ref = genperf_logits(load_checkpoint(kRoot + "/models/default"), windows);
  const int64_t rows = int64_t(ref.size()) / V;
  ASSERT_EQ(int64_t(lc.size()), rows * V * int64_t(plans.size()));
  // llama.cpp's names of the general.file_type genperf writes (llama_model_ftype_name).
  const std::map<std::string, std::string> type_name = {
      {"source", "BF16"},          {"q4_k_m", "Q4_K - Medium"},      {"uniform:q8_0", "Q8_0"},
      {"uniform:q4_0", "Q4_0"},    {"uniform:q4_1", "Q4_1"},         {"uniform:q5_0", "Q5_0"},
      {"uniform:q5_1", "Q5_1"},    {"uniform:q2_k", "Q2_K - Medium"}, {"uniform:q3_k", "Q3_K - Small"},
      {"uniform:q4_k", "Q4_K - Small"}, {"uniform:q5_k", "Q5_K - Small"}, {"uniform:q6_k", "Q6_K"}};
  std::printf("%-10s %12s %12s %10s %14s\n", "plan", "KL gp|lc", "max", "top-1", "KL src|gp");
  for (size_t j = 0; j < plans.size(); ++j) {
    const Json& r = res.at("jobs").as_array()[j];
    ASSERT_EQ(r.at("vocab").as_int(), V) << plans[j];
    ASSERT_EQ(r.at("bos").as_int(), src.tokenizer->bos_id()) << plans[j];
    ASSERT_EQ(r.at("positions").as_int(), rows) << plans[j];
    const std::string description = r.at("description").as_string();
    EXPECT_NE(description.find(" " + type_name.at(plans[j])), std::string::npos) << plans[j] << ": " << description;
    EXPECT_EQ(description.find("guessed"), std::string::npos) << plans[j] << ": " << description;
    EXPECT_EQ(r.at("quantization_version").as_int(), 2) << plans[j];
    // genperf reading the file it wrote, as llama.cpp did.
    const std::vector<float> gp = genperf_logits(load_checkpoint(files[j]), windows);
    const std::vector<float> mine(lc.begin() + int64_t(j) * rows * V, lc.begin() + int64_t(j + 1) * rows * V);
    const Compare c = compare(gp, mine, V), q = compare(ref, gp, V);
    std::printf("%-10s %12.3g %12.3g %10.4f %14.3g\n", plans[j].c_str(), c.kl, c.kl_max, c.top1, q.kl);
    // Both run 8-bit activations against the blocks (and llama.cpp an f16 KV cache): close, not
    // equal. The bound is absolute for the near-lossless plans and relative for the others.
    EXPECT_LT(c.kl, std::max(2e-3, 0.1 * q.kl)) << plans[j];
    EXPECT_GE(c.top1, 0.85) << plans[j];
  }

  // Tokenization, from the vocabulary stored in the GGUF file. The default model's tokenizer
  // (libsentencepiece's trainer defaults) removes extra whitespace and maps tabs and newlines to
  // spaces; llama.cpp applies no SentencePiece normalizer, so there only text that the normalizer
  // leaves as it is tokenizes alike (gguf_llamacpp_notes says so when a file is written). Its ids
  // for the other text still decode to that text.
  const Json& toks = res.at("jobs").as_array()[0].at("tokens");
  std::vector<std::string> texts = {kText};
  texts.insert(texts.end(), kEdgeTexts.begin(), kEdgeTexts.end());
  ASSERT_EQ(toks.as_array().size(), texts.size());
  const Checkpoint gguf = load_checkpoint(files[0]);
  ASSERT_EQ(gguf_llamacpp_notes(gguf).size(), 1u);
  EXPECT_NE(gguf_llamacpp_notes(gguf)[0].find("removes extra whitespace and normalizes characters"), std::string::npos)
      << gguf_llamacpp_notes(gguf)[0];
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> theirs;
    for (const Json& t : toks.as_array()[i].as_array()) theirs.push_back(int32_t(t.as_int()));
    const bool normalized = texts[i].find_first_of("\t\n") != std::string::npos || texts[i].find("  ") != std::string::npos;
    if (normalized) {
      EXPECT_NE(theirs, gguf.tokenizer->encode(texts[i], false)) << "text: " << texts[i];
      // (genperf's decoder, like libsentencepiece's, drops leading spaces when the normalizer removes them)
      EXPECT_EQ(gguf.tokenizer->decode(theirs), texts[i].substr(texts[i].find_first_not_of(' ')));
    } else {
      EXPECT_EQ(theirs, src.tokenizer->encode(texts[i], false)) << "text: " << texts[i];
      EXPECT_EQ(theirs, gguf.tokenizer->encode(texts[i], false)) << "text: " << texts[i];
    }
  }
}

}  // namespace
}  // namespace genperf

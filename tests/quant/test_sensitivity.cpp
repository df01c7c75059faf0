// The sensitivity map end to end on small random models: one entry per (tensor, fitting format),
// KL non-negative and ordered by format precision, the calibration errors, the files (written
// atomically and read back), Spearman's rank correlation, and the achieved KL of a budgeted plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/report.h"
#include "genperf/sensitivity.h"

namespace genperf {
namespace {

using genperf::testing::TempDir;
namespace fs = std::filesystem;

// Bytes as tokens 0..255, BOS 256: a tokenizer for calibration text.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(256);
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
  int32_t bos_id() const override { return 256; }
  int32_t eos_id() const override { return 257; }
  bool add_bos() const override { return true; }
  const char* kind() const override { return "bytes"; }
  TokenizerVocab vocab() const override { return {}; }
};

std::vector<int32_t> random_ids(uint64_t seed, size_t n, int32_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = int32_t(rng() % uint64_t(vocab));
  return ids;
}

// The built-in tiny shape (d 64, ffn 176: only 32-blocks fit, and not the down projection).
Checkpoint tiny_model(uint64_t seed) { return random_checkpoint(preset_config("tiny"), DType::F32, seed); }

// A small shape whose rows fit the K-quants' 256-blocks.
Checkpoint kquant_model(uint64_t seed) {
  LlamaConfig c = preset_config("tiny");
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 258;
  return random_checkpoint(c, DType::F32, seed);
}

TEST(Spearman, HandComputedWithTies) {
  // Ranks of a: 1, 2.5, 2.5, 4; of b: 1, 3, 2, 4. rho = 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 3 / std::sqrt(10.0), 1e-12);
  EXPECT_NEAR(spearman({10, 20, 30}, {0.3, 0.2, 0.1}), -1.0, 1e-12);
  EXPECT_NEAR(spearman({1, 5, 100, 1000}, {2, 3, 4, 5}), 1.0, 1e-12);  // monotone, not linear
  EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));  // a constant side
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));
  EXPECT_THROW(spearman({1, 2}, {1}), Error);
}

TEST(Sensitivity, TinyModelEndToEnd) {
  const uint64_t seed = 11;
  std::printf("seed %llu\n", (unsigned long long)seed);
  const Checkpoint ck = tiny_model(seed);
  CalibrationOptions co;
  co.ctx = 64;
  const CalibrationReference ref(ck, random_ids(seed, 256, int32_t(ck.config.vocab_size)), -1, co);
  EXPECT_EQ(ref.tokens(), 4 * 63);  // no BOS: the first token of each window is context only
  SensitivityOptions so;
  so.formats = {DType::Q4_0, DType::Q8_0};
  const SensitivityMap m = measure_sensitivity(ck, ref, so);

  const auto names = quantizable_tensors(ck);
  ASSERT_EQ(m.tensors.size(), names.size());
  size_t expected = 0;
  for (const auto& n : names)
    for (DType f : so.formats) expected += ck.tensors.at(n).size(1) % traits(f).block_size == 0;
  EXPECT_EQ(m.entries.size(), expected);
  EXPECT_GE(expected, names.size());  // most tensors take both formats
  int ordered = 0, pairs = 0;
  for (const auto& t : m.tensors) {
    const SensitivityEntry *q4 = nullptr, *q8 = nullptr;
    for (const auto& e : m.entries) {
      if (e.tensor != t.name) continue;
      EXPECT_TRUE(std::isfinite(e.kl) && e.kl >= 0) << e.tensor;
      EXPECT_TRUE(std::isfinite(e.proxy) && e.proxy > 0) << e.tensor;
      EXPECT_EQ(e.bytes, int64_t(bytes_for(e.format, t.elements)));
      (e.format == DType::Q4_0 ? q4 : q8) = &e;
    }
    if (q4 && q8) ++pairs, ordered += q8->kl < q4->kl;
  }
  EXPECT_GE(ordered, pairs * 8 / 10) << ordered << " of " << pairs;
  EXPECT_TRUE(std::isfinite(m.spearman));
  EXPECT_GT(m.spearman, 0.3);  // the proxy ranks entries roughly like the measurement
  EXPECT_EQ(m.spearman_by_format.size(), 2u);
}

TEST(Sensitivity, Q8BeatsQ2OnKQuantShapes) {
  const uint64_t seed = 5;
  std::printf("seed %llu\n", (unsigned long long)seed);
  Checkpoint ck = kquant_model(seed);
  ck.tokenizer = std::make_unique<ByteTokenizer>();
  std::string text;
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (int i = 0; i < 600; ++i) text += char('a' + rng() % 26);
  CalibrationOptions co;
  co.ctx = 128;
  co.max_tokens = 512;
  co.source = "calib.txt";
  const CalibrationReference ref(ck, text, co);
  EXPECT_EQ(ref.tokens(), 512);  // BOS first: every window token is scored
  ck.tokenizer.reset();          // the test tokenizer has no vocabulary to carry into a quantized copy
  SensitivityOptions so;
  so.formats = {DType::Q2_K, DType::Q8_0};
  const SensitivityMap m = measure_sensitivity(ck, ref, so);
  EXPECT_EQ(m.entries.size(), 2 * m.tensors.size());
  int ordered = 0;
  for (size_t i = 0; i + 1 < m.entries.size(); i += 2) {
    ASSERT_EQ(m.entries[i].format, DType::Q2_K);
    ASSERT_EQ(m.entries[i + 1].format, DType::Q8_0);
    ordered += m.entries[i + 1].kl < m.entries[i].kl;
    EXPECT_LT(m.entries[i + 1].proxy, m.entries[i].proxy);
  }
  EXPECT_GE(ordered, int(m.tensors.size()) - 1);

  // The unquantized model scores KL 0 against itself; a budgeted plan's achieved KL is close to
  // its prediction (the additivity assumption), within a factor of 3 on this model.
  const CalibrationScore self = ref.score(ck);
  EXPECT_LT(self.kl, 1e-9);
  EXPECT_NEAR(self.dloss, 0.0, 1e-9);
  EXPECT_EQ(self.top1, 1.0);
  AllocationReport r;
  const QuantPlan plan = plan_for_budget(m, Budget::bpw(4.0), &r);
  EXPECT_LE(r.bpw, 4.0);
  const Checkpoint q = quantize_checkpoint(ck, plan, QuantizeOptions{});
  EXPECT_NEAR(size_report(q).bpw, r.bpw, 1e-9);
  const CalibrationScore got = ref.score(q);
  std::printf("bpw %.4f predicted KL %.6g achieved %.6g\n", r.bpw, r.predicted, got.kl);
  EXPECT_GT(got.kl, r.predicted / 3);
  EXPECT_LT(got.kl, r.predicted * 3);
}

// GPTQ needs each matrix's input Gram matrix; the untied embedding is a lookup without one and
// takes the imatrix quantizer (it used to fail the whole map). GPTQ entries are measured for
// every tensor, and on the layers' matrices they are no worse than the imatrix quantizer's.
TEST(Sensitivity, GptqMapWithAnUntiedEmbedding) {
  const uint64_t seed = 8;
  std::printf("seed %llu\n", (unsigned long long)seed);
  LlamaConfig c = kquant_model(seed).config;
  c.tie_word_embeddings = false;
  Checkpoint ck = random_checkpoint(c, DType::F32, seed);
  ASSERT_TRUE(ck.tensors.count("model.embed_tokens.weight") && ck.tensors.count("lm_head.weight"));
  CalibrationOptions co;
  co.ctx = 128;
  const CalibrationReference ref(ck, random_ids(seed, 512, int32_t(c.vocab_size)), -1, co);
  SensitivityOptions so;
  so.formats = {DType::Q3_K};
  so.quant.method = QuantMethod::Gptq;
  const SensitivityMap g = measure_sensitivity(ck, ref, so);
  so.quant.method = QuantMethod::Weighted;
  const SensitivityMap w = measure_sensitivity(ck, ref, so);
  ASSERT_EQ(g.entries.size(), g.tensors.size());
  ASSERT_EQ(w.entries.size(), g.entries.size());
  double sum_g = 0, sum_w = 0;
  for (size_t i = 0; i < g.entries.size(); ++i) {
    ASSERT_EQ(g.entries[i].tensor, w.entries[i].tensor);
    EXPECT_TRUE(std::isfinite(g.entries[i].kl) && g.entries[i].kl >= 0) << g.entries[i].tensor;
    if (g.entries[i].tensor == "model.embed_tokens.weight") {
      EXPECT_EQ(g.entries[i].kl, w.entries[i].kl);  // the same quantizer there
    } else {
      sum_g += g.entries[i].kl;
      sum_w += w.entries[i].kl;
    }
  }
  std::printf("q3_k summed KL of the layers' matrices: imatrix %.4g, gptq %.4g\n", sum_w, sum_g);
  EXPECT_LT(sum_g, sum_w);
}

TEST(Sensitivity, CalibrationTooShortIsAClearError) {
  Checkpoint ck = tiny_model(3);
  ck.tokenizer = std::make_unique<ByteTokenizer>();
  CalibrationOptions co;
  co.ctx = 64;
  co.source = "short.txt";
  try {
    CalibrationReference ref(ck, std::string(50, 'x'), co);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("short.txt: 50 tokens"), std::string::npos) << w;
    EXPECT_NE(w.find("--ctx 64"), std::string::npos) << w;
  }
  co.max_tokens = 200;
  try {
    CalibrationReference ref(ck, std::string(150, 'x'), co);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("short.txt: 150 tokens"), std::string::npos) << w;
    EXPECT_NE(w.find("--tokens 200"), std::string::npos) << w;
  }
  co.max_tokens = 0;
  co.ctx = 100000;
  EXPECT_THROW(CalibrationReference(ck, std::string(500, 'x'), co), Error);  // beyond the model's context
  Checkpoint no_tok = tiny_model(3);
  co.ctx = 64;
  EXPECT_THROW(CalibrationReference(no_tok, std::string(500, 'x'), co), Error);
}

TEST(Sensitivity, FilesWrittenAtomicallyAndReadBack) {
  const Checkpoint ck = tiny_model(2);
  CalibrationOptions co;
  co.ctx = 64;
  const CalibrationReference ref(ck, random_ids(2, 128, int32_t(ck.config.vocab_size)), 0, co);
  SensitivityOptions so;
  so.formats = {DType::Q4_0, DType::Q8_0};
  SensitivityMap m = measure_sensitivity(ck, ref, so);
  m.calib = "random ids";
  TempDir tmp("sens");
  const std::string prefix = tmp / "map";
  // Stale files are replaced whole.
  write_file_atomic(prefix + ".csv", std::string(100000, 'z'));
  write_sensitivity(m, prefix);
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    ++files;
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 3);

  const std::string csv = read_text_file(prefix + ".csv");
  EXPECT_EQ(csv.rfind("tensor,layer,kind,format,bpw,bytes,kl,dloss,proxy,measured\n", 0), 0u);
  EXPECT_EQ(size_t(std::count(csv.begin(), csv.end(), '\n')), m.entries.size() + 1);
  EXPECT_EQ(csv.find('z'), std::string::npos);

  const SensitivityMap back = read_sensitivity_json(prefix + ".json");
  ASSERT_EQ(back.entries.size(), m.entries.size());
  ASSERT_EQ(back.tensors.size(), m.tensors.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].tensor, m.entries[i].tensor);
    EXPECT_EQ(back.entries[i].format, m.entries[i].format);
    EXPECT_EQ(back.entries[i].bytes, m.entries[i].bytes);
    EXPECT_EQ(back.entries[i].kl, m.entries[i].kl);  // 17 significant digits round-trip
    EXPECT_EQ(back.entries[i].proxy, m.entries[i].proxy);
    EXPECT_EQ(back.entries[i].measured, m.entries[i].measured);
  }
  EXPECT_EQ(back.total_source_bytes, m.total_source_bytes);
  EXPECT_EQ(back.reference_nll, m.reference_nll);
  EXPECT_EQ(back.spearman, m.spearman);
  EXPECT_EQ(back.calib, "random ids");
  // The same plan from the map and from its file. (The tiny shape's down projections fit no
  // 32-block format and stay f32, so the smallest achievable is ~9.5 bpw.)
  EXPECT_EQ(plan_for_budget(back, Budget::bpw(12.0)), plan_for_budget(m, Budget::bpw(12.0)));

  const std::string svg = read_text_file(prefix + ".svg");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("q4_0 ("), std::string::npos);
  EXPECT_NE(svg.find("q8_0 ("), std::string::npos);
  EXPECT_NE(svg.find(">layer 1<"), std::string::npos);
  EXPECT_NE(svg.find(">embed "), std::string::npos);
  EXPECT_NE(svg.find("linearGradient"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);

  // A failing write leaves nothing behind.
  EXPECT_THROW(write_sensitivity(m, tmp / "missing-dir/map"), Error);
  EXPECT_FALSE(fs::exists(tmp / "missing-dir"));

  // Not a sensitivity map: a clear error.
  write_file_atomic(tmp / "other.json", "{\"kind\": \"something\"}");
  EXPECT_THROW(read_sensitivity_json(tmp / "other.json"), Error);

  // A damaged map: an error naming the file and what is wrong, before the allocation or the
  // writers see it (a head placed in a layer once threw std::out_of_range from the SVG writer).
  const Json good = Json::parse_file(prefix + ".json");
  auto broken = [&](auto&& edit, const std::string& detail) {
    Json j = good;
    edit(j);
    const std::string bad = tmp / "bad.json";
    write_file_atomic(bad, j.dump());
    try {
      read_sensitivity_json(bad);
      ADD_FAILURE() << "no error; expected '" << detail << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(detail), std::string::npos) << e.what();
    }
  };
  auto tensor = [](Json& j, const std::string& kind) -> Json& {
    for (Json& t : j["tensors"].as_array())
      if (t["kind"].as_string() == kind) return t;
    throw std::runtime_error("no tensor of kind " + kind);
  };
  broken([&](Json& j) { tensor(j, "embed")["layer"] = 3; }, "has layer 3");
  broken([&](Json& j) { tensor(j, "q")["layer"] = -1; }, "has layer -1");
  broken([&](Json& j) { tensor(j, "q")["layer"] = int64_t(1) << 40; }, "expected 0 to");
  broken([&](Json& j) { tensor(j, "k")["kind"] = "q"; }, "two tensors of kind 'q'");
  broken([&](Json& j) { j["tensors"].push_back(j["tensors"].as_array()[0]); }, "listed twice");
  broken([&](Json& j) { tensor(j, "v")["source_bytes"] = int64_t(1) << 60; }, "more than any model");
  broken([&](Json& j) { tensor(j, "v")["elements"] = int64_t(1) << 40; }, "elements in");
  broken([&](Json& j) { j["total_source_bytes"] = 1; }, "total_source_bytes 1");
  broken([&](Json& j) { j["formats"] = Json::Array{}; }, "no formats");
  broken([&](Json& j) { j["formats"].push_back(j["formats"].as_array()[0]); }, "listed twice");
  broken([&](Json& j) { j["formats"].as_array().pop_back(); }, "format not in");
  broken([&](Json& j) { j["entries"].push_back(j["entries"].as_array()[0]); }, "listed twice");
  broken([&](Json& j) { j["entries"].as_array()[0]["bytes"] = 0; }, "has 0 bytes");
  broken([&](Json& j) { j["entries"].as_array()[0]["bpw"] = -4.5; }, "bpw -4.5");
  broken([&](Json& j) { j["ctx"] = -1; }, "must not be negative");
}

TEST(Sensitivity, AnchoredMapMeasuresOneFormatPerTensor) {
  const uint64_t seed = 11;
  std::printf("seed %llu\n", (unsigned long long)seed);
  const Checkpoint ck = tiny_model(seed);
  CalibrationOptions co;
  co.ctx = 64;
  const CalibrationReference ref(ck, random_ids(seed, 128, int32_t(ck.config.vocab_size)), -1, co);
  SensitivityOptions so;
  so.formats = {DType::Q4_0, DType::Q8_0};
  const SensitivityMap full = measure_sensitivity(ck, ref, so);
  so.anchor = DType::Q8_0;
  const SensitivityMap m = measure_sensitivity(ck, ref, so);
  EXPECT_EQ(m.anchor, "q8_0");
  ASSERT_EQ(m.entries.size(), full.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const SensitivityEntry &e = m.entries[i], &f = full.entries[i];
    ASSERT_EQ(e.tensor, f.tensor);
    ASSERT_EQ(e.format, f.format);  // same order as the full map
    EXPECT_EQ(e.proxy, f.proxy);
    EXPECT_EQ(e.measured, e.format == DType::Q8_0);
    if (e.measured) {
      EXPECT_NEAR(e.kl, f.kl, 1e-12 + 1e-9 * f.kl);
    } else {
      const SensitivityEntry& a = m.entries[i + 1];  // the tensor's q8_0 entry
      ASSERT_EQ(a.format, DType::Q8_0);
      EXPECT_NEAR(e.kl, a.kl * e.proxy / a.proxy, 1e-15 + 1e-12 * e.kl);
      EXPECT_GT(e.kl, a.kl);
    }
  }
  EXPECT_EQ(m.spearman_by_format.count("q4_0"), 0u);  // only measured entries are correlated
  EXPECT_NE(sensitivity_svg(m).find(">~"), std::string::npos);  // estimates are marked
  EXPECT_NO_THROW(plan_for_budget(m, Budget::bpw(12)));
}

TEST(Sensitivity, ProxyOnly) {
  const Checkpoint ck = tiny_model(4);
  CalibrationOptions co;
  co.ctx = 64;
  const CalibrationReference ref(ck, random_ids(4, 128, int32_t(ck.config.vocab_size)), -1, co);
  SensitivityOptions so;
  so.formats = {DType::Q4_0};
  so.measure = false;
  const SensitivityMap m = measure_sensitivity(ck, ref, so);
  ASSERT_FALSE(m.entries.empty());
  for (const auto& e : m.entries) {
    EXPECT_TRUE(std::isnan(e.kl));
    EXPECT_GT(e.proxy, 0);
  }
  EXPECT_TRUE(std::isnan(m.spearman));
  EXPECT_THROW(plan_for_budget(m, Budget::bpw(12)), Error);
  AllocationOptions po;
  po.use_proxy = true;
  EXPECT_NO_THROW(plan_for_budget(m, Budget::bpw(12), nullptr, po));
  EXPECT_NE(sensitivity_svg(m).find("proxy"), std::string::npos);
}

}  // namespace
}  // namespace genperf

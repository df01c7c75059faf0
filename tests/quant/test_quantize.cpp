// Quantizing checkpoints: the quantizable tensors, recipes and their fallbacks (llama.cpp's
// rules), the calibration forward pass (checked against LlamaModel) and its statistics, storage
// (GGUF bit-exact round trips, the safetensors directory for formats GGUF lacks, the reader's
// validation of quantized tensors), and the `genperf quantize` command's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/quantize.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "genperf/ops.h"
#include "quant/quantize_internal.h"

using namespace genperf;
using genperf::testing::run_command;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

template <typename F>
void expect_error(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << what << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

LlamaConfig config(int64_t layers, int64_t d, int64_t F, int64_t vocab, int64_t heads = 4, int64_t kv = 2) {
  LlamaConfig c = preset_config("tiny");
  c.num_hidden_layers = layers;
  c.hidden_size = d;
  c.intermediate_size = F;
  c.vocab_size = vocab;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = d / heads;
  return c;
}

// A SentencePiece vocabulary of single characters: <unk>, <s>, </s>, the space marker and
// printable ASCII, so that any English text tokenizes (one token a character).
std::unique_ptr<Tokenizer> char_tokenizer() {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "\u2581"};
  v.token_types = {2, 3, 3, 1};
  for (int ch = 33; ch < 127; ++ch) {
    v.tokens.push_back(std::string(1, char(ch)));
    v.token_types.push_back(1);
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) v.scores.push_back(-float(i));
  v.unk_id = 0, v.bos_id = 1, v.eos_id = 2;
  return tokenizer_from_vocab(v, "char-vocab");
}

Checkpoint with_tokenizer(Checkpoint ck) {
  ck.tokenizer = char_tokenizer();
  return ck;
}

// Shares the tensors; rebuilds the tokenizer (a Checkpoint owns it).
Checkpoint copy(const Checkpoint& ck) {
  Checkpoint c = share_weights(ck);
  if (ck.tokenizer) c.tokenizer = tokenizer_from_vocab(ck.tokenizer->vocab(), ck.source);
  return c;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, int32_t(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = pick(rng);
  return t;
}

Tensor logits_of(const Checkpoint& ck, const std::vector<int32_t>& tokens) {
  LlamaModel m(copy(ck));
  Session s(m, int64_t(tokens.size()));
  return m.forward(s, tokens, LogitsFor::All);
}

// ||a - b|| / ||b|| over all logits.
double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.is_contiguous() ? a : a.clone(), cb = b.is_contiguous() ? b : b.clone();
  return std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}

// GGUF `llama` row order of q/k: row j*2+p of a head is HF row p*(D/2)+j.
Tensor to_gguf_rows(const Tensor& t, int64_t heads, int64_t D) {
  Tensor out = Tensor::zeros(t.shape(), t.dtype());
  const size_t rb = t.nbytes() / size_t(t.size(0));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < D / 2; ++j)
      for (int64_t p = 0; p < 2; ++p)
        std::memcpy(out.data<char>() + size_t(h * D + j * 2 + p) * rb, t.data<char>() + size_t(h * D + p * D / 2 + j) * rb, rb);
  return out;
}

}  // namespace

TEST(QuantPlan, QuantizableTensors) {
  Checkpoint ck = random_checkpoint(preset_config("tiny"), DType::F32, 1);
  const auto names = quantizable_tensors(ck);
  ASSERT_EQ(names.size(), 1u + 7 * 2 + 1);
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_EQ(names[1], "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(names[7], "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(names[8], "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  EXPECT_FALSE(is_quantizable("model.norm.weight", ck.tensors.at("model.norm.weight")));
  EXPECT_FALSE(is_quantizable("model.layers.0.input_layernorm.weight", ck.tensors.at("model.layers.0.input_layernorm.weight")));
  EXPECT_FALSE(is_quantizable("model.layers.x.self_attn.q_proj.weight", ck.tensors.at("lm_head.weight")));
  LlamaConfig tied = preset_config("tiny");
  tied.tie_word_embeddings = true;
  EXPECT_EQ(quantizable_tensors(random_checkpoint(tied, DType::F32, 1)).size(), 15u);
}

TEST(QuantPlan, UniformRecipesAndFallbacks) {
  const Checkpoint ck = random_checkpoint(config(2, 256, 704, 256), DType::BF16, 1);
  const std::string down = "model.layers.1.mlp.down_proj.weight", q = "model.layers.1.self_attn.q_proj.weight";
  // llama.cpp's fallbacks for rows that do not split into 256-blocks (704 = 2.75 * 256).
  const std::pair<const char*, DType> cases[] = {
      {"q4_k", DType::Q5_0}, {"q5_k", DType::Q5_1}, {"q6_k", DType::Q8_0}, {"q3_k", DType::Q4_0}, {"q2_k", DType::Q4_0}};
  for (const auto& [f, fb] : cases) {
    std::vector<std::string> notes;
    const QuantPlan p = recipe_plan(ck, cat("uniform:", f), &notes);
    EXPECT_EQ(p.size(), quantizable_tensors(ck).size());
    EXPECT_EQ(p.at(q), parse_dtype(f)) << f;
    EXPECT_EQ(p.at(down), fb) << f;
    ASSERT_EQ(notes.size(), 2u) << f;  // the two down_proj matrices
    EXPECT_NE(notes[0].find("do not split into"), std::string::npos) << notes[0];
  }
  std::vector<std::string> notes;
  const QuantPlan p = recipe_plan(ck, "uniform:Q4_0", &notes);
  EXPECT_TRUE(notes.empty());
  for (const auto& [n, f] : p) EXPECT_EQ(f, DType::Q4_0) << n;
  // 176 columns fit no 32-block: f16, or bf16 for a bf16 source.
  const std::string tiny_down = "model.layers.0.mlp.down_proj.weight";
  EXPECT_EQ(recipe_plan(random_checkpoint(preset_config("tiny"), DType::F32, 1), "uniform:q4_0").at(tiny_down), DType::F16);
  EXPECT_EQ(recipe_plan(random_checkpoint(preset_config("tiny"), DType::BF16, 1), "uniform:q8_0").at(tiny_down), DType::BF16);
  EXPECT_EQ(fallback_format(DType::Q4_K, 96, DType::F32), DType::Q5_0);
  EXPECT_EQ(fallback_format(DType::Q4_K, 256, DType::F32), DType::Q4_K);

  expect_error([&] { recipe_plan(ck, "uniform:q9_9"); }, "unknown format 'q9_9'");
  expect_error([&] { recipe_plan(ck, "uniform:i32"); }, "i32 is not a weight format");
  expect_error([&] { recipe_plan(ck, "uniform:f8_e4m3"); }, "not a weight format");
  expect_error([&] { recipe_plan(ck, "q4_k_x"); }, "unknown recipe 'q4_k_x'");
}

// llama.cpp's Q4_K_M on a 32-layer model (Llama 7B's depth): Q6_K for attn_v and ffn_down in layers
// 0-3, 28-31 and every third layer from 6 to 27.
TEST(QuantPlan, Q4KMFollowsLlamaCpp) {
  const Checkpoint ck = random_checkpoint(config(32, 256, 256, 256), DType::BF16, 1);
  const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  const QuantPlan p = recipe_plan(ck, "q4_k_m");
  for (int i = 0; i < 32; ++i) {
    const std::string l = cat("model.layers.", i, ".");
    const DType want = more.count(i) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(p.at(l + "self_attn.v_proj.weight"), want) << i;
    EXPECT_EQ(p.at(l + "mlp.down_proj.weight"), want) << i;
    for (const char* m : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.o_proj.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight"})
      EXPECT_EQ(p.at(l + m), DType::Q4_K) << l << m;
  }
  EXPECT_EQ(p.at("lm_head.weight"), DType::Q6_K);
  EXPECT_EQ(p.at("model.embed_tokens.weight"), DType::Q4_K);
  // The default shape: 6 layers (more bits in 2 and 5); every row (256 or 768) takes K-quants.
  LlamaConfig c = preset_config("default");
  c.tie_word_embeddings = true;
  const QuantPlan d = recipe_plan(random_checkpoint(c, DType::BF16, 1), "q4_k_m");
  for (int i = 0; i < 6; ++i) {
    const std::string l = cat("model.layers.", i, ".");
    const DType want = i == 2 || i == 5 ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(d.at(l + "mlp.down_proj.weight"), want) << i;
    EXPECT_EQ(d.at(l + "self_attn.v_proj.weight"), want) << i;
  }
  EXPECT_EQ(d.at("model.embed_tokens.weight"), DType::Q6_K);  // tied: the head's type
}

TEST(QuantizeMatrix, RtnAndWeightedAreTheFormatsQuantizers) {
  const unsigned seed = 11;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t N = 67, K = 512;  // rows across chunk boundaries
  Tensor w = Tensor::zeros({N, K});
  for (int64_t i = 0; i < N * K; ++i) w.data<float>()[i] = normal(rng);
  ActivationStats st;
  std::vector<float>& imp = st.mean_sq["w"];
  for (int64_t i = 0; i < K; ++i) imp.push_back(std::exp(normal(rng)));
  for (DType f : {DType::Q4_0, DType::Q4_K, DType::Q8_0, DType::F8_E5M2_B32}) {
    std::vector<uint8_t> a(bytes_for(f, N * K)), b(a.size());
    quantize_rows(f, w.data<float>(), a.data(), N, K);
    quantize_rows(f, w.data<float>(), b.data(), N, K, imp.data());
    QuantizeOptions o;
    const Tensor r = quantize_matrix(w, f, o, "w");
    o.method = QuantMethod::Weighted;
    o.stats = &st;
    const Tensor q = quantize_matrix(w, f, o, "w");
    EXPECT_EQ(std::memcmp(r.raw(), a.data(), a.size()), 0) << dtype_name(f);
    EXPECT_EQ(std::memcmp(q.raw(), b.data(), b.size()), 0) << dtype_name(f);
    EXPECT_EQ(q.shape(), (std::vector<int64_t>{N, K}));
  }
  // bf16 and quantized inputs go through f32.
  const Tensor b16 = w.to(DType::BF16);
  EXPECT_TRUE(same_bytes(quantize_matrix(b16, DType::Q4_0, {}, "w"), quantize_matrix(b16.to(DType::F32), DType::Q4_0, {}, "w")));
  EXPECT_EQ(quantize_matrix(w, DType::BF16, {}, "w").dtype(), DType::BF16);
}

// The calibration pass is LlamaModel's forward with a hook (MatmulInputHook): every matmul input
// is seen once, with its weights' names and shape, and the hook changes nothing (same logits, bit
// for bit); with and without q/k/v biases, tied and untied heads, either rope layout. The
// statistics are those of f32 weights, whatever the stored type.
TEST(Calibration, HookSeesEveryMatmulInput) {
  for (int variant = 0; variant < 3; ++variant) {
    LlamaConfig c = preset_config("tiny");
    c.attention_bias = variant == 1;
    c.tie_word_embeddings = variant == 1;
    Checkpoint ck = random_checkpoint(c, variant == 2 ? DType::BF16 : DType::F32, 3);
    if (variant == 2) ck.rope_style = RopeStyle::Interleaved;
    const auto tokens = random_tokens(70, c.vocab_size, 4);
    std::map<std::string, int64_t> in_features;
    for (const auto& [name, t] : ck.tensors) in_features[name] = t.ndim() == 2 ? t.size(1) : 0;
    Checkpoint copy = random_checkpoint(c, variant == 2 ? DType::BF16 : DType::F32, 3);
    copy.rope_style = ck.rope_style;
    const LlamaModel m(std::move(copy));
    int calls = 0;
    const MatmulInputHook hook = [&](std::span<const std::string> w, const Tensor& x) {
      ++calls;
      EXPECT_EQ(x.size(0), 70);
      EXPECT_EQ(x.size(1), in_features.at(w.front())) << w.front();
    };
    Session s1(m, 70), s2(m, 70);
    const Tensor got = m.forward(s1, tokens, LogitsFor::All, &hook);
    EXPECT_EQ(calls, 4 * 2 + 1);
    const Tensor want = m.forward(s2, tokens, LogitsFor::All);
    EXPECT_EQ(relative_error(got, want), 0.0) << "variant " << variant;
  }
  // A bf16 checkpoint's statistics are its f32 conversion's.
  const Checkpoint b16 = with_tokenizer(random_checkpoint(preset_config("tiny"), DType::BF16, 5));
  Checkpoint f32 = with_tokenizer(random_checkpoint(preset_config("tiny"), DType::BF16, 5));
  for (auto& [name, t] : f32.tensors) t = t.to(DType::F32);
  const auto tokens = random_tokens(300, 96, 6);
  EXPECT_EQ(collect_activation_stats(b16, tokens, 64, false).mean_sq,
            collect_activation_stats(f32, tokens, 64, false).mean_sq);
}

TEST(Calibration, StatisticsMatchADirectComputation) {
  const Checkpoint ck = with_tokenizer(random_checkpoint(preset_config("tiny"), DType::F32, 5));
  const auto tokens = random_tokens(300, 96, 6);
  const ActivationStats st = collect_activation_stats(ck, tokens, 64, true);
  EXPECT_EQ(st.tokens, 300 + 5);  // 5 windows of BOS + 63 tokens
  const std::string l0 = "model.layers.0.";
  const auto& q = st.mean_sq.at(l0 + "self_attn.q_proj.weight");
  EXPECT_EQ(q, st.mean_sq.at(l0 + "self_attn.v_proj.weight"));
  EXPECT_EQ(st.mean_sq.at(l0 + "mlp.gate_proj.weight"), st.mean_sq.at(l0 + "mlp.up_proj.weight"));
  EXPECT_EQ(st.mean_sq.at(l0 + "mlp.down_proj.weight").size(), 176u);
  // Layer 0's q input is rms_norm(embedding) with unit norm weights, over every fed token.
  std::vector<int32_t> fed;
  for (size_t b = 0; b < tokens.size(); b += 63) {
    fed.push_back(1);
    for (size_t i = b; i < std::min(tokens.size(), b + 63); ++i) fed.push_back(tokens[i]);
  }
  const Tensor& emb = ck.tensors.at("model.embed_tokens.weight");
  std::vector<double> want(64, 0.0);
  for (int32_t t : fed) {
    const float* r = emb.row<float>(t);
    double ss = 0;
    for (int i = 0; i < 64; ++i) ss += double(r[i]) * r[i];
    const double s = 1.0 / std::sqrt(ss / 64 + ck.config.rms_norm_eps);
    for (int i = 0; i < 64; ++i) want[size_t(i)] += r[i] * s * r[i] * s / double(fed.size());
  }
  const auto& g = st.gram.at(l0 + "self_attn.q_proj.weight");
  for (int i = 0; i < 64; ++i) {
    EXPECT_NEAR(q[size_t(i)], want[size_t(i)], 1e-4 * want[size_t(i)]) << i;
    EXPECT_NEAR(g[size_t(i * 64 + i)], want[size_t(i)], 1e-4 * want[size_t(i)]) << i;
    EXPECT_NEAR(g[size_t(i * 64 + 3)], g[size_t(3 * 64 + i)], 1e-9 + 1e-6 * std::fabs(g[size_t(i * 64 + 3)]));
  }
  // Untied embedding: uniform importance, no Gram matrix; the head has both.
  EXPECT_EQ(st.mean_sq.at("model.embed_tokens.weight"), std::vector<float>(64, 1.f));
  EXPECT_FALSE(st.gram.count("model.embed_tokens.weight"));
  EXPECT_TRUE(st.gram.count("lm_head.weight"));
  EXPECT_EQ(st.mean_sq.size(), 1u + 7 * 2 + 1);
  // A tied embedding gets the head's (final-norm) statistics.
  LlamaConfig tied = preset_config("tiny");
  tied.tie_word_embeddings = true;
  const ActivationStats ts = collect_activation_stats(random_checkpoint(tied, DType::F32, 5), tokens, 64, false);
  EXPECT_NE(ts.mean_sq.at("model.embed_tokens.weight"), std::vector<float>(64, 1.f));
  EXPECT_TRUE(ts.gram.empty());

  expect_error([&] { collect_activation_stats(ck, random_tokens(100, 96, 1), 64, false); },
               "needs at least 256 tokens, got 100");
  expect_error([&] { collect_activation_stats(ck, tokens, 1000, false); }, "calibration context 1000");
}

// Quantized GGUF files read back bit-exactly (q/k rows in GGUF's rotary order) and run, with
// logits near the f32 model's. The bounds are measured errors with a margin: random weights
// amplify weight error (a Q8_0 weight is off by ~0.8% rms, the logits here by ~2%), and the
// quantized kernels round activations to 8 bits, which makes two mathematically equal models
// (HF and GGUF row orders) differ by ~1e-3 rather than by f32 rounding.
TEST(QuantizedStorage, GgufRoundTripIsBitExactAndRuns) {
  TempDir dir("quant-gguf");
  const Checkpoint ck = with_tokenizer(random_checkpoint(config(2, 256, 512, 256), DType::F32, 7));
  const auto tokens = random_tokens(48, 96, 8);
  const Tensor ref = logits_of(ck, tokens);
  const std::map<std::string, double> bound = {{"uniform:q8_0", 0.03}, {"q4_k_m", 0.35}, {"uniform:q3_k", 0.7}};
  // llama.cpp's general.file_type: MOSTLY_Q8_0, MOSTLY_Q4_K_M (Q6_K beside Q4_K), MOSTLY_Q3_K_S.
  const std::map<std::string, int64_t> file_type = {{"uniform:q8_0", 7}, {"q4_k_m", 15}, {"uniform:q3_k", 11}};
  double previous = 0;
  for (const char* recipe : {"uniform:q8_0", "q4_k_m", "uniform:q3_k"}) {
    const Checkpoint q = quantize_checkpoint(ck, recipe_plan(ck, recipe), {});
    const std::string path = dir / cat(recipe + (recipe[0] == 'u' ? 8 : 0), ".gguf");
    save_quantized(path, q);
    const GgufFile g = GgufFile::open(path);
    EXPECT_EQ(g.type("general.file_type"), GgufType::U32) << recipe;
    EXPECT_EQ(g.get_int("general.file_type"), file_type.at(recipe)) << recipe;
    EXPECT_EQ(g.type("general.quantization_version"), GgufType::U32) << recipe;  // the spec requires it here
    EXPECT_EQ(g.get_int("general.quantization_version"), 2) << recipe;
    const Checkpoint back = load_checkpoint(path);
    EXPECT_EQ(back.config.torch_dtype, ck.config.torch_dtype) << recipe;  // from genperf.torch_dtype
    ASSERT_EQ(back.rope_style, RopeStyle::Interleaved);
    const auto& c = ck.config;
    for (const auto& [name, t] : q.tensors) {
      ASSERT_TRUE(back.tensors.count(name)) << name;
      Tensor want = t;
      if (name.find("q_proj.weight") != std::string::npos) want = to_gguf_rows(t, c.num_attention_heads, c.head_dim);
      if (name.find("k_proj.weight") != std::string::npos) want = to_gguf_rows(t, c.num_key_value_heads, c.head_dim);
      EXPECT_TRUE(same_bytes(back.tensors.at(name), want)) << recipe << " " << name;
    }
    ASSERT_TRUE(back.tokenizer);
    EXPECT_EQ(back.tokenizer->encode("Hello, world", true), ck.tokenizer->encode("Hello, world", true));
    const Tensor got = logits_of(back, tokens);
    EXPECT_LT(relative_error(got, logits_of(q, tokens)), 1e-2) << recipe;  // same model, other row order
    const double err = relative_error(got, ref);
    std::printf("%-12s logits relative error %.4f, %.3f bpw\n", recipe, err, size_report(q).bpw);
    EXPECT_LT(err, bound.at(recipe)) << recipe;
    EXPECT_GT(err, previous) << recipe;  // fewer bits, larger error
    previous = err;
    // Re-writing a GGUF-loaded (interleaved) checkpoint does not permute again.
    save_quantized(dir / "again.gguf", back);
    EXPECT_LT(relative_error(logits_of(load_checkpoint(dir / "again.gguf"), tokens), got), 1e-6);
  }
}

// Formats GGUF lacks go to an HF-style directory (U8 bytes + genperf.quant metadata).
TEST(QuantizedStorage, DirectoryForNonGgmlFormats) {
  TempDir dir("quant-dir");
  const Checkpoint ck = with_tokenizer(random_checkpoint(config(2, 128, 256, 256), DType::BF16, 9));
  const auto tokens = random_tokens(40, 96, 10);
  const Checkpoint q = quantize_checkpoint(ck, recipe_plan(ck, "uniform:f8_e4m3_b32"), {});
  expect_error([&] { save_quantized(dir / "x.gguf", q); }, "which GGUF cannot hold");
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  save_quantized(dir / "m", q);
  EXPECT_FALSE(fs::exists(dir / cat("m.tmp-", getpid())));
  const Checkpoint back = load_checkpoint(dir / "m");
  for (const auto& [name, t] : q.tensors) EXPECT_TRUE(same_bytes(back.tensors.at(name), t)) << name;
  EXPECT_EQ(back.tensors.at("lm_head.weight").dtype(), DType::F8_E4M3_B32);
  const SafetensorsFile sf = read_safetensors(dir / "m/model.safetensors");
  EXPECT_EQ(sf.metadata.at("genperf.quant.model.layers.0.mlp.down_proj.weight"), "f8_e4m3_b32 128 256");
  const double err = relative_error(logits_of(back, tokens), logits_of(ck, tokens));
  std::printf("f8_e4m3_b32 logits relative error %.4f\n", err);
  EXPECT_LT(err, 0.2);  // 3 mantissa bits: ~3.6% rms per weight
  expect_error([&] { save_quantized(dir / "m", q); }, "exists");

  // From a GGUF (interleaved q/k rows) to a directory: rows go back to HF's order.
  save_quantized(dir / "a.gguf", quantize_checkpoint(ck, recipe_plan(ck, "uniform:q8_0"), {}));
  const Checkpoint g = load_checkpoint(dir / "a.gguf");
  const Checkpoint g8 = quantize_checkpoint(g, recipe_plan(g, "uniform:f8_e5m2_b32"), {});
  save_quantized(dir / "from-gguf", g8);
  const Checkpoint h = load_checkpoint(dir / "from-gguf");
  EXPECT_EQ(h.rope_style, RopeStyle::Neox);
  EXPECT_LT(relative_error(logits_of(h, tokens), logits_of(g8, tokens)), 1e-5);
}

// The reader checks quantized tensors' bytes against format x shape, with clear errors.
TEST(QuantizedStorage, SafetensorsValidation) {
  TempDir dir("quant-st");
  auto file = [&](const std::string& meta, const std::string& tensor, size_t data_bytes) {
    std::string header = "{";
    if (!meta.empty()) header += "\"__metadata__\": {" + meta + "}, ";
    header += "\"w\": " + tensor + "}";
    const std::string path = dir / "t.safetensors";
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
    return path;
  };
  const std::string ok_meta = "\"genperf.quant.w\": \"q4_0 2 64\"";
  const std::string ok_tensor = R"({"dtype": "U8", "shape": [2, 36], "data_offsets": [0, 72]})";
  const SafetensorsFile f = read_safetensors(file(ok_meta, ok_tensor, 72));
  EXPECT_EQ(f.tensors.at("w").dtype(), DType::Q4_0);
  EXPECT_EQ(f.tensors.at("w").shape(), (std::vector<int64_t>{2, 64}));
  auto bad = [&](const std::string& meta, const std::string& tensor, size_t bytes, const std::string& what) {
    expect_error([&] { read_safetensors(file(meta, tensor, bytes)); }, what);
  };
  bad("", ok_tensor, 72, "has dtype U8 but no 'genperf.quant.w' metadata");
  bad(ok_meta, R"({"dtype": "F32", "shape": [2, 64], "data_offsets": [0, 512]})", 512, "is not U8 but has");
  bad(ok_meta, R"({"dtype": "U8", "shape": [2, 35], "data_offsets": [0, 70]})", 70,
      "q4_0 of shape [2, 64] is stored as U8 [2, 36], but the file has U8 [2, 35]");
  bad(ok_meta, R"({"dtype": "U8", "shape": [2, 36], "data_offsets": [0, 70]})", 72, "needs 72 bytes");
  bad("\"genperf.quant.w\": \"q9_0 2 64\"", ok_tensor, 72, "names an unknown format");
  bad("\"genperf.quant.w\": \"q4_0 2 60\"", ok_tensor, 72, "not a multiple of the q4_0 block size 32");
  bad("\"genperf.quant.w\": \"f32 2 64\"", ok_tensor, 72, "stores natively");
  bad("\"genperf.quant.w\": \"q4_0 2 -64\"", ok_tensor, 72, "not a non-negative integer");
  bad("\"genperf.quant.w\": \"q4_0\"", ok_tensor, 72, "needs a format and 1 to 4 dims");
  bad("\"genperf.quant.w\": \"q4_0 1 1 1 2 64\"", ok_tensor, 72, "needs a format and 1 to 4 dims");
  bad("\"genperf.quant.w\": \"q4_0  2 64\"", ok_tensor, 72, "not a non-negative integer");
  bad("\"genperf.quant.w\": \"q4_0 999999999999999 999999999999999 64\"", ok_tensor, 72, "");
  bad(ok_meta + ", \"genperf.quant.v\": \"q4_0 1 32\"", ok_tensor, 72, "describes a tensor the file does not have");
}

// ---------- the command ----------

namespace {

const std::string kGenperf = std::string(GENPERF_BINARY_DIR) + "/genperf";

struct CmdResult {
  int code;
  std::string out, err;
};

CmdResult gp(const std::string& args, const TempDir& tmp) {
  CmdResult r;
  const std::string err_file = tmp / "stderr.txt";
  r.code = run_command(kGenperf + " " + args + " 2>" + err_file, &r.out);
  r.err = read_text_file(err_file);
  return r;
}

// A tiny GGUF model with the character tokenizer, and an English calibration text.
struct CliModel {
  TempDir dir{"quant-cli"};
  std::string model = dir / "tiny.gguf", text = dir / "calib.txt";
  CliModel() {
    LlamaConfig c = config(2, 64, 128, 128);
    save_gguf_checkpoint(model, with_tokenizer(random_checkpoint(c, DType::F32, 12)));
    std::string t;
    for (int i = 0; i < 40; ++i) t += "It is a truth universally acknowledged, that a single man in possession. ";
    write_file_atomic(text, t);
  }
};

}  // namespace

TEST(QuantizeCli, WritesAndReports) {
  CliModel m;
  const CmdResult r = gp("quantize --model " + m.model + " --out " + (m.dir / "q.gguf") + " --recipe uniform:q8_0 --method gptq"
                   " --calib " + m.text + " --calib-tokens 1000 --ctx 64 --json", m.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("method").as_string(), "gptq");
  EXPECT_EQ(j.at("calibration_tokens").as_int(), 1000);
  EXPECT_NEAR(j.at("bpw").as_number(), 8.5, 1e-9);  // every matrix fits q8_0 here
  EXPECT_GT(j.at("compression_vs_bf16").as_number(), 1.5);
  const Checkpoint back = load_checkpoint(m.dir / "q.gguf");
  EXPECT_EQ(back.tensors.at("model.layers.1.mlp.down_proj.weight").dtype(), DType::Q8_0);

  const CmdResult t = gp("quantize --model " + m.model + " --out " + (m.dir / "d") + " --recipe uniform:f8_e4m3_b32", m.dir);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("bits per weight"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("f8_e4m3_b32"), std::string::npos) << t.out;
  EXPECT_EQ(load_checkpoint(m.dir / "d").tensors.at("lm_head.weight").dtype(), DType::F8_E4M3_B32);
}

// --recipe auto hands the budget to sensitivity.h's allocation (here on the cheap proxy map).
TEST(QuantizeCli, AutoRecipeMeetsTheBudget) {
  CliModel m;
  const CmdResult r = gp("quantize --model " + m.model + " --out " + (m.dir / "a.gguf") + " --recipe auto --target-bpw 6"
                         " --proxy --calib " + m.text + " --calib-tokens 600 --ctx 64 --json", m.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_LE(j.at("bpw").as_number(), 6.0 + 1e-9);
  EXPECT_GT(j.at("bpw").as_number(), 4.0);
  EXPECT_TRUE(fs::exists(m.dir / "a.gguf"));
  // Predicted and achieved: the proxy allocates, the KL is scored on the windows it was computed on.
  const Json& al = j.at("allocation");
  EXPECT_NEAR(al.at("predicted_bpw").as_number(), j.at("bpw").as_number(), 1e-9);
  EXPECT_EQ(al.at("predicted_total_bytes").as_int(), j.at("total_bytes").as_int());
  EXPECT_NE(al.find("predicted_proxy"), nullptr);
  EXPECT_GT(al.at("kl").as_number(), 0.0);
  EXPECT_EQ(al.at("kl_tokens").as_int(), 600);
  EXPECT_EQ(al.at("kl_ctx").as_int(), 64);
}

// With a map from `genperf sensitivity`, the achieved KL is scored on the map's windows, where the
// prediction was measured, and tracks it; without --calib the output says how to measure it.
TEST(QuantizeCli, AutoRecipeReportsPredictedAndAchievedKl) {
  CliModel m;
  const CmdResult s = gp("sensitivity --model " + m.model + " --calib " + m.text + " --out " + (m.dir / "map") +
                         " --formats q4_0,q8_0 --ctx 48 --tokens 480 --json", m.dir);
  ASSERT_EQ(s.code, 0) << s.err;
  const std::string base = "quantize --model " + m.model + " --recipe auto --target-bpw 6.5 --sensitivity " +
                           (m.dir / "map.json") + " --json";
  const CmdResult r = gp(base + " --out " + (m.dir / "a.gguf") + " --calib " + m.text, m.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json al = Json::parse(r.out).at("allocation");
  EXPECT_EQ(al.at("kl_tokens").as_int(), 480);
  EXPECT_EQ(al.at("kl_ctx").as_int(), 48);
  const double predicted = al.at("predicted_kl").as_number(), achieved = al.at("kl").as_number();
  std::printf("predicted KL %.6g achieved %.6g\n", predicted, achieved);
  EXPECT_GT(predicted, 0.0);
  EXPECT_NEAR(al.at("achieved_over_predicted_kl").as_number(), achieved / predicted, 1e-12);
  EXPECT_GT(achieved / predicted, 0.5);  // single-tensor KLs add up to about the whole's
  EXPECT_LT(achieved / predicted, 2.0);
  EXPECT_EQ(al.find("kl_note"), nullptr) << al.dump(0);
  // info names the mix: every matrix of the tiny model is quantizable, so the counts are quantize's.
  const Json fc = Json::parse(r.out).at("format_counts");
  ASSERT_EQ(fc.as_object().size(), 2u) << fc.dump(0);
  const CmdResult info = gp("info --json --model " + (m.dir / "a.gguf"), m.dir);
  ASSERT_EQ(info.code, 0) << info.err;
  const int64_t n4 = fc.at("q4_0").as_int(), n8 = fc.at("q8_0").as_int();
  const std::string mix = n4 >= n8 ? cat("mixed: ", n4, " q4_0, ", n8, " q8_0") : cat("mixed: ", n8, " q8_0, ", n4, " q4_0");
  EXPECT_EQ(Json::parse(info.out).at("weight_types").as_string(), mix);

  const CmdResult n = gp(base + " --out " + (m.dir / "b.gguf"), m.dir);
  ASSERT_EQ(n.code, 0) << n.err;
  const Json bl = Json::parse(n.out).at("allocation");
  EXPECT_EQ(bl.find("kl"), nullptr);
  EXPECT_NE(bl.at("kl_note").as_string().find("give --calib FILE"), std::string::npos) << bl.dump(0);
  EXPECT_NEAR(bl.at("predicted_kl").as_number(), predicted, 1e-15);
}

// --target-latency: the least predicted KL under a decode step time, measured here (and checked
// against the quantized model's measured step) or modeled for a catalogue device.
TEST(QuantizeCli, LatencyBudget) {
  CliModel m;
  const CmdResult s = gp("sensitivity --model " + m.model + " --calib " + m.text + " --out " + (m.dir / "map") +
                         " --formats q4_0,q8_0 --ctx 48 --tokens 480 --proxy-only --json", m.dir);
  ASSERT_EQ(s.code, 0) << s.err;
  const std::string base = "quantize --model " + m.model + " --recipe auto --proxy --sensitivity " + (m.dir / "map.json") +
                           " --latency-context 16 --json --out " + (m.dir / "a.gguf");
  const CmdResult r = gp(base + " --target-latency 1000", m.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  const Json& al = j.at("allocation");
  EXPECT_EQ(al.at("latency_kind").as_string(), "measured");
  EXPECT_EQ(al.at("latency_device").as_string(), "cpu");
  EXPECT_LE(al.at("predicted_latency_ms").as_number(), 1000.0);
  EXPECT_EQ(al.at("budget_latency_ms").as_number(), 1000.0);
  EXPECT_GT(al.at("measured_latency_ms").at("median").as_number(), 0.0);
  EXPECT_EQ(al.at("measured_latency_ms").at("n").as_int(), 5);
  EXPECT_GT(al.at("measured_source_latency_ms").at("median").as_number(), 0.0);
  EXPECT_GT(al.at("predicted_speedup").as_number(), 0.0);
  // A generous budget keeps every tensor (no KL); the table names every quantizable tensor.
  EXPECT_EQ(al.at("predicted_proxy").as_number(), 0.0);
  EXPECT_EQ(j.at("latency").at("tensor_s").as_object().size(), j.at("tensors").as_object().size());
  EXPECT_EQ(j.at("latency").at("context").as_int(), 16);

  const CmdResult h = gp(base + " --target-latency 1000 --device H100", m.dir);
  ASSERT_EQ(h.code, 0) << h.err;
  const Json hj = Json::parse(h.out);
  const Json& hl = hj.at("allocation");
  EXPECT_EQ(hl.at("latency_kind").as_string(), "modeled");
  EXPECT_EQ(hl.at("latency_device").as_string(), "h100");
  EXPECT_EQ(hl.find("measured_latency_ms"), nullptr);  // no H100 here

  const CmdResult t = gp(base + " --target-latency 1e-6", m.dir);
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.err.find("--target-latency 1e-06 ms cannot be met: the fastest achievable step is"), std::string::npos)
      << t.err;
  const CmdResult u = gp(base + " --target-latency 10 --device tpu9", m.dir);
  EXPECT_NE(u.code, 0);
  EXPECT_NE(u.err.find("unknown device 'tpu9'"), std::string::npos) << u.err;
}

TEST(QuantizeCli, BadInputGivesClearErrors) {
  CliModel m;
  const std::string base = "quantize --model " + m.model + " --out " + (m.dir / "o.gguf");
  auto expect_fail = [&](const std::string& args, const std::string& what) {
    const CmdResult r = gp(base + " " + args, m.dir);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(m.dir / "o.gguf")) << args;
  };
  expect_fail("--recipe uniform:q9_9", "unknown format 'q9_9'");
  expect_fail("--recipe q3_k_xl", "unknown recipe 'q3_k_xl'");
  expect_fail("--method gptq", "--method gptq needs calibration text: give --calib FILE");
  expect_fail("--method awq --calib " + m.text, "unknown method 'awq'");
  write_file_atomic(m.dir / "short.txt", "Too short.");
  expect_fail("--method imatrix --calib " + (m.dir / "short.txt"),
              "calibration text " + (m.dir / "short.txt") + " has 11 tokens, but 4096 are needed");
  expect_fail("--method imatrix --calib " + (m.dir / "missing.txt"), "missing.txt");
  expect_fail("--recipe uniform:f8_e4m3_b32", "GGUF cannot hold");
  expect_fail("--recipe auto", "--recipe auto needs exactly one of --target-bpw, --target-size, --max-kl and --target-latency");
  expect_fail("--recipe auto --target-bpw 5 --target-latency 3", "needs exactly one of");
  expect_fail("--recipe q4_k_m --device h100", "--device names where --target-latency is timed");
  expect_fail("--recipe auto --target-bpw 5 --max-kl 0.1", "needs exactly one of");
  expect_fail("--recipe auto --target-bpw 5", "give --sensitivity FILE.json");
  fs::create_directories(m.dir / "full");
  write_file_atomic(m.dir / "full/x", "x");
  const CmdResult r = gp("quantize --model " + m.model + " --out " + (m.dir / "full") + " --recipe uniform:q8_0", m.dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("exists; choose a new output path"), std::string::npos) << r.err;
}

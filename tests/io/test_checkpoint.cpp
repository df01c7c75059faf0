#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "common/test_util.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io_test_util.h"

using namespace genperf;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.torch_dtype = "float32";
  c.bos_token_ids = {1};
  c.eos_token_ids = {2, 3};
  return c;
}

// Random weights for every tensor the config needs, by Hugging Face name.
std::map<std::string, Tensor> tiny_tensors(const LlamaConfig& c, std::mt19937& rng,
                                           DType dtype = DType::F32) {
  const int64_t V = c.vocab_size, d = c.hidden_size, F = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  std::map<std::string, Tensor> t;
  auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    t[n] = genperf::testing::random_weights(shape, dtype, rng);
  };
  add("model.embed_tokens.weight", {V, d});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = cat("model.layers.", i, ".");
    add(p + "input_layernorm.weight", {d});
    add(p + "self_attn.q_proj.weight", {q, d});
    add(p + "self_attn.k_proj.weight", {kv, d});
    add(p + "self_attn.v_proj.weight", {kv, d});
    add(p + "self_attn.o_proj.weight", {d, q});
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
    add(p + "post_attention_layernorm.weight", {d});
    add(p + "mlp.gate_proj.weight", {F, d});
    add(p + "mlp.up_proj.weight", {F, d});
    add(p + "mlp.down_proj.weight", {d, F});
  }
  add("model.norm.weight", {d});
  if (!c.tie_word_embeddings) add("lm_head.weight", {V, d});
  return t;
}

void expect_config_eq(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings, b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.bos_token_ids, b.bos_token_ids);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
}

void expect_tensors_eq(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [n, t] : a) {
    ASSERT_TRUE(b.count(n)) << n;
    EXPECT_TRUE(genperf::testing::same_bytes(t, b.at(n))) << n;
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// GGUF row r of a q/k projection holds HF row hf_row(r): within a head of D rows, GGUF row
// j*2+p is HF row p*D/2+j. Computed here from the definition, independently of the library.
int64_t hf_row(int64_t r, int64_t D) {
  const int64_t head = r / D, i = r % D;
  const int64_t j = i / 2, p = i % 2;
  return head * D + p * (D / 2) + j;
}

void expect_rows_permuted(const Tensor& gguf, const Tensor& hf, int64_t D, const std::string& name) {
  ASSERT_EQ(gguf.shape(), hf.shape()) << name;
  const int64_t rows = hf.size(0);
  const size_t row_bytes = hf.nbytes() / size_t(rows);
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_EQ(std::memcmp(static_cast<const char*>(gguf.raw()) + size_t(r) * row_bytes,
                          static_cast<const char*>(hf.raw()) + size_t(hf_row(r, D)) * row_bytes, row_bytes),
              0)
        << name << " row " << r;
}

class FakeTokenizer : public Tokenizer {
 public:
  explicit FakeTokenizer(TokenizerVocab v) : v_(std::move(v)) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(const std::vector<int32_t>&) const override { return ""; }
  std::string piece(int32_t) const override { return ""; }
  int32_t vocab_size() const override { return int32_t(v_.tokens.size()); }
  int32_t bos_id() const override { return v_.bos_id; }
  int32_t eos_id() const override { return v_.eos_id; }
  bool add_bos() const override { return v_.add_bos; }
  const char* kind() const override { return "fake"; }
  TokenizerVocab vocab() const override { return v_; }

 private:
  TokenizerVocab v_;
};

}  // namespace

TEST(Checkpoint, ConfigJsonRoundTrip) {
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
  c.tie_word_embeddings = true;
  c.torch_dtype = "bfloat16";
  write_file_atomic(dir / "config.json", hf_config_json(c));
  expect_config_eq(read_hf_config(dir / "config.json"), c);
  c.architecture = "Qwen2ForCausalLM";
  c.attention_bias = true;
  c.rope_scaling = {};
  c.bos_token_ids.clear();
  c.eos_token_ids = {7};
  write_file_atomic(dir / "config.json", hf_config_json(c));
  expect_config_eq(read_hf_config(dir / "config.json"), c);
}

TEST(Checkpoint, ConfigJsonDefaultsAndErrors) {
  TempDir dir("ck");
  const std::string path = dir / "config.json";
  write_file_atomic(path, R"({"architectures": ["MistralForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "rope_scaling": null,
    "head_dim": null, "bos_token_id": 1, "eos_token_id": null, "sliding_window": 4096})");
  const LlamaConfig c = read_hf_config(path);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_EQ(c.bos_token_ids, std::vector<int32_t>{1});
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.tie_word_embeddings);

  write_file_atomic(path, R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2})");
  EXPECT_TRUE(read_hf_config(path).attention_bias);

  auto err = [&](const std::string& text) {
    write_file_atomic(path, text);
    const std::string e = error_of([&] { read_hf_config(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    return e;
  };
  EXPECT_NE(err(R"({"architectures": ["GPT2LMHeadModel"]})").find("unknown architecture 'GPT2LMHeadModel'"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 1})").find("missing field 'hidden_size'"),
      std::string::npos);
  EXPECT_NE(err(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": "x"})").find("expected an integer"),
            std::string::npos);
  const std::string odd_heads = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10,
    "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 3})";
  EXPECT_NE(err(odd_heads).find("head_dim"), std::string::npos);
  EXPECT_NE(err("{").find("[json]"), std::string::npos);
}

TEST(Checkpoint, HfSaveLoadBitExact) {
  const unsigned seed = 1001;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  const LlamaConfig c = tiny_config();
  const auto tensors = tiny_tensors(c, rng, DType::BF16);
  genperf::testing::write_bytes(dir / "tokenizer_config.json", "{}");
  save_hf_checkpoint(dir / "m", c, tensors, {dir / "tokenizer_config.json"});
  EXPECT_TRUE(fs::exists(dir / "m/model.safetensors"));
  EXPECT_EQ(genperf::testing::read_bytes(dir / "m/tokenizer_config.json"), "{}");
  const Checkpoint ck = load_checkpoint(dir / "m");
  EXPECT_EQ(ck.format, "hf");
  EXPECT_EQ(ck.rope_style, RopeStyle::Neox);
  EXPECT_EQ(ck.tokenizer, nullptr);  // no tokenizer.json or tokenizer.model
  expect_config_eq(ck.config, c);
  expect_tensors_eq(ck.tensors, tensors);
}

TEST(Checkpoint, HfShardedSaveLoad) {
  const unsigned seed = 1002;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.tie_word_embeddings = true;
  const auto tensors = tiny_tensors(c, rng);
  save_hf_checkpoint(dir / "m", c, tensors, {}, 10000);
  EXPECT_FALSE(fs::exists(dir / "m/model.safetensors"));
  ASSERT_TRUE(fs::exists(dir / "m/model.safetensors.index.json"));
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir / "m"))
    if (e.path().filename().string().starts_with("model-")) ++shards;
  EXPECT_GT(shards, 2);
  EXPECT_TRUE(
      fs::exists(dir / cat("m/model-00001-of-", shards < 10 ? "0000" : "000", shards, ".safetensors")));
  const Checkpoint ck = load_checkpoint(dir / "m", false);
  expect_config_eq(ck.config, c);
  expect_tensors_eq(ck.tensors, tensors);
  // Saving unsharded over it removes the index, which would otherwise win.
  save_hf_checkpoint(dir / "m", c, tensors);
  EXPECT_FALSE(fs::exists(dir / "m/model.safetensors.index.json"));
  expect_tensors_eq(load_checkpoint(dir / "m").tensors, tensors);
}

TEST(Checkpoint, HfErrorsNameTheFile) {
  const unsigned seed = 1003;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  const LlamaConfig c = tiny_config();
  auto tensors = tiny_tensors(c, rng);
  const std::string m = dir / "m";
  fs::create_directories(m);
  write_file_atomic(m + "/config.json", hf_config_json(c));
  auto write_model = [&](const std::map<std::string, Tensor>& ts) {
    std::vector<std::pair<std::string, Tensor>> v(ts.begin(), ts.end());
    write_safetensors(m + "/model.safetensors", v);
  };
  auto missing = tensors;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  write_model(missing);
  std::string e = error_of([&] { load_checkpoint(m); });
  EXPECT_NE(e.find(m), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor model.layers.1.mlp.up_proj.weight (expected shape [48, 32])"),
            std::string::npos)
      << e;

  auto no_head = tensors;
  no_head.erase("lm_head.weight");
  write_model(no_head);
  EXPECT_NE(error_of([&] { load_checkpoint(m); }).find("missing tensor lm_head.weight"), std::string::npos);

  auto wrong = tensors;
  wrong["model.layers.0.self_attn.k_proj.weight"] = Tensor::zeros({32, 32});
  write_model(wrong);
  e = error_of([&] { load_checkpoint(m); });
  EXPECT_NE(e.find(m + "/model.safetensors: tensor model.layers.0.self_attn.k_proj.weight has shape [32, "
                       "32], expected [16, 32]"),
            std::string::npos)
      << e;
  EXPECT_THROW(save_hf_checkpoint(dir / "w", c, wrong), Error);

  write_model(tensors);
  write_file_atomic(m + "/config.json", R"({"architectures": ["FalconForCausalLM"]})");
  e = error_of([&] { load_checkpoint(m); });
  EXPECT_NE(e.find(m + "/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown architecture"), std::string::npos) << e;

  write_file_atomic(m + "/config.json", hf_config_json(c));
  write_file_atomic(m + "/model.safetensors.index.json",
                    R"({"weight_map": {"lm_head.weight": "../x.safetensors"}})");
  EXPECT_NE(error_of([&] { load_checkpoint(m); }).find("not a file name in the directory"),
            std::string::npos);
  write_file_atomic(m + "/model.safetensors.index.json",
                    R"({"weight_map": {"lm_head.weight": "gone.safetensors"}})");
  EXPECT_NE(error_of([&] { load_checkpoint(m); }).find("gone.safetensors"), std::string::npos);
  fs::remove(m + "/model.safetensors.index.json");
  fs::remove(m + "/model.safetensors");
  EXPECT_NE(error_of([&] { load_checkpoint(m); }).find("found neither"), std::string::npos);
  EXPECT_NE(error_of([&] { load_checkpoint(dir / "absent"); }).find("no such file"), std::string::npos);
}

TEST(Checkpoint, GgufSaveLoadPermutesRotaryRows) {
  const unsigned seed = 1004;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  Checkpoint src;
  src.source = dir / "tiny-hf";
  src.config = c;
  src.tensors = tiny_tensors(c, rng, DType::F16);
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "llama-bpe";
  v.tokens = {"a", "b", "ab"};
  for (int i = 3; i < 64; ++i) v.tokens.push_back(cat("t", i));
  v.token_types.assign(64, 1);
  v.merges = {"a b"};
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  src.tokenizer = std::make_unique<FakeTokenizer>(v);
  const std::string path = dir / "tiny.gguf";
  save_gguf_checkpoint(path, src);

  const Checkpoint ck = load_checkpoint(path, false);
  EXPECT_EQ(ck.format, "gguf");
  EXPECT_EQ(ck.rope_style, RopeStyle::Interleaved);
  expect_config_eq(ck.config, c);
  ASSERT_EQ(ck.tensors.size(), src.tensors.size());
  for (const auto& [name, t] : src.tensors) {
    const bool rotary = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos;
    if (rotary) {
      expect_rows_permuted(ck.tensors.at(name), t, c.head_dim, name);
    } else if (t.ndim() == 1) {  // norms are stored in F32, as llama.cpp needs them: the same values
      EXPECT_EQ(ck.tensors.at(name).dtype(), DType::F32) << name;
      EXPECT_TRUE(genperf::testing::same_bytes(ck.tensors.at(name), t.to(DType::F32))) << name;
    } else {
      EXPECT_TRUE(genperf::testing::same_bytes(ck.tensors.at(name), t)) << name;
    }
  }

  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  // general.file_type describes the tensors (f16 matrices: MOSTLY_F16), genperf.torch_dtype keeps
  // the config's float32; quantization_version is written whatever the types, as llama.cpp does.
  EXPECT_EQ(g.type("general.file_type"), GgufType::U32);
  EXPECT_EQ(g.get_int("general.file_type"), 1);
  EXPECT_EQ(g.type("general.quantization_version"), GgufType::U32);
  EXPECT_EQ(g.get_int("general.quantization_version"), 2);
  EXPECT_EQ(g.get_string("genperf.torch_dtype"), "float32");
  EXPECT_EQ(g.get_int("llama.block_count"), 2);
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens"), v.tokens);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.merges"), v.merges);
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_TRUE(g.get_bool("tokenizer.ggml.add_bos_token"));
  ASSERT_NE(g.find_tensor("blk.1.attn_k.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{64, 32}));
  ASSERT_NE(g.find_tensor("rope_freqs.weight"), nullptr);  // llama.cpp's form of llama3 scaling

  // The tokenizer comes back from tokenizer.ggml.* through tokenizer_from_vocab.
  const Checkpoint with_tok = load_checkpoint(path);
  ASSERT_NE(with_tok.tokenizer, nullptr);
  EXPECT_EQ(with_tok.tokenizer->vocab_size(), 64);
  EXPECT_EQ(with_tok.tokenizer->vocab().tokens, v.tokens);
  EXPECT_EQ(with_tok.tokenizer->bos_id(), 1);

  // Saving the loaded (already interleaved) checkpoint again does not permute twice.
  save_gguf_checkpoint(dir / "again.gguf", ck);
  expect_tensors_eq(load_checkpoint(dir / "again.gguf").tensors, ck.tensors);
}

TEST(Checkpoint, GgufBiasesAndQwen2) {
  const unsigned seed = 1005;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.architecture = "Qwen2ForCausalLM";
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  c.torch_dtype = "bfloat16";
  Checkpoint src;
  src.config = c;
  src.tensors = tiny_tensors(c, rng, DType::BF16);
  save_gguf_checkpoint(dir / "q.gguf", src);
  EXPECT_EQ(GgufFile::open(dir / "q.gguf").get_int("general.file_type"), 32);  // MOSTLY_BF16
  const Checkpoint ck = load_checkpoint(dir / "q.gguf");
  expect_config_eq(ck.config, c);
  // Biases, bf16 here, are stored in F32 (llama.cpp adds only f32 vectors): the same values.
  for (const char* n : {"model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias"}) {
    EXPECT_EQ(ck.tensors.at(n).dtype(), DType::F32) << n;
    const Tensor want = src.tensors.at(n).to(DType::F32);
    expect_rows_permuted(ck.tensors.at(n).view({ck.tensors.at(n).size(0), 1}), want.view({want.size(0), 1}),
                         c.head_dim, n);
  }
  EXPECT_TRUE(genperf::testing::same_bytes(ck.tensors.at("model.layers.0.self_attn.v_proj.bias"),
                                           src.tensors.at("model.layers.0.self_attn.v_proj.bias").to(DType::F32)));
  EXPECT_EQ(ck.tensors.count("lm_head.weight"), 0u);
}

// Rewrites a genperf GGUF as llama.cpp would have written it: no genperf.* keys (so llama3 rope
// scaling is known only from rope_freqs.weight), keys under `arch`, a BOS id from the tokenizer.
void rewrite_like_llama_cpp(const std::string& in, const std::string& out, const std::string& arch) {
  const GgufFile g = GgufFile::open(in);
  GgufWriter w;
  for (const std::string& k : g.keys()) {
    if (k.starts_with("genperf.") || k == "general.alignment") continue;
    const std::string key = k.starts_with("llama.") ? arch + k.substr(5) : k;
    w.set(key, k == "general.architecture" ? GgufValue::string(arch) : g.value(k));
  }
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  for (const GgufTensorInfo& t : g.tensor_infos()) w.add_tensor(t.name, g.tensor(t.name));
  w.write(out);
}

TEST(Checkpoint, GgufFromOtherWriters) {
  const unsigned seed = 1006;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.rope_scaling = {"llama3", 32.0, 1.0, 4.0, 8192};
  c.max_position_embeddings = 131072;
  Checkpoint src;
  src.config = c;
  src.tensors = tiny_tensors(c, rng);
  save_gguf_checkpoint(dir / "g.gguf", src);
  rewrite_like_llama_cpp(dir / "g.gguf", dir / "llamacpp.gguf", "llama");
  LlamaConfig want = c;
  want.bos_token_ids = {1};
  want.eos_token_ids = {};
  const Checkpoint l = load_checkpoint(dir / "llamacpp.gguf");
  expect_config_eq(l.config, want);
  EXPECT_EQ(l.tensors.count("rope_freqs.weight"), 0u);

  LlamaConfig qc = tiny_config();
  qc.attention_bias = true;
  Checkpoint qsrc;
  qsrc.config = qc;
  qsrc.tensors = tiny_tensors(qc, rng);
  save_gguf_checkpoint(dir / "q0.gguf", qsrc);
  rewrite_like_llama_cpp(dir / "q0.gguf", dir / "qwen.gguf", "qwen2");
  const Checkpoint q = load_checkpoint(dir / "qwen.gguf");
  EXPECT_EQ(q.rope_style, RopeStyle::Neox);
  EXPECT_EQ(q.config.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(q.config.attention_bias);
  EXPECT_EQ(q.config.num_key_value_heads, 2);

  // Without its biases a qwen2 file is rejected by name.
  rewrite_like_llama_cpp(dir / "g.gguf", dir / "qwen_nobias.gguf", "qwen2");
  EXPECT_NE(error_of([&] {
              load_checkpoint(dir / "qwen_nobias.gguf");
            }).find("missing tensor model.layers.0.self_attn.q_proj.bias"),
            std::string::npos);
}

TEST(Checkpoint, GgufErrors) {
  TempDir dir("ck");
  const std::string path = dir / "bad.gguf";
  GgufWriter w;
  w.set_string("general.architecture", "gpt2");
  w.write(path);
  std::string e = error_of([&] { load_checkpoint(path); });
  EXPECT_NE(e.find(path + ": general.architecture 'gpt2' is not supported"), std::string::npos) << e;

  GgufWriter m;
  m.set_string("general.architecture", "llama");
  m.set_u32("llama.embedding_length", 32);
  m.write(path);
  e = error_of([&] { load_checkpoint(path); });
  EXPECT_NE(e.find("missing key 'llama.block_count'"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;

  GgufWriter h;  // hostile sizes: refused before anything is built from them
  h.set_string("general.architecture", "llama");
  for (const char* k : {"embedding_length", "feed_forward_length", "attention.head_count", "context_length"})
    h.set_u32(cat("llama.", k), 32);
  h.set_u32("llama.block_count", 1u << 30);
  h.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  h.write(path);
  e = error_of([&] { load_checkpoint(path); });
  EXPECT_NE(e.find(path + ": num_hidden_layers 1073741824 exceeds genperf's limit"), std::string::npos) << e;

  GgufWriter u;
  u.set_string("general.architecture", "llama");
  u.add_tensor("blk.0.attn_q_norm.weight", Tensor::zeros({4}));
  u.write(path);
  EXPECT_NE(error_of([&] { load_checkpoint(path); }).find("blk.0.attn_q_norm.weight has no counterpart"),
            std::string::npos);
}

TEST(Checkpoint, MutatedGgufNeverCrashes) {
  const unsigned seed = 1007;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  Checkpoint src;
  src.config = c;
  src.tensors = tiny_tensors(c, rng);
  save_gguf_checkpoint(dir / "ok.gguf", src);
  const std::string good = genperf::testing::read_bytes(dir / "ok.gguf");
  const size_t header_end = size_t(GgufFile::open(dir / "ok.gguf").data_offset());
  int loaded = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string m = good;
    for (int e = 0; e < 1 + int(rng() % 3); ++e) m[rng() % header_end] = char(rng());
    genperf::testing::write_bytes(dir / "m.gguf", m);
    try {
      load_checkpoint(dir / "m.gguf", false);
      ++loaded;
    } catch (const Error&) {
    }
  }
  std::printf("%d of 1500 mutated checkpoints loaded\n", loaded);
}

// FP8 checkpoints as Hugging Face tools write them: F8_E4M3 / F8_E5M2 weights with per-tensor,
// per-channel or 128 x 128 block scales under "<name>_scale" or "<name>_scale_inv". Each loads
// as genperf's F8_*_B32 with exactly the values code * scale; scale tensors and activation
// scales are consumed.
TEST(Checkpoint, HfFp8WeightsWithScales) {
  const unsigned seed = 1004;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("ck");
  LlamaConfig c = tiny_config();
  c.intermediate_size = 160;  // gate/up [160, 32] and down [32, 160]: two 128-blocks one way
  const auto plain = tiny_tensors(c, rng);
  save_hf_checkpoint(dir / "m", c, plain);  // config.json; the weights are replaced below

  struct Layout {
    std::string suffix;            // "_scale" or "_scale_inv"
    std::vector<int64_t> shape;    // of the scale tensor
    std::function<int64_t(int64_t, int64_t)> index;  // scale index of element (n, k)
  };
  std::vector<std::pair<std::string, Tensor>> out;
  std::map<std::string, std::vector<float>> want;  // dequantized values by weight name
  std::map<std::string, DType> want_type;
  int which = 0;
  for (const auto& [name, w] : plain) {
    if (w.ndim() != 2 || name.find("layers") == std::string::npos) {
      out.emplace_back(name, w);
      continue;
    }
    const int64_t N = w.size(0), K = w.size(1), bk = (K + 127) / 128;
    const Layout layouts[] = {
        {"_scale", {N, 1}, [](int64_t n, int64_t) { return n; }},
        {"_scale", {N}, [](int64_t n, int64_t) { return n; }},
        {"_scale_inv", {1}, [](int64_t, int64_t) { return int64_t(0); }},
        {"_scale_inv", {(N + 127) / 128, bk}, [bk](int64_t n, int64_t k) { return n / 128 * bk + k / 128; }},
    };
    const Layout& L = layouts[which % 4];
    const bool e4m3 = which % 3 != 2;
    ++which;
    Tensor scale = Tensor::zeros(L.shape);
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    for (int64_t i = 0; i < scale.numel(); ++i) scale.data<float>()[i] = u(rng) / (e4m3 ? 448.f : 57344.f);
    if (which % 2) scale = scale.to(DType::BF16).to(DType::F32);  // scales stored as bf16 below
    Tensor codes = Tensor::zeros({N, K}, e4m3 ? DType::F8_E4M3 : DType::F8_E5M2);
    std::vector<float>& v = want[name];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const float s = scale.data<float>()[L.index(n, k)], x = w.data<float>()[n * K + k] / s;
        const uint8_t q = e4m3 ? f32_to_f8_e4m3(x) : f32_to_f8_e5m2(x);
        codes.data<uint8_t>()[n * K + k] = q;
        v.push_back(s * (e4m3 ? f8_e4m3_to_f32(q) : f8_e5m2_to_f32(q)));
      }
    want_type[name] = e4m3 ? DType::F8_E4M3_B32 : DType::F8_E5M2_B32;
    out.emplace_back(name, codes);
    out.emplace_back(name + L.suffix, which % 2 ? scale.to(DType::BF16) : scale);
    if (which % 2) out.emplace_back(name.substr(0, name.size() - 7) + ".input_scale", Tensor::zeros({1}));
  }
  ASSERT_GE(which, 8);
  write_safetensors(dir / "m/model.safetensors", out);
  const Checkpoint ck = load_checkpoint(dir / "m", false);
  for (const auto& [name, v] : want) {
    SCOPED_TRACE(name);
    const Tensor& t = ck.tensors.at(name);
    EXPECT_EQ(t.dtype(), want_type[name]);
    const Tensor f = t.to(DType::F32);
    ASSERT_EQ(f.numel(), int64_t(v.size()));
    EXPECT_EQ(std::memcmp(f.data<float>(), v.data(), v.size() * 4), 0);
  }
  for (const auto& [name, t] : ck.tensors) {
    EXPECT_FALSE(name.ends_with("_scale") || name.ends_with("_scale_inv")) << name;
    EXPECT_FALSE(name.ends_with("input_scale")) << name;
  }

  // Errors name the file and the tensor.
  auto without = [&](const std::string& drop, const std::pair<std::string, Tensor>* add = nullptr) {
    std::vector<std::pair<std::string, Tensor>> o;
    for (const auto& e : out)
      if (e.first != drop) o.push_back(e);
    if (add) o.push_back(*add);
    write_safetensors(dir / "m/model.safetensors", o);
    return error_of([&] { load_checkpoint(dir / "m", false); });
  };
  const std::string q0 = "model.layers.0.self_attn.q_proj.weight";
  std::string scale_name;
  for (const auto& e : out)
    if (e.first.starts_with(q0 + "_scale")) scale_name = e.first;
  ASSERT_FALSE(scale_name.empty());
  std::string e = without(scale_name);
  EXPECT_NE(e.find("model.safetensors: FP8 tensor " + q0), std::string::npos) << e;
  EXPECT_NE(e.find("no " + q0 + "_scale or " + q0 + "_scale_inv"), std::string::npos) << e;
  const std::pair<std::string, Tensor> bad{scale_name, Tensor::zeros({3})};
  e = without(scale_name, &bad);
  EXPECT_NE(e.find("scale tensor " + scale_name), std::string::npos) << e;
  EXPECT_NE(e.find("fits none of the FP8 layouts"), std::string::npos) << e;
}

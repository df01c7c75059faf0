// The Llama forward pass against an independent NumPy reference (tests/models/llama_ref.py, in
// float64) on random checkpoints written with genperf's own HF writer, and HF vs GGUF loading.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/test_util.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "io/safetensors.h"
#include "core/codec.h"

using namespace genperf;
using genperf::testing::join_ids;
using genperf::testing::TempDir;

namespace {

struct Variant {
  const char* name;
  int64_t heads, kv_heads;
  bool tied, bias;
  double theta;
  bool llama3;
  DType dtype;
  const char* arch;
};

LlamaConfig tiny_config(const Variant& v) {
  LlamaConfig c;
  c.architecture = v.arch;
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 112;
  c.num_hidden_layers = 2;
  c.num_attention_heads = v.heads;
  c.num_key_value_heads = v.kv_heads;
  c.head_dim = 64 / v.heads;
  c.max_position_embeddings = 128;
  c.rope_theta = v.theta;
  c.tie_word_embeddings = v.tied;
  c.attention_bias = v.bias;
  if (v.llama3) {
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 8;
    c.rope_scaling.low_freq_factor = 1;
    c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = 16;  // small, so every branch is used
  }
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

std::vector<int32_t> test_ids(uint64_t seed, int n, int vocab) {
  Rng r(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t(r.next() % uint64_t(vocab)));
  return ids;
}

std::string ref_script() { return std::string(GENPERF_TEST_DIR) + "/models/llama_ref.py"; }

std::vector<float> reference_logits(const std::string& dir, const std::vector<int32_t>& ids, const TempDir& tmp,
                                    const char* kv = "f32") {
  const std::string out = tmp / "ref_logits.bin";
  const std::string cmd = std::string(GENPERF_PYTHON) + " " + ref_script() + " --model " + dir +
                          " --ids " + join_ids(ids) + " --logits " + out + " --kv " + kv;
  EXPECT_EQ(genperf::testing::run_command(cmd), 0)
      << cmd << "\n(needs python3-numpy for /usr/bin/python3: run scripts/deps.sh)";
  return genperf::testing::read_floats(out);
}

// Max over rows of |a - b| / max|b| per row: a relative error that is not fooled by tiny logits.
double max_row_rel_error(const float* a, const float* b, int64_t rows, int64_t cols) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double diff = 0, scale = 0;
    for (int64_t c = 0; c < cols; ++c) {
      diff = std::max(diff, double(std::fabs(a[r * cols + c] - b[r * cols + c])));
      scale = std::max(scale, double(std::fabs(b[r * cols + c])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

class LlamaVsNumpy : public ::testing::TestWithParam<Variant> {};

TEST_P(LlamaVsNumpy, LogitsAndGreedy) {
  const Variant v = GetParam();
  const uint64_t seed = 20261202;
  std::printf("variant %s, seed %llu\n", v.name, (unsigned long long)seed);
  const LlamaConfig c = tiny_config(v);
  TempDir tmp("llama");
  const std::string dir = tmp / "model";
  {
    Checkpoint ck = random_checkpoint(c, v.dtype, seed);
    save_hf_checkpoint(dir, c, ck.tensors);
  }
  LlamaModel m(load_checkpoint(dir, false));
  const auto ids = test_ids(seed, 23, int(c.vocab_size));

  // All-position logits from one batched prefill.
  Session s(m, 64);
  Tensor logits = m.forward(s, ids, LogitsFor::All);
  const auto ref = reference_logits(dir, ids, tmp);
  ASSERT_EQ(ref.size(), size_t(logits.numel()));
  const double tol = v.dtype == DType::F32 ? 1e-4 : 2e-2;  // bf16: weights are exact, activations in f32
  EXPECT_LT(max_row_rel_error(logits.data<float>(), ref.data(), logits.size(0), logits.size(1)), tol);

  // Prefill in pieces then token-by-token decode gives the same logits as one batched call.
  Session s2(m, 64);
  m.forward(s2, std::span(ids).first(10));
  for (size_t i = 10; i < ids.size(); ++i) {
    Tensor l = m.forward(s2, std::span(ids).subspan(i, 1));
    const float* want = logits.data<float>() + int64_t(i) * c.vocab_size;
    // f32: the same arithmetic up to summation order. bf16/f16: prefill may round activations to
    // the weight type for the GEMM (as PyTorch does), decode keeps them in f32.
    EXPECT_LT(max_row_rel_error(l.data<float>(), want, 1, c.vocab_size), v.dtype == DType::F32 ? 1e-5 : tol)
        << "position " << i;
  }

  // Greedy generation of 32 tokens matches the reference token for token.
  if (v.dtype == DType::F32) {
    std::vector<int32_t> prompt(ids.begin(), ids.begin() + 5);
    Session g(m, 64);
    Tensor l = m.forward(g, prompt);
    std::vector<int32_t> got;
    Sampler greedy({0.f, 0, 1.f, 0});
    for (int i = 0; i < 32; ++i) {
      const int32_t id = greedy.sample({l.data<float>(), size_t(c.vocab_size)});
      got.push_back(id);
      l = m.forward(g, std::span<const int32_t>(&id, 1));
    }
    std::string out;
    const std::string cmd = std::string(GENPERF_PYTHON) + " " + ref_script() + " --model " + dir +
                            " --ids " + join_ids(prompt) + " --greedy 32";
    ASSERT_EQ(genperf::testing::run_command(cmd, &out), 0) << cmd;
    std::istringstream in(out);
    std::vector<int32_t> want;
    for (int32_t x; in >> x;) want.push_back(x);
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LlamaVsNumpy,
    ::testing::Values(Variant{"mha_untied_f32", 4, 4, false, false, 10000, false, DType::F32, "LlamaForCausalLM"},
                      Variant{"gqa_tied_f32", 8, 2, true, false, 500000, false, DType::F32, "LlamaForCausalLM"},
                      Variant{"gqa_llama3_f32", 4, 2, false, false, 500000, true, DType::F32, "LlamaForCausalLM"},
                      Variant{"qwen2_bias_f32", 4, 2, true, true, 1000000, false, DType::F32, "Qwen2ForCausalLM"},
                      Variant{"mistral_bf16", 4, 1, false, false, 10000, false, DType::BF16, "MistralForCausalLM"},
                      Variant{"gqa_f16", 4, 2, false, false, 10000, false, DType::F16, "LlamaForCausalLM"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Llama, GgufGivesSameLogitsAsHf) {
  const uint64_t seed = 7;
  std::printf("seed %llu\n", (unsigned long long)seed);
  Variant v{"gguf", 4, 2, false, false, 10000, false, DType::F32, "LlamaForCausalLM"};
  const LlamaConfig c = tiny_config(v);
  TempDir tmp("gguf");
  {
    Checkpoint ck = random_checkpoint(c, DType::F32, seed);
    save_hf_checkpoint(tmp / "hf", c, ck.tensors);
  }
  Checkpoint hf = load_checkpoint(tmp / "hf", false);
  save_gguf_checkpoint(tmp / "m.gguf", hf);
  LlamaModel a(std::move(hf));
  LlamaModel b(load_checkpoint(tmp / "m.gguf", false));
  EXPECT_EQ(b.rope_style(), RopeStyle::Interleaved);
  const auto ids = test_ids(seed, 17, int(c.vocab_size));
  Session sa(a, 32), sb(b, 32);
  Tensor la = a.forward(sa, ids, LogitsFor::All), lb = b.forward(sb, ids, LogitsFor::All);
  EXPECT_LT(max_row_rel_error(lb.data<float>(), la.data<float>(), la.size(0), la.size(1)), 1e-5);
}

// A Hugging Face FP8 checkpoint (per-channel E4M3 codes with weight_scale, as compressed-tensors
// writes them) gives the logits of the f32 checkpoint holding the values it encodes: loading folds
// the scales into FP8 blocks and the model runs them on the FP8 kernels.
TEST(Llama, HfFp8GivesTheLogitsOfItsValues) {
  const uint64_t seed = 8;
  std::printf("seed %llu\n", (unsigned long long)seed);
  Variant v{"fp8", 4, 2, false, false, 10000, false, DType::F32, "LlamaForCausalLM"};
  LlamaConfig c = tiny_config(v);
  c.intermediate_size = 128;  // rows of whole 32-blocks for down_proj
  TempDir tmp("fp8");
  Checkpoint src = random_checkpoint(c, DType::F32, seed);
  std::map<std::string, Tensor> values;                        // what the FP8 checkpoint encodes
  std::vector<std::pair<std::string, Tensor>> fp8;             // the FP8 checkpoint's tensors
  int quantized = 0;
  for (const auto& [name, t] : src.tensors) {
    if (t.ndim() != 2 || name.find("layers.") == std::string::npos) {
      values[name] = t;
      fp8.emplace_back(name, t);
      continue;
    }
    const int64_t N = t.size(0), K = t.size(1);
    Tensor codes = Tensor::zeros({N, K}, DType::F8_E4M3), scale = Tensor::zeros({N, 1});
    codec::quantize_f8_per_channel(DType::F8_E4M3, t.data<float>(), N, K, codes.data<uint8_t>(),
                                   scale.data<float>(), nullptr);
    Tensor deq = Tensor::zeros({N, K});
    codec::dequantize_f8_per_channel(DType::F8_E4M3, codes.data<uint8_t>(), scale.data<float>(), N, K,
                                     deq.data<float>());
    values[name] = deq;
    fp8.emplace_back(name, codes);
    fp8.emplace_back(name + "_scale", scale);
    ++quantized;
  }
  ASSERT_EQ(quantized, 7 * c.num_hidden_layers);
  save_hf_checkpoint(tmp / "ref", c, values);
  save_hf_checkpoint(tmp / "fp8", c, values);  // config.json; the weights are replaced
  write_safetensors(tmp / "fp8/model.safetensors", fp8);
  LlamaModel a(load_checkpoint(tmp / "ref", false));
  LlamaModel b(load_checkpoint(tmp / "fp8", false));
  // A prompt short enough for the GEMV path (past 12 rows FP8 prefill multiplies bf16 panels by
  // x rounded to bf16, where the f32 reference does not; tests/ops/test_linear.cpp checks it).
  const auto ids = test_ids(seed, 11, int(c.vocab_size));
  Session sa(a, 32), sb(b, 32);
  Tensor la = a.forward(sa, ids, LogitsFor::All), lb = b.forward(sb, ids, LogitsFor::All);
  EXPECT_LT(max_row_rel_error(lb.data<float>(), la.data<float>(), la.size(0), la.size(1)), 1e-5);
  // Decode steps: the same logits as the reference's.
  for (int32_t id : {3, 5}) {
    const std::vector<int32_t> one = {id};
    Tensor da = a.forward(sa, one, LogitsFor::All), db = b.forward(sb, one, LogitsFor::All);
    EXPECT_LT(max_row_rel_error(db.data<float>(), da.data<float>(), 1, da.size(1)), 1e-5);
  }
}

// A KV cache of f16 or bf16 (half the bytes), or Q8_0 (head dimension 32 here): the logits
// match the NumPy reference whose keys and values are rounded or quantized the same way, more
// closely than the unrounded reference's; a prefill in pieces plus decode steps matches one
// batched prefill (both read the same cache, but a key the GEMV and the GEMM compute an f32 ulp
// apart may round to neighbouring values).
TEST(Llama, HalfKvCacheMatchesNumpy) {
  const uint64_t seed = 9;
  std::printf("seed %llu\n", (unsigned long long)seed);
  struct Case {
    int64_t heads, kv_heads;
    DType kv;
    double tol;  // decode steps against the batched prefill
  };
  for (const Case& k : {Case{4, 2, DType::F16, 1e-4}, Case{4, 2, DType::BF16, 1e-4}, Case{2, 1, DType::Q8_0, 1e-3}}) {
    const char* name = dtype_name(k.kv);
    SCOPED_TRACE(name);
    Variant v{"kv", k.heads, k.kv_heads, false, false, 10000, false, DType::F32, "LlamaForCausalLM"};
    const LlamaConfig c = tiny_config(v);
    TempDir tmp("kv");
    const std::string dir = tmp / "model";
    {
      Checkpoint ck = random_checkpoint(c, DType::F32, seed);
      save_hf_checkpoint(dir, c, ck.tensors);
    }
    LlamaModel m(load_checkpoint(dir, false));
    const auto ids = test_ids(seed, 23, int(c.vocab_size));
    const auto exact = reference_logits(dir, ids, tmp);
    Session s32(m, 64), s(m, 64, k.kv);
    EXPECT_EQ(s.kv_bytes(), bytes_for(k.kv, s32.kv_bytes() / 4));
    Tensor logits = m.forward(s, ids, LogitsFor::All);
    const auto rounded = reference_logits(dir, ids, tmp, name);
    const int64_t T = logits.size(0), V = logits.size(1);
    const double err = max_row_rel_error(logits.data<float>(), rounded.data(), T, V),
                 err_exact = max_row_rel_error(logits.data<float>(), exact.data(), T, V);
    std::printf("kv %s: max row error against the rounded reference %.2e, the exact one %.2e\n", name,
                err, err_exact);
    EXPECT_LT(err, 1e-4);
    EXPECT_LT(err * 4, err_exact);  // the rounding is there, and it is the reference's
    Session s2(m, 64, k.kv);
    m.forward(s2, std::span(ids).first(10));
    for (size_t i = 10; i < ids.size(); ++i) {
      Tensor l = m.forward(s2, std::span(ids).subspan(i, 1));
      EXPECT_LT(max_row_rel_error(l.data<float>(), logits.data<float>() + int64_t(i) * V, 1, V), k.tol)
          << "position " << i;
    }
    if (c.head_dim % 32) {
      EXPECT_THROW(Session(m, 8, DType::Q8_0), Error);
    }
  }
}

TEST(Llama, ContextAndShapeErrors) {
  Variant v{"err", 4, 2, false, false, 10000, false, DType::F32, "LlamaForCausalLM"};
  const LlamaConfig c = tiny_config(v);
  Checkpoint ck = random_checkpoint(c, DType::F32, 3);
  LlamaModel m(std::move(ck));
  EXPECT_THROW(Session(m, c.max_position_embeddings + 1), Error);
  Session s(m, 4);
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  EXPECT_THROW(m.forward(s, ids), Error);
  std::vector<int32_t> bad = {int32_t(c.vocab_size)};
  EXPECT_THROW(m.forward(s, bad), Error);
  Checkpoint ck2 = random_checkpoint(c, DType::F32, 3);
  ck2.tensors["model.layers.1.mlp.up_proj.weight"] = Tensor::zeros({3, 3});
  try {
    LlamaModel bad_model(std::move(ck2));
    FAIL() << "shape mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("up_proj"), std::string::npos) << e.what();
  }
}

}  // namespace

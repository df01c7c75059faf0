// The Llama family's side of the model-family seam (genperf/model_family.h): its quantizable
// tensors in forward order with their roles, the tied head, and an architecture no family owns.
#include <gtest/gtest.h>

#include <string>

#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/model_family.h"

namespace genperf {
namespace {

TEST(ModelFamily, LlamaRolesInForwardOrder) {
  LlamaConfig c = preset_config("tiny");
  const Checkpoint ck = random_checkpoint(c, DType::F32, 1);
  const ModelFamily& f = family_of(ck);
  EXPECT_STREQ(f.name(), "llama");
  const auto roles = f.quantizable(ck);
  ASSERT_EQ(roles.size(), size_t(2 + 7 * c.num_hidden_layers));
  EXPECT_EQ(roles.front().kind, "embed");
  EXPECT_TRUE(roles.front().lookup);
  EXPECT_FALSE(roles.front().output);
  EXPECT_EQ(roles.back().kind, "head");
  EXPECT_TRUE(roles.back().output);
  const char* kinds[] = {"q", "k", "v", "o", "gate", "up", "down"};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    for (int j = 0; j < 7; ++j) {
      const TensorRole& r = roles[size_t(1 + 7 * i + j)];
      EXPECT_EQ(r.layer, i);
      EXPECT_EQ(r.kind, kinds[j]) << r.name;
      EXPECT_EQ(f.role_of(r.name)->kind, r.kind);
      EXPECT_TRUE(ck.tensors.count(r.name)) << r.name;
    }
  EXPECT_FALSE(f.role_of("model.norm.weight"));
  EXPECT_FALSE(f.role_of("model.layers.0.input_layernorm.weight"));
  EXPECT_FALSE(f.role_of("model.layers.x.self_attn.q_proj.weight"));
}

TEST(ModelFamily, TiedEmbeddingIsTheOutput) {
  LlamaConfig c = preset_config("tiny");
  c.tie_word_embeddings = true;
  const Checkpoint ck = random_checkpoint(c, DType::F32, 1);
  const auto roles = family_of(ck).quantizable(ck);
  EXPECT_EQ(roles.back().kind, "down");  // no separate head
  EXPECT_TRUE(roles.front().output);
  EXPECT_FALSE(roles.front().lookup);    // multiplied by the head's input: it has statistics
}

TEST(ModelFamily, UnknownArchitectureIsNamed) {
  Checkpoint ck = random_checkpoint(preset_config("tiny"), DType::F32, 1);
  ck.config.architecture = "GPT2LMHeadModel";
  ck.source = "some/dir";
  try {
    family_of(ck);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("some/dir: architecture GPT2LMHeadModel belongs to no model family"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace genperf

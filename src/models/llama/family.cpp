// The Llama family's side of the model-family seam (genperf/model_family.h): its quantizable
// matrices and their roles by Hugging Face name, and the rotary layout of GGUF files. Llama's
// tensor names stay under src/models/llama.
#include <cstring>

#include "genperf/error.h"
#include "models/llama/family.h"
#include "models/llama/names.h"

namespace genperf {
namespace {

// Per-layer matrices in forward order, with their short kinds.
using llama::kEmbed;
using llama::kHead;
constexpr std::pair<const char*, const char*> kLayerMatrices[] = {
    {llama::kQ, "q"},    {llama::kK, "k"},   {llama::kV, "v"},      {llama::kO, "o"},
    {llama::kGate, "gate"}, {llama::kUp, "up"}, {llama::kDown, "down"}};

// "model.layers.<i>.<rest>" -> i and rest; -1 when the name has another form.
int64_t layer_of(const std::string& name, std::string* rest) {
  static const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  size_t i = prefix.size();
  int64_t layer = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - prefix.size() < 9)
    layer = layer * 10 + (name[i++] - '0');
  if (i == prefix.size() || i >= name.size() || name[i] != '.') return -1;
  *rest = name.substr(i + 1);
  return layer;
}

// GGUF `llama` keeps q/k rows in interleaved rotary pairs; HF in halves: HF row p*(D/2)+j of a
// head is GGUF row j*2+p. Rows are whole quantized rows, so this is exact for any format.
Tensor rotary_rows_to_hf(const Tensor& t, int64_t heads, int64_t head_dim) {
  const Tensor src = t.is_contiguous() ? t : t.clone();
  GP_CHECK(src.size(0) == heads * head_dim, "[llama] ", src.describe(), ": expected ", heads * head_dim, " rows");
  const size_t row_bytes = src.nbytes() / size_t(src.size(0));
  Tensor dst = Tensor::zeros(src.shape(), src.dtype());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t p = 0; p < 2; ++p)
        std::memcpy(dst.data<char>() + size_t(h * head_dim + p * half + j) * row_bytes,
                    src.data<char>() + size_t(h * head_dim + j * 2 + p) * row_bytes, row_bytes);
  return dst;
}

class LlamaFamily final : public ModelFamily {
 public:
  const char* name() const override { return "llama"; }

  bool owns_architecture(const std::string& a) const override {
    return a == "LlamaForCausalLM" || a == "MistralForCausalLM" || a == "Qwen2ForCausalLM";
  }

  void read_hf_config(Checkpoint& ck, const Json& j, const std::string& path) const override {
    ck.config = llama::config_from_json(j, path);
    ck.architecture = ck.config.architecture;
    ck.config_json = j;
  }

  void adopt_hf_tensors(Checkpoint& ck, const std::map<std::string, std::string>& origin) const override {
    llama::check_checkpoint_tensors(ck.config, ck.tensors, origin, ck.source);
  }

  bool has_gguf() const override { return true; }

  void save_hf(const std::string& dir, const Checkpoint& ck, const std::map<std::string, Tensor>& tensors,
               const std::vector<std::string>& extra_files) const override {
    save_hf_checkpoint(dir, ck.config, tensors, extra_files);
  }

  std::optional<TensorRole> role_of(const std::string& name) const override {
    if (name == kEmbed) return TensorRole{name, -1, "embed", false, true};
    if (name == kHead) return TensorRole{name, -1, "head", true, false};
    std::string rest;
    const int64_t layer = layer_of(name, &rest);
    if (layer < 0) return std::nullopt;
    for (const auto& [m, kind] : kLayerMatrices)
      if (rest == m) return TensorRole{name, int(layer), kind, false, false};
    return std::nullopt;
  }

  std::vector<TensorRole> quantizable(const Checkpoint& ck) const override {
    std::vector<TensorRole> roles;
    auto add = [&](const std::string& n) {
      const auto it = ck.tensors.find(n);
      if (it == ck.tensors.end() || !it->second.defined() || it->second.ndim() != 2) return;
      TensorRole r = *role_of(n);
      if (n == kEmbed && ck.config.tie_word_embeddings) r.output = true, r.lookup = false;
      roles.push_back(std::move(r));
    };
    add(kEmbed);
    for (int64_t i = 0; i < ck.config.num_hidden_layers; ++i)
      for (const auto& [m, kind] : kLayerMatrices) add(llama::layer_tensor(i, m));
    add(kHead);
    return roles;
  }

  std::map<std::string, Tensor> hf_tensors(const Checkpoint& ck) const override {
    std::map<std::string, Tensor> tensors = ck.tensors;
    if (ck.rope_style != RopeStyle::Interleaved) return tensors;
    const auto& c = ck.config;  // from a GGUF `llama` file: back to HF's halves
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      for (const char* kind : {"q_proj", "k_proj"}) {
        const int64_t heads = kind[0] == 'q' ? c.num_attention_heads : c.num_key_value_heads;
        for (const char* part : {".weight", ".bias"}) {
          const auto it = tensors.find(cat("model.layers.", i, ".self_attn.", kind, part));
          if (it == tensors.end()) continue;
          Tensor t = it->second.ndim() == 1 ? it->second.view({it->second.size(0), 1}) : it->second;
          t = rotary_rows_to_hf(t, heads, c.head_dim);
          it->second = it->second.ndim() == 1 ? t.view({t.size(0)}) : t;
        }
      }
    }
    return tensors;
  }
};

}  // namespace

const ModelFamily& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace genperf

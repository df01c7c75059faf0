// Checkpoints: Hugging Face directories (config.json + safetensors, optionally sharded) and GGUF
// files, both loaded into one naming scheme (Hugging Face tensor names) with every expected
// tensor checked by name and shape before the model sees it.
#include "genperf/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "io/gguf.h"
#include "io/mmap_file.h"
#include "io/safetensors.h"
#include "core/codec.h"
#include "genperf/model_family.h"
#include "models/llama/family.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;

struct ArchName {
  const char* hf;
  const char* model_type;
};
constexpr ArchName kArchitectures[] = {
    {"LlamaForCausalLM", "llama"}, {"MistralForCausalLM", "mistral"}, {"Qwen2ForCausalLM", "qwen2"}};

const ArchName* find_architecture(std::string_view hf) {
  for (const auto& a : kArchitectures)
    if (hf == a.hf) return &a;
  return nullptr;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += cat(i ? ", " : "", s[i]);
  return t + "]";
}

// ---------- config.json ----------

// Typed access to config.json fields; a missing or null optional field takes its default.
class ConfigReader {
 public:
  ConfigReader(const Json& j, const std::string& path) : j_(j), path_(path) {}

  template <typename... Args>
  [[noreturn]] void error(Args&&... what) const {
    fail("[config] ", path_, ": ", std::forward<Args>(what)...);
  }

  const Json* get(std::string_view key) const {
    const Json* v = j_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }

  int64_t integer(std::string_view key) const {
    const Json* v = get(key);
    if (!v) error("missing field '", key, "'");
    return to_int(key, *v);
  }
  int64_t integer(std::string_view key, int64_t fallback) const {
    const Json* v = get(key);
    return v ? to_int(key, *v) : fallback;
  }
  double number(std::string_view key, double fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number()) error("field '", key, "' is a ", v->type_name(), ", expected a number");
    return v->as_number();
  }
  bool boolean(std::string_view key, bool fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_bool()) error("field '", key, "' is a ", v->type_name(), ", expected true or false");
    return v->as_bool();
  }
  std::string string(std::string_view key, const std::string& fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string()) error("field '", key, "' is a ", v->type_name(), ", expected a string");
    return v->as_string();
  }
  // An id, a list of ids, or null.
  std::vector<int32_t> token_ids(std::string_view key) const {
    const Json* v = get(key);
    std::vector<int32_t> ids;
    if (!v) return ids;
    if (v->is_array()) {
      for (const Json& x : v->as_array()) ids.push_back(to_id(key, x));
    } else {
      ids.push_back(to_id(key, *v));
    }
    return ids;
  }

  std::string architecture() const {
    if (const Json* a = get("architectures")) {
      if (!a->is_array() || a->as_array().empty() || !a->as_array()[0].is_string())
        error("field 'architectures' is not a non-empty list of names");
      const std::string& name = a->as_array()[0].as_string();
      if (!find_architecture(name))
        error("unknown architecture '", name,
              "' (expected LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM)");
      return name;
    }
    const std::string type = string("model_type", "");
    for (const auto& a : kArchitectures)
      if (type == a.model_type) return a.hf;
    error("unknown architecture: no 'architectures' field and model_type '", type, "'");
  }

  RopeScaling rope_scaling(const Json* s) const {
    RopeScaling r;
    if (!s || s->is_null()) return r;
    if (!s->is_object()) error("field 'rope_scaling' is a ", s->type_name(), ", expected an object or null");
    ConfigReader sub(*s, path_);
    r.type = sub.string("rope_type", sub.string("type", ""));
    if (r.type == "default") r.type.clear();  // "default" means no scaling
    r.factor = sub.number("factor", r.factor);
    r.low_freq_factor = sub.number("low_freq_factor", r.low_freq_factor);
    r.high_freq_factor = sub.number("high_freq_factor", r.high_freq_factor);
    r.original_max_position_embeddings =
        sub.integer("original_max_position_embeddings", r.original_max_position_embeddings);
    return r;
  }

 private:
  int64_t to_int(std::string_view key, const Json& v) const {
    if (!v.is_number()) error("field '", key, "' is a ", v.type_name(), ", expected an integer");
    const double d = v.as_number();
    if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0)
      error("field '", key, "' is ", v.dump(), ", expected an integer");
    return int64_t(d);
  }
  int32_t to_id(std::string_view key, const Json& v) const {
    const int64_t id = to_int(key, v);
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      error("field '", key, "' has invalid token id ", id);
    return int32_t(id);
  }

  const Json& j_;
  const std::string& path_;
};

// Sizes far beyond any real model. Bounding them keeps every product of sizes (tensor shapes,
// parameter counts) clear of int64 overflow and the list of expected tensors short, whatever a
// hostile file claims.
void check_limits(const LlamaConfig& c, const std::string& src) {
  struct Limit {
    const char* name;
    int64_t value, max;
  };
  const Limit limits[] = {
      {"vocab_size", c.vocab_size, int64_t(1) << 31},
      {"hidden_size", c.hidden_size, int64_t(1) << 16},
      {"intermediate_size", c.intermediate_size, int64_t(1) << 20},
      {"num_hidden_layers", c.num_hidden_layers, int64_t(1) << 12},
      {"num_attention_heads", c.num_attention_heads, int64_t(1) << 12},
      {"num_key_value_heads", c.num_key_value_heads, int64_t(1) << 12},
      {"head_dim", c.head_dim, int64_t(1) << 12},
      {"max_position_embeddings", c.max_position_embeddings, int64_t(1) << 31},
  };
  for (const Limit& l : limits)
    GP_CHECK(l.value <= l.max, "[config] ", src, ": ", l.name, " ", l.value, " exceeds genperf's limit of ",
             l.max);
}

// Both checks a config gets before anything is built from it.
void check_config(const LlamaConfig& c, const std::string& src) {
  check_limits(c, src);
  c.validate(src);
}

Json token_ids_json(const std::vector<int32_t>& ids) {
  if (ids.empty()) return Json(nullptr);
  if (ids.size() == 1) return Json(int64_t(ids[0]));
  Json a = Json::Array{};
  for (int32_t id : ids) a.push_back(Json(int64_t(id)));
  return a;
}

// ---------- expected tensors ----------

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor a Llama-family model needs, in a canonical order (lm_head only when untied).
std::vector<Expected> expected_tensors(const LlamaConfig& c) {
  const int64_t V = c.vocab_size, d = c.hidden_size, F = c.intermediate_size;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  std::vector<Expected> e = {{"model.embed_tokens.weight", {V, d}}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = cat("model.layers.", i, ".");
    e.push_back({p + "input_layernorm.weight", {d}});
    e.push_back({p + "self_attn.q_proj.weight", {q, d}});
    e.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    e.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    if (c.attention_bias) {
      e.push_back({p + "self_attn.q_proj.bias", {q}});
      e.push_back({p + "self_attn.k_proj.bias", {kv}});
      e.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    e.push_back({p + "self_attn.o_proj.weight", {d, q}});
    e.push_back({p + "post_attention_layernorm.weight", {d}});
    e.push_back({p + "mlp.gate_proj.weight", {F, d}});
    e.push_back({p + "mlp.up_proj.weight", {F, d}});
    e.push_back({p + "mlp.down_proj.weight", {d, F}});
  }
  e.push_back({"model.norm.weight", {d}});
  if (!c.tie_word_embeddings) e.push_back({"lm_head.weight", {V, d}});
  return e;
}

// Checks names, shapes and types; `origin` maps a tensor to the file it came from.
void check_tensors(const LlamaConfig& c, const std::map<std::string, Tensor>& tensors,
                   const std::map<std::string, std::string>& origin, const std::string& source) {
  auto file_of = [&](const std::string& name) {
    const auto it = origin.find(name);
    return it == origin.end() ? source : it->second;
  };
  for (const Expected& e : expected_tensors(c)) {
    const auto it = tensors.find(e.name);
    if (it == tensors.end())
      fail("[checkpoint] ", source, ": missing tensor ", e.name, " (expected shape ", shape_text(e.shape),
           ")");
    const Tensor& t = it->second;
    GP_CHECK(t.shape() == e.shape, "[checkpoint] ", file_of(e.name), ": tensor ", e.name, " has shape ",
             shape_text(t.shape()), ", expected ", shape_text(e.shape));
    // Matrices may be quantized (any block format, or FP8 with per-block scales); norms and
    // biases, and plain FP8 (which needs a scale tensor), stay float.
    const DType dt = t.dtype();
    const bool block_format = !traits(dt).is_float && traits(dt).block_size > 1;
    GP_CHECK(traits(dt).is_float || (block_format && e.shape.size() == 2), "[checkpoint] ", file_of(e.name),
             ": tensor ", e.name, " has type ", dtype_name(dt), ", expected a float type",
             e.shape.size() == 2 ? " or a block-quantized format" : "");
  }
}

// ---------- Hugging Face directories ----------

// FP8 checkpoints as Hugging Face tools write them (compressed-tensors, fbgemm_fp8, ModelOpt,
// the block-wise "fp8" of DeepSeek-V3 and Qwen3): a weight of dtype F8_E4M3 or F8_E5M2 [N, K]
// with its scales, x = code * scale, in "<name>_scale" (per tensor: one value; per channel: [N]
// or [N, 1]) or "<name>_scale_inv" (those, or blocks of 128 x 128: [ceil(N/128), ceil(K/128)]).
// Each weight becomes genperf's F8_*_B32, every 32 codes with the f32 scale that covers them:
// the same values (an exact re-encoding), at 9 instead of 8 bits per weight, which the kernels
// run directly. The scale tensors are consumed; activation scales ("input_scale") are dropped:
// genperf keeps activations in f32.
void fold_fp8_scales(std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& origin,
                     const std::string& source) {
  auto file_of = [&](const std::string& name) {
    const auto it = origin.find(name);
    return it == origin.end() ? source : it->second;
  };
  std::vector<std::string> consumed;
  for (auto& [name, w] : tensors) {
    const DType dt = w.dtype();
    if (dt != DType::F8_E4M3 && dt != DType::F8_E5M2) continue;
    if (name.ends_with("_scale") || name.ends_with("_scale_inv")) continue;  // a scale kept in FP8
    const std::string where = "[checkpoint] " + file_of(name) + ": FP8 tensor " + name + " " + w.describe();
    GP_CHECK(w.ndim() == 2, where, ": only matrices may be FP8");
    const int64_t N = w.size(0), K = w.size(1);
    GP_CHECK(K % codec::kF8Block == 0, where, ": its rows of ", K, " are not a multiple of ", codec::kF8Block,
             ", the block genperf runs FP8 in");
    std::string sname = name + "_scale";
    if (!tensors.count(sname)) sname = name + "_scale_inv";
    const auto it = tensors.find(sname);
    GP_CHECK(it != tensors.end(), where, ": no ", name, "_scale or ", name, "_scale_inv tensor to scale it");
    const Tensor& st = it->second;
    GP_CHECK(traits(st.dtype()).is_float && traits(st.dtype()).block_size == 1,
             "[checkpoint] ", file_of(sname), ": scale tensor ", sname, " ", st.describe(), " is not a float tensor");
    const Tensor sf = st.to(DType::F32);
    const float* sc = sf.data<float>();
    // The scale of row n, column block b (of 32): per tensor, per channel, or per 128 x 128.
    enum class By { kTensor, kChannel, kTile } by;
    const int64_t bn = (N + 127) / 128, bk = (K + 127) / 128;
    if (sf.numel() == 1)
      by = By::kTensor;
    else if (sf.numel() == N && (sf.ndim() == 1 || (sf.ndim() == 2 && sf.size(1) == 1)))
      by = By::kChannel;
    else if (sf.ndim() == 2 && sf.size(0) == bn && sf.size(1) == bk)
      by = By::kTile;
    else
      fail("[checkpoint] ", file_of(sname), ": scale tensor ", sname, " ", sf.describe(), " fits none of the FP8 ",
           "layouts for ", name, " [", N, ", ", K, "]: one value, [", N, "] or [", N, ", 1] per channel, or [", bn,
           ", ", bk, "] per block of 128 x 128");
    const DType bt = dt == DType::F8_E4M3 ? DType::F8_E4M3_B32 : DType::F8_E5M2_B32;
    Tensor out = Tensor::zeros({N, K}, bt);
    for (int64_t n = 0; n < N; ++n) {
      const uint8_t* q = w.data<uint8_t>() + n * K;  // as read: contiguous
      auto* blocks = reinterpret_cast<codec::BlockF8*>(out.data<uint8_t>() + size_t(n) * out.stride(0));
      for (int64_t b = 0; b < K / codec::kF8Block; ++b) {
        blocks[b].d = by == By::kTensor ? sc[0]
                      : by == By::kChannel ? sc[n]
                                           : sc[n / 128 * bk + b * codec::kF8Block / 128];
        std::memcpy(blocks[b].qs, q + b * codec::kF8Block, codec::kF8Block);
      }
    }
    w = std::move(out);
    consumed.push_back(sname);
    const std::string stem = name.substr(0, name.size() - (name.ends_with(".weight") ? 7 : 0));
    consumed.push_back(stem + ".input_scale");
  }
  for (const std::string& n : consumed) tensors.erase(n);
}

bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\0') == std::string::npos;
}

void load_shards(const std::string& dir, const std::string& index_path,
                 std::map<std::string, Tensor>& tensors, std::map<std::string, std::string>& origin) {
  const Json index = Json::parse_file(index_path);
  const Json* map = index.find("weight_map");
  GP_CHECK(map && map->is_object(), "[checkpoint] ", index_path, ": no 'weight_map' object");
  std::map<std::string, std::vector<std::string>> by_shard;  // each shard is read once
  for (const auto& [name, file] : map->as_object()) {
    GP_CHECK(file.is_string() && plain_file_name(file.as_string()), "[checkpoint] ", index_path,
             ": weight_map entry for ", name, " is not a file name in the directory");
    by_shard[file.as_string()].push_back(name);
  }
  for (const auto& [shard, names] : by_shard) {
    const std::string path = (fs::path(dir) / shard).string();
    SafetensorsFile sf = read_safetensors(path);
    for (const std::string& name : names) {
      const auto it = sf.tensors.find(name);
      GP_CHECK(it != sf.tensors.end(), "[checkpoint] ", index_path, ": weight_map puts ", name, " in ", shard,
               ", but ", path, " has no such tensor");
      tensors[name] = it->second;
      origin[name] = path;
    }
  }
}

// The family that owns config.json's architecture parses it and checks the tensors.
Checkpoint load_hf_dir(const std::string& dir, bool with_tokenizer) {
  Checkpoint ck;
  ck.source = dir;
  ck.format = "hf";
  ck.rope_style = RopeStyle::Neox;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const Json config = Json::parse_file(config_path);
  GP_CHECK(config.is_object(), "[config] ", config_path, ": expected a JSON object, found ", config.type_name());
  const ModelFamily& family = family_for_config(config);
  family.read_hf_config(ck, config, config_path);
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  std::map<std::string, std::string> origin;
  std::error_code ec;
  if (fs::exists(index, ec)) {
    load_shards(dir, index, ck.tensors, origin);
  } else if (fs::exists(single, ec)) {
    SafetensorsFile sf = read_safetensors(single);
    for (auto& [name, t] : sf.tensors) {
      origin[name] = single;
      ck.tensors[name] = std::move(t);
    }
  } else {
    fail("[checkpoint] ", dir, ": found neither model.safetensors nor model.safetensors.index.json");
  }
  fold_fp8_scales(ck.tensors, origin, dir);
  family.adopt_hf_tensors(ck, origin);
  if (with_tokenizer &&
      (fs::exists(fs::path(dir) / "tokenizer.json", ec) || fs::exists(fs::path(dir) / "tokenizer.model", ec)))
    ck.tokenizer = load_tokenizer_dir(dir);
  return ck;
}

// ---------- GGUF names ----------

struct NamePair {
  const char* hf;
  const char* gguf;
};
constexpr NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
// clang-format off
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},   {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},     {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},         {"self_attn.v_proj.bias", "attn_v.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},          {"mlp.down_proj.weight", "ffn_down.weight"},
};
// clang-format on

// Translates "<from_prefix><layer>.<suffix>" names with the layer table, and the global names.
// Returns "" for names outside the tables. to_gguf selects the direction.
std::string translate_name(const std::string& name, bool to_gguf) {
  for (const auto& n : kGlobalNames)
    if (name == (to_gguf ? n.hf : n.gguf)) return to_gguf ? n.gguf : n.hf;
  const std::string from = to_gguf ? "model.layers." : "blk.";
  const std::string to = to_gguf ? "blk." : "model.layers.";
  if (name.compare(0, from.size(), from) != 0) return "";
  size_t i = from.size();
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == from.size() || i - from.size() > 9 || i >= name.size() || name[i] != '.') return "";
  const std::string layer = name.substr(from.size(), i - from.size());
  const std::string suffix = name.substr(i + 1);
  for (const auto& n : kLayerNames)
    if (suffix == (to_gguf ? n.hf : n.gguf)) return cat(to, layer, ".", to_gguf ? n.gguf : n.hf);
  return "";
}

// ---------- GGUF reading ----------

// GGUF stores these hyper-parameters as f32; the shortest decimal that reads back as the same
// f32 recovers the value the config had (1e-05, not 9.99999974737875e-06).
double decimal_of(const GgufFile& g, const std::string& key) {
  const double v = g.get_float(key);
  if (g.type(key) != GgufType::F32) return v;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, float(v));
  double out = v;
  std::from_chars(buf, r.ptr, out);
  return out;
}

int32_t token_id(const GgufFile& g, const std::string& key) {
  const int64_t id = g.get_int(key, -1);
  GP_CHECK(id >= -1 && id <= std::numeric_limits<int32_t>::max(), "[checkpoint] ", g.name(), ": ", key,
           " is ", id, ", not a token id");
  return int32_t(id);
}

std::vector<int32_t> id_list(const GgufFile& g, const std::string& list_key, const std::string& single_key) {
  std::vector<int32_t> ids;
  if (g.has(list_key)) {
    for (int64_t id : g.get_int_array(list_key)) {
      GP_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(), "[checkpoint] ", g.name(), ": ",
               list_key, " holds ", id, ", not a token id");
      ids.push_back(int32_t(id));
    }
  } else if (g.has(single_key) && token_id(g, single_key) >= 0) {
    ids.push_back(token_id(g, single_key));
  }
  return ids;
}

const char* dtype_to_torch(DType t) {
  return t == DType::F16 ? "float16" : t == DType::BF16 ? "bfloat16" : "float32";
}

// llama.cpp stores Llama 3 rope scaling as per-frequency divisors (rope_freqs.weight) instead of
// parameters. Recognize them as Llama 3's (low 1, high 4, original context 8192) or refuse.
void infer_llama3_scaling(LlamaConfig& c, const Tensor& freqs, const std::string& path) {
  const int64_t half = c.head_dim / 2;
  GP_CHECK(freqs.numel() == half, "[checkpoint] ", path, ": rope_freqs.weight has ", freqs.numel(),
           " values, expected head_dim/2 = ", half);
  const Tensor f = freqs.to(DType::F32);
  const float* got = f.data<float>();
  LlamaConfig base = c;
  base.rope_scaling = RopeScaling{};
  LlamaConfig scaled = c;
  scaled.rope_scaling.type = "llama3";
  scaled.rope_scaling.factor = got[half - 1];
  const std::vector<float> b = rope_inv_freq(base), s = rope_inv_freq(scaled);
  for (int64_t i = 0; i < half; ++i) {
    const double want = double(b[size_t(i)]) / double(s[size_t(i)]);
    GP_CHECK(std::fabs(got[i] - want) <= 1e-3 * want, "[checkpoint] ", path,
             ": rope_freqs.weight does not match Llama 3 rope scaling (item ", i, " is ", got[i],
             ", expected ", want, ")");
  }
  if (scaled.rope_scaling.factor != 1.0) c.rope_scaling = scaled.rope_scaling;
}

LlamaConfig gguf_config(const GgufFile& g, const std::string& arch,
                        const std::map<std::string, Tensor>& tensors) {
  const std::string& path = g.name();
  const std::string p = arch + ".";
  LlamaConfig c;
  c.architecture =
      g.get_string("genperf.hf_architecture", arch == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
  GP_CHECK(find_architecture(c.architecture), "[checkpoint] ", path, ": unknown architecture '",
           c.architecture, "'");
  c.hidden_size = g.get_int(p + "embedding_length");
  c.num_hidden_layers = g.get_int(p + "block_count");
  c.intermediate_size = g.get_int(p + "feed_forward_length");
  c.num_attention_heads = g.get_int(p + "attention.head_count");
  c.num_key_value_heads = g.get_int(p + "attention.head_count_kv", c.num_attention_heads);
  c.head_dim = g.get_int(p + "attention.key_length",
                         c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  GP_CHECK(g.get_int(p + "attention.value_length", c.head_dim) == c.head_dim, "[checkpoint] ", path,
           ": attention.value_length differs from key_length; genperf needs them equal");
  GP_CHECK(g.get_int(p + "rope.dimension_count", c.head_dim) == c.head_dim, "[checkpoint] ", path,
           ": rope.dimension_count ", g.get_int(p + "rope.dimension_count"), " differs from head_dim ",
           c.head_dim, " (partial rotary embeddings are not supported)");
  c.max_position_embeddings = g.get_int(p + "context_length");
  c.rms_norm_eps = decimal_of(g, p + "attention.layer_norm_rms_epsilon");
  c.rope_theta = g.has(p + "rope.freq_base") ? decimal_of(g, p + "rope.freq_base") : 10000.0;
  const auto embed = tensors.find("model.embed_tokens.weight");
  if (g.has(p + "vocab_size"))
    c.vocab_size = g.get_int(p + "vocab_size");
  else if (g.has("tokenizer.ggml.tokens"))
    c.vocab_size = int64_t(g.array_size("tokenizer.ggml.tokens"));
  else if (embed != tensors.end())
    c.vocab_size = embed->second.size(0);
  c.tie_word_embeddings = !tensors.count("lm_head.weight");
  c.attention_bias = arch == "qwen2" || tensors.count("model.layers.0.self_attn.q_proj.bias");
  // genperf's own key, else the float type a llama.cpp file type names, else the embedding's.
  c.torch_dtype = embed != tensors.end() ? dtype_to_torch(embed->second.dtype()) : "float32";
  DType named;
  if (g.has("general.file_type") && g.get_int("general.file_type") >= 0 &&
      gguf_file_type_dtype(uint32_t(g.get_int("general.file_type")), &named) && traits(named).is_float)
    c.torch_dtype = dtype_to_torch(named);
  c.torch_dtype = g.get_string("genperf.torch_dtype", c.torch_dtype);
  const std::string scaling = g.get_string(p + "rope.scaling.type", "none");
  GP_CHECK(scaling == "none", "[checkpoint] ", path, ": rope scaling '", scaling, "' is not supported");
  if (g.has("genperf.rope_scaling.type")) {
    c.rope_scaling.type = g.get_string("genperf.rope_scaling.type");
    c.rope_scaling.factor = g.get_float("genperf.rope_scaling.factor");
    c.rope_scaling.low_freq_factor = g.get_float("genperf.rope_scaling.low_freq_factor");
    c.rope_scaling.high_freq_factor = g.get_float("genperf.rope_scaling.high_freq_factor");
    c.rope_scaling.original_max_position_embeddings =
        g.get_int("genperf.rope_scaling.original_max_position_embeddings");
  }
  c.bos_token_ids = id_list(g, "genperf.bos_token_ids", "tokenizer.ggml.bos_token_id");
  c.eos_token_ids = id_list(g, "genperf.eos_token_ids", "tokenizer.ggml.eos_token_id");
  return c;
}

TokenizerVocab gguf_vocab(const GgufFile& g) {
  TokenizerVocab v;
  v.model = g.get_string("tokenizer.ggml.model");
  v.pre = g.get_string("tokenizer.ggml.pre", "");
  v.tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (g.has("tokenizer.ggml.scores"))
    for (double s : g.get_float_array("tokenizer.ggml.scores")) v.scores.push_back(float(s));
  if (g.has("tokenizer.ggml.token_type"))
    for (int64_t t : g.get_int_array("tokenizer.ggml.token_type")) {
      GP_CHECK(t >= std::numeric_limits<int32_t>::min() && t <= std::numeric_limits<int32_t>::max(),
               "[checkpoint] ", g.name(), ": tokenizer.ggml.token_type holds ", t);
      v.token_types.push_back(int32_t(t));
    }
  if (g.has("tokenizer.ggml.merges")) v.merges = g.get_string_array("tokenizer.ggml.merges");
  v.bos_id = token_id(g, "tokenizer.ggml.bos_token_id");
  v.eos_id = token_id(g, "tokenizer.ggml.eos_token_id");
  v.unk_id = token_id(g, "tokenizer.ggml.unknown_token_id");
  v.pad_id = token_id(g, "tokenizer.ggml.padding_token_id");
  v.add_bos = g.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = g.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  v.remove_extra_whitespaces =
      g.get_bool("tokenizer.ggml.remove_extra_whitespaces", v.remove_extra_whitespaces);
  if (g.has("tokenizer.ggml.precompiled_charsmap"))
    for (int64_t b : g.get_int_array("tokenizer.ggml.precompiled_charsmap"))
      v.precompiled_charsmap += char(b & 0xFF);
  return v;
}

Checkpoint load_gguf(const std::string& path, bool with_tokenizer) {
  const GgufFile g = GgufFile::open(path);
  Checkpoint ck;
  ck.source = path;
  ck.format = "gguf";
  const std::string arch = g.get_string("general.architecture");
  GP_CHECK(arch == "llama" || arch == "qwen2", "[checkpoint] ", path, ": general.architecture '", arch,
           "' is not supported (expected llama or qwen2)");
  // llama.cpp permutes q/k of `llama` into interleaved pairs; `qwen2` keeps Hugging Face's halves.
  ck.rope_style = arch == "llama" ? RopeStyle::Interleaved : RopeStyle::Neox;
  Tensor rope_freqs;
  for (const GgufTensorInfo& info : g.tensor_infos()) {
    if (info.name == "rope_freqs.weight") {
      rope_freqs = g.tensor(info.name);
      continue;
    }
    const std::string hf = translate_name(info.name, false);
    GP_CHECK(!hf.empty(), "[checkpoint] ", path, ": tensor ", info.name, " has no counterpart in genperf's ",
             "Llama model");
    ck.tensors[hf] = g.tensor(info.name);
  }
  ck.config = gguf_config(g, arch, ck.tensors);
  check_config(ck.config, path);  // before inferring: that reads head_dim/2 frequencies
  if (rope_freqs.defined() && ck.config.rope_scaling.type.empty()) {
    infer_llama3_scaling(ck.config, rope_freqs, path);
    ck.config.validate(path);
  }
  check_tensors(ck.config, ck.tensors, {}, path);
  ck.architecture = ck.config.architecture;
  if (with_tokenizer && g.has("tokenizer.ggml.model"))
    ck.tokenizer = tokenizer_from_vocab(gguf_vocab(g), path);
  return ck;
}

// ---------- GGUF writing ----------

uint32_t u32_of(int64_t v, const char* what) {
  GP_CHECK(v >= 0 && v <= int64_t(std::numeric_limits<uint32_t>::max()), "[checkpoint] ", what, " ", v,
           " does not fit in a u32");
  return uint32_t(v);
}

// Hugging Face stores each head's rotary dimensions as two halves, rows [2, D/2]; GGUF `llama`
// interleaves the pairs, rows [D/2, 2]: GGUF row j*2+p of a head is HF row p*(D/2)+j.
Tensor permute_rotary_rows(const Tensor& t, int64_t heads, int64_t head_dim, const std::string& name) {
  const Tensor src = contiguous_cpu(t, cat("[checkpoint] ", name));
  const int64_t rows = src.size(0);
  GP_CHECK(rows == heads * head_dim, "[checkpoint] ", name, ": ", rows, " rows, expected ", heads * head_dim);
  const size_t row_bytes = src.nbytes() / size_t(rows);
  Tensor dst = Tensor::zeros(src.shape(), src.dtype());
  const char* s = src.data<char>();
  char* d = dst.data<char>();
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t p = 0; p < 2; ++p)
        std::memcpy(d + size_t(h * head_dim + j * 2 + p) * row_bytes,
                    s + size_t(h * head_dim + p * half + j) * row_bytes, row_bytes);
  return dst;
}

void put_tokenizer(GgufWriter& w, const TokenizerVocab& v) {
  w.set_string("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) w.set_string("tokenizer.ggml.pre", v.pre);
  w.set("tokenizer.ggml.tokens", GgufValue::strings(v.tokens));
  if (!v.scores.empty()) w.set("tokenizer.ggml.scores", GgufValue::f32s(v.scores));
  if (!v.token_types.empty()) w.set("tokenizer.ggml.token_type", GgufValue::i32s(v.token_types));
  if (!v.merges.empty()) w.set("tokenizer.ggml.merges", GgufValue::strings(v.merges));
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos_id},
                                                 {"tokenizer.ggml.eos_token_id", v.eos_id},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk_id},
                                                 {"tokenizer.ggml.padding_token_id", v.pad_id}};
  for (const auto& [key, id] : ids)
    if (id >= 0) w.set_u32(key, uint32_t(id));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (v.model == "llama") {
    w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    w.set_bool("tokenizer.ggml.remove_extra_whitespaces", v.remove_extra_whitespaces);
  }
  if (!v.precompiled_charsmap.empty()) {
    std::vector<GgufValue> bytes;
    bytes.reserve(v.precompiled_charsmap.size());
    for (char ch : v.precompiled_charsmap) bytes.push_back(GgufValue::u8(uint8_t(ch)));
    w.set("tokenizer.ggml.precompiled_charsmap", GgufValue::array(GgufType::U8, std::move(bytes)));
  }
}

// `weights`: the type and element count of each matrix the file holds, for general.file_type.
void put_config(GgufWriter& w, const LlamaConfig& c, const std::string& name,
                const std::vector<std::pair<DType, int64_t>>& weights) {
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", name);
  w.set_u32("general.file_type", gguf_file_type(weights));
  // The GGUF spec requires it only when some tensor is quantized; written always, as both of
  // llama.cpp's writers (convert_hf_to_gguf.py and llama-quantize) do, so that genperf's files
  // carry the keys llama.cpp's carry whatever their types.
  w.set_u32("general.quantization_version", kGgufQuantizationVersion);
  w.set_u32("llama.context_length", u32_of(c.max_position_embeddings, "max_position_embeddings"));
  w.set_u32("llama.embedding_length", u32_of(c.hidden_size, "hidden_size"));
  w.set_u32("llama.block_count", u32_of(c.num_hidden_layers, "num_hidden_layers"));
  w.set_u32("llama.feed_forward_length", u32_of(c.intermediate_size, "intermediate_size"));
  w.set_u32("llama.attention.head_count", u32_of(c.num_attention_heads, "num_attention_heads"));
  w.set_u32("llama.attention.head_count_kv", u32_of(c.num_key_value_heads, "num_key_value_heads"));
  w.set_u32("llama.attention.key_length", u32_of(c.head_dim, "head_dim"));
  w.set_u32("llama.attention.value_length", u32_of(c.head_dim, "head_dim"));
  w.set_u32("llama.rope.dimension_count", u32_of(c.head_dim, "head_dim"));
  w.set_f32("llama.rope.freq_base", float(c.rope_theta));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  w.set_u32("llama.vocab_size", u32_of(c.vocab_size, "vocab_size"));
  // What GGUF's llama keys cannot say, under genperf's own prefix so that round trips are exact.
  w.set_string("genperf.hf_architecture", c.architecture);
  w.set_string("genperf.torch_dtype", c.torch_dtype);  // general.file_type describes the tensors
  if (!c.rope_scaling.type.empty()) {
    w.set_string("genperf.rope_scaling.type", c.rope_scaling.type);
    w.set("genperf.rope_scaling.factor", GgufValue::f64(c.rope_scaling.factor));
    w.set("genperf.rope_scaling.low_freq_factor", GgufValue::f64(c.rope_scaling.low_freq_factor));
    w.set("genperf.rope_scaling.high_freq_factor", GgufValue::f64(c.rope_scaling.high_freq_factor));
    w.set("genperf.rope_scaling.original_max_position_embeddings",
          GgufValue::i64(c.rope_scaling.original_max_position_embeddings));
  }
  if (!c.bos_token_ids.empty()) w.set("genperf.bos_token_ids", GgufValue::i32s(c.bos_token_ids));
  if (!c.eos_token_ids.empty()) w.set("genperf.eos_token_ids", GgufValue::i32s(c.eos_token_ids));
}

// llama.cpp's form of Llama 3 rope scaling: the divisor of each inverse frequency.
Tensor rope_freqs_tensor(const LlamaConfig& c) {
  LlamaConfig base = c;
  base.rope_scaling = RopeScaling{};
  const std::vector<float> b = rope_inv_freq(base), s = rope_inv_freq(c);
  Tensor t = Tensor::zeros({int64_t(b.size())});
  for (size_t i = 0; i < b.size(); ++i) t.data<float>()[i] = float(double(b[i]) / double(s[i]));
  return t;
}

}  // namespace

void llama::check_checkpoint_tensors(const LlamaConfig& c, const std::map<std::string, Tensor>& tensors,
                                     const std::map<std::string, std::string>& origin, const std::string& source) {
  check_tensors(c, tensors, origin, source);
}

LlamaConfig read_hf_config(const std::string& path) {
  const Json j = Json::parse_file(path);
  GP_CHECK(j.is_object(), "[config] ", path, ": expected a JSON object, found ", j.type_name());
  return llama::config_from_json(j, path);
}

LlamaConfig llama::config_from_json(const Json& j, const std::string& path) {
  ConfigReader r(j, path);
  LlamaConfig c;
  c.architecture = r.architecture();
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
  c.head_dim = r.integer("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.max_position_embeddings = r.integer("max_position_embeddings", 2048);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  // Newer transformers nest rope settings in rope_parameters; older ones keep them at top level.
  const Json* params = r.get("rope_parameters");
  const double nested_theta =
      params && params->is_object() ? ConfigReader(*params, path).number("rope_theta", 10000.0) : 10000.0;
  c.rope_theta = r.number("rope_theta", nested_theta);
  c.rope_scaling = r.rope_scaling(r.get("rope_scaling") ? r.get("rope_scaling") : params);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  // Qwen2 always has q/k/v biases (its config.json does not say so).
  c.attention_bias = c.architecture == "Qwen2ForCausalLM" || r.boolean("attention_bias", false);
  c.hidden_act = r.string("hidden_act", "silu");
  c.torch_dtype = r.string("torch_dtype", r.string("dtype", "float32"));
  c.bos_token_ids = r.token_ids("bos_token_id");
  c.eos_token_ids = r.token_ids("eos_token_id");
  check_config(c, path);
  return c;
}

std::string hf_config_json(const LlamaConfig& c) {
  const ArchName* arch = find_architecture(c.architecture);
  Json j = Json::Object{};
  j["architectures"] = Json::Array{Json(c.architecture)};
  j["model_type"] = arch ? arch->model_type : "llama";
  j["vocab_size"] = Json(c.vocab_size);
  j["hidden_size"] = Json(c.hidden_size);
  j["intermediate_size"] = Json(c.intermediate_size);
  j["num_hidden_layers"] = Json(c.num_hidden_layers);
  j["num_attention_heads"] = Json(c.num_attention_heads);
  j["num_key_value_heads"] = Json(c.num_key_value_heads);
  j["head_dim"] = Json(c.head_dim);
  j["max_position_embeddings"] = Json(c.max_position_embeddings);
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    Json s = Json::Object{};
    s["rope_type"] = c.rope_scaling.type;
    s["factor"] = c.rope_scaling.factor;
    s["low_freq_factor"] = c.rope_scaling.low_freq_factor;
    s["high_freq_factor"] = c.rope_scaling.high_freq_factor;
    s["original_max_position_embeddings"] = Json(c.rope_scaling.original_max_position_embeddings);
    j["rope_scaling"] = std::move(s);
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["hidden_act"] = c.hidden_act;
  j["torch_dtype"] = c.torch_dtype;
  j["bos_token_id"] = token_ids_json(c.bos_token_ids);
  j["eos_token_id"] = token_ids_json(c.eos_token_ids);
  return j.dump(2) + "\n";
}

size_t weight_bytes(const std::map<std::string, Tensor>& tensors) {
  size_t n = 0;
  for (const auto& [name, t] : tensors) n += t.nbytes();
  return n;
}

std::string weight_types(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, int> count;
  for (const auto& [name, t] : tensors)
    if (t.ndim() == 2) ++count[dtype_name(t.dtype())];
  if (count.size() == 1) return count.begin()->first;
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [type, n] : count) order.emplace_back(-n, type);
  std::sort(order.begin(), order.end());
  std::string s = "mixed:";
  for (size_t i = 0; i < order.size(); ++i) s += cat(i ? ", " : " ", -order[i].first, " ", order[i].second);
  return s;
}

Checkpoint share_weights(const Checkpoint& ck) {
  Checkpoint c;
  c.source = ck.source;
  c.format = ck.format;
  c.architecture = ck.architecture;
  c.config_json = ck.config_json;
  c.config = ck.config;
  c.rope_style = ck.rope_style;
  c.tensors = ck.tensors;
  return c;
}

Checkpoint load_checkpoint(const std::string& path, bool with_tokenizer) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  GP_CHECK(fs::exists(st), "[checkpoint] ", path, ": no such file or directory");
  if (fs::is_directory(st)) return load_hf_dir(path, with_tokenizer);
  GP_CHECK(fs::is_regular_file(st), "[checkpoint] ", path, ": not a directory or a regular file");
  return load_gguf(path, with_tokenizer);
}

void save_hf_checkpoint(const std::string& dir, const LlamaConfig& c,
                        const std::map<std::string, Tensor>& tensors,
                        const std::vector<std::string>& extra_files, size_t shard_bytes) {
  check_config(c, dir);
  check_tensors(c, tensors, {}, dir);  // never write a checkpoint that cannot be loaded
  std::error_code ec;
  fs::create_directories(dir, ec);
  GP_CHECK(!ec, "[checkpoint] ", dir, ": cannot create directory: ", ec.message());
  const fs::path d(dir);
  for (const std::string& f : extra_files) {
    const std::string base = fs::path(f).filename().string();
    const bool own = base == "config.json" || base == "model.safetensors" ||
                     base == "model.safetensors.index.json" ||
                     (base.starts_with("model-") && base.ends_with(".safetensors"));
    GP_CHECK(!own, "[checkpoint] ", f, ": an extra file may not replace the checkpoint's own ", base);
  }
  write_file_atomic((d / "config.json").string(), hf_config_json(c));

  uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.nbytes();
  const std::map<std::string, std::string> meta = {{"format", "pt"}};  // what transformers expects
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t in_shard = 0;
  for (const auto& [name, t] : tensors) {
    if (shard_bytes > 0 && !shards.back().empty() && in_shard + t.nbytes() > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace_back(name, t);
    in_shard += t.nbytes();
  }
  if (shards.size() == 1) {
    write_safetensors((d / "model.safetensors").string(), shards[0], meta);
    fs::remove(d / "model.safetensors.index.json", ec);  // a stale index would take precedence
  } else {
    Json weight_map = Json::Object{};
    for (size_t i = 0; i < shards.size(); ++i) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      write_safetensors((d / file).string(), shards[i], meta);
      for (const auto& [name, t] : shards[i]) weight_map.as_object().emplace_back(name, Json(file));
    }
    Json index = Json::Object{};
    index["metadata"]["total_size"] = Json(int64_t(total));
    index["weight_map"] = std::move(weight_map);
    write_file_atomic((d / "model.safetensors.index.json").string(), index.dump(2) + "\n");
    fs::remove(d / "model.safetensors", ec);
  }
  for (const std::string& f : extra_files) {
    const auto src = MmapFile::open(f);
    write_file_atomic((d / fs::path(f).filename()).string(), src->view());
  }
}

std::vector<std::string> gguf_llamacpp_notes(const Checkpoint& ck) {
  std::vector<std::string> notes;
  if (!ck.tokenizer) return notes;
  const TokenizerVocab v = ck.tokenizer->vocab();
  if (v.model != "llama" || (!v.remove_extra_whitespaces && v.precompiled_charsmap.empty())) return notes;
  std::string what = v.remove_extra_whitespaces ? "removes extra whitespace" : "";
  if (!v.precompiled_charsmap.empty()) what += cat(what.empty() ? "" : " and ", "normalizes characters");
  notes.push_back(cat("the SentencePiece tokenizer ", what,
                      " (stored in tokenizer.ggml.*); genperf applies that to the GGUF file too, llama.cpp does not, "
                      "so there text with runs of spaces, tabs or newlines",
                      v.precompiled_charsmap.empty() ? "" : " (or characters NFKC changes)",
                      " tokenizes differently; other text tokenizes alike"));
  return notes;
}

void save_gguf_checkpoint(const std::string& path, const Checkpoint& ck) {
  const LlamaConfig& c = ck.config;
  check_config(c, path);
  check_tensors(c, ck.tensors, {}, ck.source.empty() ? path : ck.source);
  GgufWriter w;
  const std::string name = ck.source.empty() ? "genperf" : fs::path(ck.source).filename().string();
  std::vector<std::pair<DType, int64_t>> weights;
  for (const Expected& e : expected_tensors(c))
    if (const Tensor& t = ck.tensors.at(e.name); t.ndim() == 2) weights.emplace_back(t.dtype(), t.numel());
  put_config(w, c, name.empty() ? "genperf" : name, weights);
  if (ck.tokenizer) put_tokenizer(w, ck.tokenizer->vocab());

  // Tensors already in GGUF's interleaved layout (loaded from a `llama` GGUF) are not permuted again.
  const bool permute = ck.rope_style == RopeStyle::Neox;
  std::set<std::string> written;
  for (const Expected& e : expected_tensors(c)) {
    Tensor t = ck.tensors.at(e.name);
    const bool is_q = e.name.find("self_attn.q_proj.") != std::string::npos;
    const bool is_k = e.name.find("self_attn.k_proj.") != std::string::npos;
    if (permute && (is_q || is_k))
      t = permute_rotary_rows(t, is_q ? c.num_attention_heads : c.num_key_value_heads, c.head_dim, e.name);
    // Norm weights and biases in F32, as llama.cpp's converter stores them: its CPU backend
    // multiplies and adds only f32 (or f16) vectors, and aborts on a bf16 norm ("binary_op:
    // unsupported types"). Exact: every bf16 and f16 value is an f32.
    if (t.ndim() == 1 && t.dtype() != DType::F32) t = t.to(DType::F32);
    w.add_tensor(translate_name(e.name, true), t);
    written.insert(e.name);
  }
  if (c.rope_scaling.type == "llama3") w.add_tensor("rope_freqs.weight", rope_freqs_tensor(c));
  for (const auto& [n, t] : ck.tensors) {
    const bool derived = n.ends_with("rotary_emb.inv_freq");  // recomputed from rope_theta
    const bool tied_head = n == "lm_head.weight" && c.tie_word_embeddings;
    GP_CHECK(written.count(n) || derived || tied_head, "[checkpoint] ", path, ": tensor ", n,
             " has no GGUF name in genperf's Llama mapping");
  }
  w.write(path);
}

}  // namespace genperf

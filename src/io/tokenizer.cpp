// Tokenizer factories: files, model directories and GGUF vocabularies. The tokenizers themselves
// live in tokenizer_spm.cpp (SentencePiece) and tokenizer_bpe.cpp (byte-level BPE); this file
// reads files and applies the special-token settings of a model directory's config files.
#include "genperf/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "genperf/error.h"
#include "genperf/json.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;
using TokenMap = std::unordered_map<std::string, int32_t>;

std::string read_file(const std::string& path) {
  std::error_code ec;
  GP_CHECK(fs::exists(path, ec), "[tokenizer] ", path, ": file not found");
  GP_CHECK(!fs::is_directory(path, ec), "[tokenizer] ", path, ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  GP_CHECK(in, "[tokenizer] ", path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  GP_CHECK(!in.bad(), "[tokenizer] ", path, ": read error");
  return ss.str();
}

// Runs `f`, naming `path` in any genperf::Error that does not already name it.
template <typename F>
auto naming_file(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(path) != std::string_view::npos) throw;
    fail("[tokenizer] ", path, ": ", e.what());
  }
}

Json parse_json_file(const std::string& path) {
  const std::string text = read_file(path);
  GP_CHECK(!text.empty(), "[tokenizer] ", path, ": file is empty");
  return naming_file(path, [&] { return Json::parse(text, path); });
}

// Special-token settings from a model directory's config files, over the tokenizer file's own.
struct SpecialOverrides {
  std::optional<int32_t> bos, eos;
  std::optional<bool> add_bos, add_eos;
  bool any() const { return bos || eos || add_bos || add_eos; }
};

// A tokenizer with its special-token settings replaced.
class ConfiguredTokenizer final : public Tokenizer {
 public:
  ConfiguredTokenizer(std::unique_ptr<Tokenizer> inner, const SpecialOverrides& o) : inner_(std::move(inner)) {
    const TokenizerVocab v = base_specials();
    bos_ = o.bos.value_or(v.bos_id);
    eos_ = o.eos.value_or(v.eos_id);
    add_bos_ = o.add_bos.value_or(v.add_bos);
    add_eos_ = o.add_eos.value_or(v.add_eos);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids = inner_->encode(text, false);
    if (add_bos && add_bos_ && bos_ >= 0) ids.insert(ids.begin(), bos_);
    if (add_bos && add_eos_ && eos_ >= 0) ids.push_back(eos_);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }
  std::string piece(int32_t id) const override { return inner_->piece(id); }
  int32_t vocab_size() const override { return inner_->vocab_size(); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  bool add_bos() const override { return add_bos_ && bos_ >= 0; }
  const char* kind() const override { return inner_->kind(); }
  TokenizerVocab vocab() const override {
    TokenizerVocab v = inner_->vocab();
    v.bos_id = bos_, v.eos_id = eos_, v.add_bos = add_bos_, v.add_eos = add_eos_;
    return v;
  }

 private:
  // The inner tokenizer's settings without calling vocab(), which a BPE tokenizer whose
  // pre-tokenizer has no GGUF name refuses.
  TokenizerVocab base_specials() const {
    TokenizerVocab v;
    v.bos_id = inner_->bos_id();
    v.eos_id = inner_->eos_id();
    v.add_bos = inner_->add_bos();
    // add_eos shows only through encode: the empty text gets BOS (when added), then EOS (when added).
    v.add_eos = inner_->encode("", true).size() > (v.add_bos ? 1u : 0u);
    return v;
  }

  std::unique_ptr<Tokenizer> inner_;
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

// Token text -> id for resolving names in tokenizer_config.json.
TokenMap token_map_of(const Tokenizer& tok) {
  TokenMap m;
  const auto v = tok.vocab();
  for (size_t id = 0; id < v.tokens.size(); ++id) m.emplace(v.tokens[id], int32_t(id));
  return m;
}

TokenMap token_map_of(const Json& tokenizer_json) {
  TokenMap m;
  if (const Json* model = tokenizer_json.find("model")) {
    if (const Json* vocab = model->find("vocab"); vocab && vocab->is_object())
      for (const auto& [text, id] : vocab->as_object()) m.emplace(text, int32_t(id.as_int()));
  }
  if (const Json* added = tokenizer_json.find("added_tokens"); added && added->is_array())
    for (const Json& t : added->as_array()) m.insert_or_assign(t.at("content").as_string(), int32_t(t.at("id").as_int()));
  return m;
}

// Llama 2 directories ship a tokenizer.json that re-expresses tokenizer.model as byte-fallback
// BPE; genperf reads the .model for those.
bool has_byte_level(const Json& pre) {
  if (const Json* type = pre.find("type"); type && type->is_string() && type->as_string() == "ByteLevel") return true;
  if (const Json* seq = pre.find("pretokenizers"); seq && seq->is_array())
    for (const Json& p : seq->as_array())
      if (has_byte_level(p)) return true;
  return false;
}

bool is_sentencepiece_style(const Json& j) {
  const Json* model = j.find("model");
  const Json* fallback = model ? model->find("byte_fallback") : nullptr;
  const Json* pre = j.find("pre_tokenizer");
  return (fallback && fallback->is_bool() && fallback->as_bool()) || !pre || !has_byte_level(*pre);
}

int32_t checked_id(int64_t id, const Tokenizer& tok, const std::string& path, const char* key) {
  GP_CHECK(id >= 0 && id < tok.vocab_size(), "[tokenizer] ", path, ": ", key, " ", id,
           " out of range for a vocabulary of ", tok.vocab_size(), " tokens");
  return int32_t(id);
}

// config.json: bos_token_id, eos_token_id (an id, a list whose first id is the main one, or null).
void read_model_config(const std::string& path, const Tokenizer& tok, SpecialOverrides& o) {
  const Json j = parse_json_file(path);
  naming_file(path, [&] {
    GP_CHECK(j.is_object(), "[tokenizer] ", path, ": top level is ", j.type_name(), ", expected an object");
    if (const Json* b = j.find("bos_token_id"); b && !b->is_null()) o.bos = checked_id(b->as_int(), tok, path, "bos_token_id");
    if (const Json* e = j.find("eos_token_id"); e && !e->is_null()) {
      const Json& first = e->is_array() && !e->as_array().empty() ? e->as_array()[0] : *e;
      if (!e->is_array() || !e->as_array().empty()) o.eos = checked_id(first.as_int(), tok, path, "eos_token_id");
    }
  });
}

// tokenizer_config.json: add_bos_token, add_eos_token, bos_token, eos_token (a string, an object
// with "content", or null for none).
void read_tokenizer_config(const std::string& path, const TokenMap& ids, SpecialOverrides& o) {
  const Json j = parse_json_file(path);
  naming_file(path, [&] {
    GP_CHECK(j.is_object(), "[tokenizer] ", path, ": top level is ", j.type_name(), ", expected an object");
    if (const Json* a = j.find("add_bos_token"); a && !a->is_null()) o.add_bos = a->as_bool();
    if (const Json* a = j.find("add_eos_token"); a && !a->is_null()) o.add_eos = a->as_bool();
    auto token = [&](const char* key, std::optional<int32_t>& out) {
      const Json* t = j.find(key);
      if (!t) return;
      if (t->is_null()) {
        out = -1;
        return;
      }
      const std::string& text = t->is_object() ? t->at("content").as_string() : t->as_string();
      const auto it = ids.find(text);
      GP_CHECK(it != ids.end(), "[tokenizer] ", path, ": ", key, " '", text, "' is not in the vocabulary");
      out = it->second;
    };
    token("bos_token", o.bos);
    token("eos_token", o.eos);
  });
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  const std::string data = read_file(path);
  GP_CHECK(!data.empty(), "[tokenizer] ", path, ": file is empty");
  return sentencepiece_from_proto(data, path);
}

std::unique_ptr<Tokenizer> load_bpe_json(const std::string& path) {
  return bpe_from_json(parse_json_file(path), path);
}

std::unique_ptr<Tokenizer> tokenizer_from_vocab(const TokenizerVocab& v, const std::string& source) {
  if (v.model == "llama") return sentencepiece_from_vocab(v, source);
  if (v.model == "gpt2") return bpe_from_vocab(v, source);
  fail("[tokenizer] ", source, ": tokenizer model '", v.model, "' is not supported (genperf reads 'llama' and 'gpt2')");
}

std::unique_ptr<Tokenizer> load_tokenizer_dir(const std::string& dir) {
  std::error_code ec;
  GP_CHECK(fs::is_directory(dir, ec), "[tokenizer] ", dir, ": not a directory");
  const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
  const std::string model_path = (fs::path(dir) / "tokenizer.model").string();
  std::unique_ptr<Tokenizer> tok;
  TokenMap ids;
  if (fs::exists(json_path, ec)) {
    const Json j = parse_json_file(json_path);
    if (is_sentencepiece_style(j) && fs::exists(model_path, ec)) {
      tok = load_sentencepiece(model_path);
      ids = token_map_of(*tok);
    } else {
      tok = bpe_from_json(j, json_path);
      ids = token_map_of(j);
    }
  } else if (fs::exists(model_path, ec)) {
    tok = load_sentencepiece(model_path);
    ids = token_map_of(*tok);
  } else {
    fail("[tokenizer] ", dir, ": neither tokenizer.json nor tokenizer.model found");
  }
  // config.json first, so that tokenizer_config.json, which describes the tokenizer, wins.
  SpecialOverrides o;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const std::string tok_config_path = (fs::path(dir) / "tokenizer_config.json").string();
  if (fs::exists(config_path, ec)) read_model_config(config_path, *tok, o);
  if (fs::exists(tok_config_path, ec)) read_tokenizer_config(tok_config_path, ids, o);
  if (!o.any()) return tok;
  return std::make_unique<ConfiguredTokenizer>(std::move(tok), o);
}

}  // namespace genperf

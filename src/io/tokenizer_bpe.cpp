// Byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2) from tokenizer.json or GGUF metadata.
// Encoding: added tokens are cut out of the text first and never split; each remaining segment is
// split by the pre-tokenizer's regexes (PCRE2, UTF + Unicode properties), each piece is mapped to
// GPT-2's byte-level alphabet and merged by rank, lowest first, leftmost on ties (as Hugging Face
// tokenizers does). Text that is not valid UTF-8 still round-trips: PCRE2 matches around the bad
// bytes and they are tokenized as bytes.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/tokenizer.h"
#include "io/unicode.h"

namespace genperf {
namespace {

// The split patterns of the tokenizers genperf knows by name (as in their tokenizer.json files).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GGUF names of pre-tokenizers (tokenizer.ggml.pre). Llama 3 vocabularies hold whole words that
// their merges do not build, and its tokenizer.json says ignore_merges: true.
struct PreTokenizerName {
  std::string_view name, pattern;
  bool ignore_merges;
};
constexpr PreTokenizerName kPreNames[] = {
    {"llama-bpe", kLlama3Pattern, true}, {"llama3", kLlama3Pattern, true}, {"qwen2", kQwen2Pattern, false},
    {"gpt-2", kGpt2Pattern, false},      {"gpt2", kGpt2Pattern, false},    {"default", kGpt2Pattern, false},
};

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A regex of a Split pre-tokenizer with behavior "Isolated": every match is a piece, and so is
// every gap between matches.
class SplitRegex {
 public:
  SplitRegex(const std::string& pattern, bool literal, const std::string& source)
      : pattern_(pattern), source_(source) {
    // PCRE2_LITERAL admits UTF options but not UCP.
    const uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &offset,
                          nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("[tokenizer] ", source, ": pre-tokenizer regex does not compile at offset ", offset, ": ",
           reinterpret_cast<const char*>(msg), " (pattern ", pattern, ")");
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // a speed-up only; PCRE2 interprets without it
  }
  ~SplitRegex() { pcre2_code_free(code_); }
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Appends the pieces of `text` to `out`.
  void split(std::string_view text, pcre2_match_data* md, std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0, gap = 0;  // next match attempt; start of the text not yet emitted
    while (pos < text.size()) {
      const int rc = pcre2_match(code_, subject, text.size(), pos, 0, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {  // e.g. PCRE2's match limit, reached by a pattern that backtracks without end
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail("[tokenizer] ", source_, ": pre-tokenizer regex failed to match: ", reinterpret_cast<const char*>(msg),
             " (PCRE2 error ", rc, ", pattern ", pattern_, ")");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t start = ov[0], end = ov[1];
      if (end == start) {  // an empty match is no piece; step over one character
        pos = start + 1;
        while (pos < text.size() && (uint8_t(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (start > gap) out.push_back(text.substr(gap, start - gap));
      out.push_back(text.substr(start, end - start));
      pos = gap = end;
    }
    if (gap < text.size()) out.push_back(text.substr(gap));
  }

 private:
  std::string pattern_;
  std::string source_;  // the file the pattern came from, for errors
  pcre2_code* code_ = nullptr;
};

struct AddedToken {
  std::string content;  // raw text, matched as a whole
  int32_t id = -1;
  bool special = false;  // skipped by decode
  bool lstrip = false, rstrip = false;  // swallow whitespace before / after the token
};

// Everything a byte-level BPE tokenizer is built from, whichever file it came from.
struct BpeSpec {
  std::vector<std::string> tokens;  // by id: byte-level text, or raw text for added tokens
  std::vector<int32_t> types;       // TokenType by id
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::vector<AddedToken> added;
  std::vector<std::pair<std::string, bool>> splits;  // regexes applied in order; true = literal string
  bool add_prefix_space = false;
  bool ignore_merges = false;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeSpec spec, std::string source) : spec_(std::move(spec)), source_(std::move(source)) {
    const size_t n = spec_.tokens.size();
    GP_CHECK(n > 0, "[tokenizer] ", source_, ": BPE vocabulary has no tokens");
    GP_CHECK(spec_.types.size() == n, "[tokenizer] ", source_, ": ", n, " tokens but ", spec_.types.size(),
             " token types");
    token_ids_.reserve(n);
    for (size_t id = 0; id < n; ++id) {
      const int32_t t = spec_.types[id];
      GP_CHECK(t >= kNormal && t <= kByte, "[tokenizer] ", source_, ": token ", id, " has type ", t,
               ", expected 1..6");
      if (t == kNormal || t == kUnknown || t == kByte) token_ids_.emplace(spec_.tokens[id], int32_t(id));
    }
    check_special("bos id", spec_.bos);
    check_special("eos id", spec_.eos);
    check_special("unknown-token id", spec_.unk);
    check_special("padding id", spec_.pad);
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append_utf8(s, unicode::byte_to_code_point(uint8_t(b)));
      const auto it = token_ids_.find(s);
      byte_ids_[b] = it == token_ids_.end() ? -1 : it->second;
    }
    build_merges();
    build_added();
    for (const auto& [pattern, literal] : spec_.splits)
      splits_.push_back(std::make_unique<SplitRegex>(pattern, literal, source_));
    decoded_.resize(n);
    for (size_t id = 0; id < n; ++id) {
      const int32_t t = spec_.types[id];
      if (t == kUserDefined) decoded_[id] = spec_.tokens[id];
      else if (t != kControl && t != kUnused) decoded_[id] = unicode::byte_level_to_bytes(spec_.tokens[id]);
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    // add_bos asks for the special tokens the configuration wants around a sequence.
    if (add_bos && spec_.add_bos && spec_.bos >= 0) ids.push_back(spec_.bos);
    WordCache cache;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(pcre2_match_data_create(1, nullptr),
                                                                             &pcre2_match_data_free);
    GP_CHECK(md, "[tokenizer] out of memory for PCRE2 match data");
    size_t start = 0, i = 0;  // start of the ordinary text not yet encoded; scan position
    while (i < text.size()) {
      const AddedToken* tok = match_added(text, i);
      if (!tok) {
        ++i;
        continue;
      }
      size_t end = i;
      if (tok->lstrip) end = skip_space_back(text, start, end);
      encode_ordinary(text.substr(start, end - start), md.get(), cache, ids);
      ids.push_back(tok->id);
      i += tok->content.size();
      if (tok->rstrip) i = skip_space(text, i);
      start = i;
    }
    encode_ordinary(text.substr(start), md.get(), cache, ids);
    if (add_bos && spec_.add_eos && spec_.eos >= 0) ids.push_back(spec_.eos);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) out += piece(id);
    return out;
  }

  std::string piece(int32_t id) const override {
    GP_CHECK(id >= 0 && id < vocab_size(), "[tokenizer] ", source_, ": token id ", id, " out of range [0, ",
             vocab_size(), ")");
    return decoded_[id];
  }

  int32_t vocab_size() const override { return int32_t(spec_.tokens.size()); }
  int32_t bos_id() const override { return spec_.bos; }
  int32_t eos_id() const override { return spec_.eos; }
  bool add_bos() const override { return spec_.add_bos && spec_.bos >= 0; }
  const char* kind() const override { return "bpe"; }

  TokenizerVocab vocab() const override {
    TokenizerVocab v;
    v.model = "gpt2";
    v.pre = gguf_pre_name();
    v.tokens = spec_.tokens;
    v.token_types = spec_.types;
    for (const auto& [a, b] : spec_.merges) v.merges.push_back(a + " " + b);
    v.bos_id = spec_.bos, v.eos_id = spec_.eos, v.unk_id = spec_.unk, v.pad_id = spec_.pad;
    v.add_bos = spec_.add_bos, v.add_eos = spec_.add_eos;
    return v;
  }

 private:
  using WordCache = std::unordered_map<std::string_view, std::vector<int32_t>>;
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

  void check_special(const char* name, int32_t id) const {
    GP_CHECK(id >= -1 && id < vocab_size(), "[tokenizer] ", source_, ": ", name, " ", id,
             " out of range for a vocabulary of ", vocab_size(), " tokens");
  }

  int32_t id_of(const std::string& token, size_t rank, const std::pair<std::string, std::string>& m) const {
    const auto it = token_ids_.find(token);
    GP_CHECK(it != token_ids_.end(), "[tokenizer] ", source_, ": merge ", rank, " '", m.first, " ", m.second,
             "' needs token '", token, "', which is not in the vocabulary");
    return it->second;
  }

  void build_merges() {
    merges_.reserve(spec_.merges.size());
    for (size_t r = 0; r < spec_.merges.size(); ++r) {
      const auto& m = spec_.merges[r];
      const int32_t a = id_of(m.first, r, m), b = id_of(m.second, r, m), ab = id_of(m.first + m.second, r, m);
      merges_.insert_or_assign(pair_key(a, b), Merge{int32_t(r), ab});  // a repeated merge keeps its last rank
    }
  }

  void build_added() {
    for (const auto& t : spec_.added) {
      GP_CHECK(!t.content.empty(), "[tokenizer] ", source_, ": added token ", t.id, " is empty");
      GP_CHECK(t.id >= 0 && t.id < vocab_size(), "[tokenizer] ", source_, ": added token '", t.content, "' has id ",
               t.id, " outside the vocabulary");
      added_by_first_byte_[uint8_t(t.content[0])].push_back(&t);
    }
    // Longest first, so that the scan takes the leftmost-longest match.
    for (auto& bucket : added_by_first_byte_) {
      std::stable_sort(bucket.begin(), bucket.end(),
                       [](const AddedToken* x, const AddedToken* y) { return x->content.size() > y->content.size(); });
    }
  }

  const AddedToken* match_added(std::string_view text, size_t i) const {
    for (const AddedToken* t : added_by_first_byte_[uint8_t(text[i])])
      if (text.compare(i, t->content.size(), t->content) == 0) return t;
    return nullptr;
  }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  static size_t skip_space(std::string_view s, size_t i) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
  }
  static size_t skip_space_back(std::string_view s, size_t begin, size_t end) {
    while (end > begin && is_space(s[end - 1])) --end;
    return end;
  }

  // Text between added tokens: pre-tokenize, then BPE each piece.
  void encode_ordinary(std::string_view text, pcre2_match_data* md, WordCache& cache,
                       std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    std::string prefixed;
    if (spec_.add_prefix_space && text[0] != ' ') {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    std::vector<std::string_view> pieces{text}, next;
    for (const auto& re : splits_) {
      next.clear();
      for (auto p : pieces) re->split(p, md, next);
      pieces.swap(next);
    }
    for (auto p : pieces) {
      // Cached by content: keys view `text`, which outlives the cache except for `prefixed`.
      if (prefixed.empty()) {
        auto [it, fresh] = cache.try_emplace(p);
        if (fresh) it->second = bpe_piece(p);
        ids.insert(ids.end(), it->second.begin(), it->second.end());
      } else {
        const auto word = bpe_piece(p);
        ids.insert(ids.end(), word.begin(), word.end());
      }
    }
  }

  // BPE of one pre-tokenized piece (raw bytes).
  std::vector<int32_t> bpe_piece(std::string_view bytes) const {
    if (spec_.ignore_merges) {
      const auto it = token_ids_.find(unicode::bytes_to_byte_level(bytes));
      if (it != token_ids_.end()) return {it->second};
    }
    std::vector<int32_t> ids;
    ids.reserve(bytes.size());
    for (char c : bytes) {
      const int32_t id = byte_ids_[uint8_t(c)];
      // As Hugging Face does: a byte missing from the vocabulary becomes unk, or is dropped without one.
      if (id >= 0) ids.push_back(id);
      else if (spec_.unk >= 0) ids.push_back(spec_.unk);
    }
    merge(ids);
    return ids;
  }

  // Merges adjacent symbols by rank (lowest first, leftmost on ties) until no pair has a merge.
  // A heap of candidate pairs over a linked list of symbols: O(n log n) even for long pieces.
  void merge(std::vector<int32_t>& ids) const {
    if (ids.size() < 2 || merges_.empty()) return;
    struct Sym {
      int32_t id, prev, next;
    };
    struct Cand {
      int32_t rank, left, left_id, right_id;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    const int32_t n = int32_t(ids.size());
    std::vector<Sym> sym(n);
    for (int32_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1};
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](int32_t left) {
      if (left < 0 || sym[left].next < 0) return;
      const int32_t right = sym[left].next;
      const auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
      if (it != merges_.end()) heap.push({it->second.rank, left, sym[left].id, sym[right].id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      // Stale when either symbol has changed since the pair was pushed.
      const int32_t right = sym[c.left].next;
      if (sym[c.left].id != c.left_id || right < 0 || sym[right].id != c.right_id) continue;
      sym[c.left].id = merges_.at(pair_key(c.left_id, c.right_id)).id;
      sym[right].id = -1;
      sym[c.left].next = sym[right].next;
      if (sym[right].next >= 0) sym[sym[right].next].prev = c.left;
      push(sym[c.left].prev);
      push(c.left);
    }
    ids.clear();
    for (int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
  }

  std::string gguf_pre_name() const {
    if (spec_.splits.size() == 1 && !spec_.splits[0].second && !spec_.add_prefix_space) {
      for (const auto& p : kPreNames)
        if (spec_.splits[0].first == p.pattern) return std::string(p.name);
    }
    fail("[tokenizer] ", source_, ": this pre-tokenizer has no GGUF name (genperf names the GPT-2, Llama 3 and "
         "Qwen2 patterns without add_prefix_space)");
  }

  BpeSpec spec_;
  std::string source_;
  std::unordered_map<std::string, int32_t> token_ids_;  // byte-level text -> id (model vocabulary)
  std::unordered_map<uint64_t, Merge> merges_;          // (left id, right id) -> rank, merged id
  std::array<int32_t, 256> byte_ids_{};                 // id of each byte's one-character token
  std::array<std::vector<const AddedToken*>, 256> added_by_first_byte_;
  std::vector<std::unique_ptr<SplitRegex>> splits_;
  std::vector<std::string> decoded_;  // bytes each token decodes to ("" for control tokens)
};

// ---------------------------------------------------------------------------------------------
// tokenizer.json (Hugging Face tokenizers' serialization).

constexpr int64_t kMaxVocab = int64_t(1) << 24;  // bounds ids so a hostile file cannot force huge allocations

std::string_view type_of(const Json& node) {
  const Json* t = node.find("type");
  return t && t->is_string() ? std::string_view(t->as_string()) : std::string_view();
}

bool flag(const Json& node, std::string_view key, bool fallback) {
  const Json* v = node.find(key);
  return v && !v->is_null() ? v->as_bool() : fallback;
}

class JsonBpeReader {
 public:
  explicit JsonBpeReader(const std::string& source) : source_(source) {}

  BpeSpec read(const Json& j) {
    check(j.is_object(), cat("top level is ", j.type_name(), ", expected an object"));
    const Json* model = j.find("model");
    check(model && model->is_object(), "no \"model\" object");
    const std::string_view type = type_of(*model);
    check(type == "BPE" || (type.empty() && model->find("merges")),
          cat("model type '", type, "' is not supported (genperf reads byte-level BPE)"));
    check(!flag(*model, "byte_fallback", false),
          "byte_fallback BPE (SentencePiece-style) is not supported; load tokenizer.model instead");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const Json* v = model->find(key);
      check(!v || v->is_null() || v->as_string().empty(), cat("model.", key, " is not supported"));
    }
    read_vocab(*model);
    if (const Json* added = j.find("added_tokens"); added && !added->is_null()) read_added(*added);
    fill_holes();
    read_merges(*model);
    spec_.ignore_merges = flag(*model, "ignore_merges", false);
    if (const Json* unk = model->find("unk_token"); unk && !unk->is_null()) spec_.unk = lookup(unk->as_string());
    if (const Json* norm = j.find("normalizer"); norm && !norm->is_null()) check_normalizer(*norm);
    const Json* pre = j.find("pre_tokenizer");
    check(pre && !pre->is_null(), "no pre_tokenizer (genperf reads byte-level BPE, which needs ByteLevel)");
    bool byte_level = false;
    read_pre_tokenizer(*pre, byte_level);
    check(byte_level, "pre_tokenizer has no ByteLevel step (genperf reads byte-level BPE)");
    if (const Json* post = j.find("post_processor"); post && !post->is_null()) read_post_processor(*post);
    return std::move(spec_);
  }

 private:
  void check(bool ok, const std::string& what) const { GP_CHECK(ok, "[tokenizer] ", source_, ": ", what); }

  void place(int64_t id, const std::string& text, int32_t type) {
    check(id >= 0 && id < kMaxVocab, cat("token '", text, "' has id ", id, ", expected 0..", kMaxVocab - 1));
    if (size_t(id) >= spec_.tokens.size()) {
      spec_.tokens.resize(id + 1);
      spec_.types.resize(id + 1, 0);
    }
    if (spec_.types[id] != 0) {  // an added token may restate a vocabulary entry, with the same text
      check(spec_.tokens[id] == text,
            cat("id ", id, " is given to both '", spec_.tokens[id], "' and '", text, "'"));
    }
    spec_.tokens[id] = text;
    spec_.types[id] = type;
  }

  void read_vocab(const Json& model) {
    const Json* vocab = model.find("vocab");
    check(vocab && vocab->is_object(), "model.vocab is missing or not an object");
    for (const auto& [text, id] : vocab->as_object()) place(id.as_int(), text, kNormal);
  }

  void read_added(const Json& added) {
    for (const Json& t : added.as_array()) {
      AddedToken a;
      a.id = int32_t(std::clamp<int64_t>(t.at("id").as_int(), -1, kMaxVocab));
      a.content = t.at("content").as_string();
      a.special = flag(t, "special", false);
      a.lstrip = flag(t, "lstrip", false);
      a.rstrip = flag(t, "rstrip", false);
      check(!a.content.empty(), cat("added token ", a.id, " has empty content"));
      place(a.id, a.content, a.special ? kControl : kUserDefined);
      spec_.added.push_back(std::move(a));
    }
  }

  // Ids no token claims become unused placeholders, as GGUF converters write them.
  void fill_holes() {
    check(!spec_.tokens.empty(), "model.vocab is empty");
    for (size_t id = 0; id < spec_.tokens.size(); ++id) {
      if (spec_.types[id] == 0) {
        spec_.tokens[id] = cat("[PAD", id, "]");
        spec_.types[id] = kUnused;
      }
    }
  }

  void read_merges(const Json& model) {
    const Json* merges = model.find("merges");
    check(merges && merges->is_array(), "model.merges is missing or not an array");
    for (const Json& m : merges->as_array()) {
      if (m.is_string()) {  // "a b"; byte-level tokens never contain a space
        const std::string& s = m.as_string();
        const size_t sp = s.find(' ');
        check(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
              cat("merge ", spec_.merges.size(), " '", s, "' is not two tokens separated by one space"));
        spec_.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {  // ["a", "b"]
        check(m.is_array() && m.as_array().size() == 2,
              cat("merge ", spec_.merges.size(), " is neither \"a b\" nor [\"a\", \"b\"]"));
        spec_.merges.emplace_back(m.as_array()[0].as_string(), m.as_array()[1].as_string());
      }
    }
  }

  // Id of a token named by text; the map is built on first use (most files never need it).
  int32_t lookup(const std::string& text) {
    if (ids_.empty()) {
      ids_.reserve(spec_.tokens.size());
      for (size_t id = 0; id < spec_.tokens.size(); ++id)
        if (spec_.types[id] != kUnused) ids_.insert_or_assign(spec_.tokens[id], int32_t(id));
    }
    const auto it = ids_.find(text);
    check(it != ids_.end(), cat("token '", text, "' is not in the vocabulary"));
    return it->second;
  }

  // Qwen2's NFC is accepted but not applied: text already in NFC (ASCII, and most text in the
  // wild) tokenizes the same. Other normalizers change the text and are refused.
  void check_normalizer(const Json& norm) const {
    const std::string_view type = type_of(norm);
    if (type == "Sequence") {
      for (const Json& n : norm.at("normalizers").as_array()) check_normalizer(n);
      return;
    }
    check(type == "NFC", cat("normalizer '", type, "' is not supported (genperf accepts none or NFC)"));
  }

  void read_pre_tokenizer(const Json& pre, bool& byte_level) {
    const std::string_view type = type_of(pre);
    check(!byte_level, cat("pre_tokenizer '", type, "' after ByteLevel is not supported"));
    if (type == "Sequence") {
      for (const Json& p : pre.at("pretokenizers").as_array()) read_pre_tokenizer(p, byte_level);
    } else if (type == "Split") {
      const Json& pattern = pre.at("pattern");
      const Json* regex = pattern.find("Regex");
      const Json* literal = pattern.find("String");
      check(regex || literal, "Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
      const Json* behavior = pre.find("behavior");
      const std::string b = behavior ? behavior->as_string() : "";
      check(b == "Isolated", cat("Split behavior '", b, "' is not supported (genperf implements Isolated)"));
      check(!flag(pre, "invert", false), "Split with invert: true is not supported");
      spec_.splits.emplace_back(regex ? regex->as_string() : literal->as_string(), !regex);
    } else if (type == "ByteLevel") {
      byte_level = true;
      spec_.add_prefix_space = flag(pre, "add_prefix_space", false);
      if (flag(pre, "use_regex", true)) spec_.splits.emplace_back(std::string(kGpt2Pattern), false);
    } else {
      check(false, cat("pre_tokenizer '", type, "' is not supported"));
    }
  }

  // Id of a special token named in a post-processor: its own table first, else the vocabulary.
  int32_t special_id(const Json& post, const std::string& name) {
    if (const Json* table = post.find("special_tokens"); table && table->is_object()) {
      if (const Json* entry = table->find(name)) {
        const auto& ids = entry->at("ids").as_array();
        check(!ids.empty(), cat("post_processor special token '", name, "' has no ids"));
        return int32_t(std::clamp<int64_t>(ids[0].as_int(), -2, kMaxVocab));
      }
    }
    return lookup(name);
  }

  // TemplateProcessing that puts a special token before the sequence is how Llama 3 adds BOS.
  void read_post_processor(const Json& post) {
    const std::string_view type = type_of(post);
    if (type == "Sequence") {
      for (const Json& p : post.at("processors").as_array()) read_post_processor(p);
    } else if (type == "TemplateProcessing") {
      const auto& single = post.at("single").as_array();
      if (single.empty()) return;
      if (const Json* first = single.front().find("SpecialToken")) {
        spec_.bos = special_id(post, first->at("id").as_string());
        spec_.add_bos = true;
      }
      if (const Json* last = single.back().find("SpecialToken"); last && single.size() > 1) {
        spec_.eos = special_id(post, last->at("id").as_string());
        spec_.add_eos = true;
      }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      spec_.bos = lookup(post.at("cls").as_array().at(0).as_string());
      spec_.eos = lookup(post.at("sep").as_array().at(0).as_string());
      spec_.add_bos = spec_.add_eos = true;
    }
  }

  const std::string& source_;
  BpeSpec spec_;
  std::unordered_map<std::string, int32_t> ids_;  // every token's text -> id, once lookup() needs it
};

}  // namespace

std::unique_ptr<Tokenizer> bpe_from_json(const Json& j, const std::string& source) {
  BpeSpec spec;
  try {
    spec = JsonBpeReader(source).read(j);
  } catch (const Error& e) {
    // Json's own type errors do not know the file; name it.
    if (std::string_view(e.what()).find(source) != std::string_view::npos) throw;
    fail("[tokenizer] ", source, ": ", e.what());
  } catch (const std::out_of_range&) {
    fail("[tokenizer] ", source, ": a post_processor list is empty");
  }
  return std::make_unique<BpeTokenizer>(std::move(spec), source);
}

std::unique_ptr<Tokenizer> bpe_from_vocab(const TokenizerVocab& v, const std::string& source) {
  const PreTokenizerName* pre = nullptr;
  for (const auto& p : kPreNames)
    if (v.pre == p.name) pre = &p;
  if (!pre) {
    std::string known;
    for (const auto& p : kPreNames) known += cat(known.empty() ? "" : ", ", p.name);
    fail("[tokenizer] ", source, ": pre-tokenizer '", v.pre, "' is not supported (known: ", known, ")");
  }
  BpeSpec spec;
  spec.tokens = v.tokens;
  spec.types = v.token_types.empty() ? std::vector<int32_t>(v.tokens.size(), kNormal) : v.token_types;
  GP_CHECK(spec.types.size() == spec.tokens.size(), "[tokenizer] ", source, ": ", spec.tokens.size(),
           " tokens but ", spec.types.size(), " token types");
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t sp = m.find(' ');
    GP_CHECK(sp != std::string::npos && m.find(' ', sp + 1) == std::string::npos, "[tokenizer] ", source,
             ": merge ", r, " '", m, "' is not two tokens separated by one space");
    spec.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  // Control and user-defined tokens are the added tokens: matched whole in text.
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const int32_t t = spec.types[id];
    if ((t == kControl || t == kUserDefined) && !spec.tokens[id].empty())
      spec.added.push_back({spec.tokens[id], int32_t(id), t == kControl, false, false});
  }
  spec.splits.emplace_back(std::string(pre->pattern), false);
  spec.ignore_merges = pre->ignore_merges;
  spec.bos = v.bos_id, spec.eos = v.eos_id, spec.unk = v.unk_id, spec.pad = v.pad_id;
  spec.add_bos = v.add_bos, spec.add_eos = v.add_eos;
  return std::make_unique<BpeTokenizer>(std::move(spec), source);
}

}  // namespace genperf

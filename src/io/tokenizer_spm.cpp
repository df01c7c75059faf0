// SentencePiece tokenizers: a .model file through libsentencepiece, and the same model rebuilt
// from GGUF metadata. Debian ships libsentencepiece without its protobuf headers, so the
// ModelProto is read and written here with a small wire-format codec (fields from
// sentencepiece_model.proto); libsentencepiece itself does all encoding and decoding.
#include <sentencepiece_processor.h>

#include <cmath>
#include <cstring>
#include <exception>

#include "genperf/error.h"
#include "genperf/tokenizer.h"

namespace genperf {
namespace {

// Piece types, shared by ModelProto.SentencePiece.Type and GGUF's tokenizer.ggml.token_type.
enum PieceType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
// TrainerSpec.ModelType.
enum ModelType : int32_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

// What genperf needs from a ModelProto: the pieces and the fields that change encoding.
struct SpmModel {
  struct Piece {
    std::string text;
    float score = 0.0f;
    int32_t type = kNormal;
  };
  std::vector<Piece> pieces;
  int32_t model_type = kUnigram;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string unk_surface = " \xE2\x81\x87 ";  // U+2047, SentencePiece's default
  std::string normalizer_name;
  std::string charsmap;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

// ---------------------------------------------------------------------------------------------
// Protobuf wire format (https://protobuf.dev/programming-guides/encoding/): each field is a varint
// tag (field << 3 | wire type) followed by a varint (0), 8 bytes (1), a length-prefixed blob (2)
// or 4 bytes (5).

class ProtoReader {
 public:
  ProtoReader(std::string_view data, const std::string& source) : data_(data), source_(source) {}

  // Steps to the next field; false at the end of the message. Throws on malformed input.
  bool next() {
    if (pos_ >= data_.size()) return false;
    const uint64_t tag = read_varint();
    field_ = uint32_t(tag >> 3);
    wire_ = int(tag & 7);
    GP_CHECK(field_ != 0, bad("field number 0"));
    switch (wire_) {
      case 0: value_ = read_varint(); break;
      case 1: blob_ = take(8); break;
      case 2: blob_ = take(read_varint()); break;
      case 5: blob_ = take(4); break;
      default: fail(bad(cat("unsupported wire type ", wire_, " for field ", field_)));
    }
    return true;
  }

  uint32_t field() const { return field_; }
  uint64_t varint() const {
    expect(0);
    return value_;
  }
  bool boolean() const { return varint() != 0; }
  int32_t int32() const { return int32_t(uint32_t(varint())); }
  std::string_view bytes() const {
    expect(2);
    return blob_;
  }
  float f32() const {
    expect(5);
    float f;
    std::memcpy(&f, blob_.data(), 4);  // little-endian on every platform genperf targets
    return f;
  }

 private:
  std::string bad(const std::string& what) const {
    return cat("[tokenizer] ", source_, ": not a valid SentencePiece model (", what, " at byte ", pos_, ")");
  }
  void expect(int wire) const {
    GP_CHECK(wire_ == wire, bad(cat("field ", field_, " has wire type ", wire_, ", expected ", wire)));
  }
  uint64_t read_varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      GP_CHECK(pos_ < data_.size(), bad("truncated varint"));
      const auto b = uint8_t(data_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(bad("varint longer than 10 bytes"));
  }
  std::string_view take(uint64_t n) {
    GP_CHECK(n <= data_.size() - pos_, bad(cat("field ", field_, " of ", n, " bytes runs past the end")));
    const auto out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  std::string_view data_;
  const std::string& source_;
  size_t pos_ = 0;
  uint32_t field_ = 0;
  int wire_ = 0;
  uint64_t value_ = 0;
  std::string_view blob_;
};

class ProtoWriter {
 public:
  void varint_field(uint32_t field, uint64_t v) {
    varint(uint64_t(field) << 3 | 0);
    varint(v);
  }
  void int32_field(uint32_t field, int32_t v) { varint_field(field, uint64_t(int64_t(v))); }
  void bytes_field(uint32_t field, std::string_view s) {
    varint(uint64_t(field) << 3 | 2);
    varint(s.size());
    out_.append(s);
  }
  void float_field(uint32_t field, float f) {
    varint(uint64_t(field) << 3 | 5);
    char b[4];
    std::memcpy(b, &f, 4);
    out_.append(b, 4);
  }
  const std::string& str() const { return out_; }

 private:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += char(0x80 | (v & 0x7F));
      v >>= 7;
    }
    out_ += char(v);
  }
  std::string out_;
};

// Field numbers of sentencepiece_model.proto.
namespace field {
constexpr uint32_t kPieces = 1, kTrainerSpec = 2, kNormalizerSpec = 3, kDenormalizerSpec = 5;
constexpr uint32_t kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kModelType = 3, kVocabSize = 4, kTreatWsAsSuffix = 24, kByteFallback = 35;
constexpr uint32_t kUnkId = 40, kBosId = 41, kEosId = 42, kPadId = 43, kUnkSurface = 44;
constexpr uint32_t kUnkPiece = 45, kBosPiece = 46, kEosPiece = 47, kPadPiece = 48;
constexpr uint32_t kNormName = 1, kCharsmap = 2, kAddDummyPrefix = 3, kRemoveExtraWs = 4, kEscapeWs = 5;
}  // namespace field

SpmModel::Piece parse_piece(std::string_view data, const std::string& source) {
  SpmModel::Piece p;
  ProtoReader r(data, source);
  while (r.next()) {
    if (r.field() == field::kPieceText) p.text = std::string(r.bytes());
    else if (r.field() == field::kPieceScore) p.score = r.f32();
    else if (r.field() == field::kPieceType) p.type = r.int32();
  }
  return p;
}

void parse_trainer_spec(std::string_view data, const std::string& source, SpmModel& m) {
  ProtoReader r(data, source);
  while (r.next()) {
    if (r.field() == field::kModelType) m.model_type = r.int32();
    else if (r.field() == field::kByteFallback) m.byte_fallback = r.boolean();
    else if (r.field() == field::kTreatWsAsSuffix) m.treat_whitespace_as_suffix = r.boolean();
    else if (r.field() == field::kUnkSurface) m.unk_surface = std::string(r.bytes());
  }
}

void parse_normalizer_spec(std::string_view data, const std::string& source, SpmModel& m) {
  ProtoReader r(data, source);
  while (r.next()) {
    if (r.field() == field::kNormName) m.normalizer_name = std::string(r.bytes());
    else if (r.field() == field::kCharsmap) m.charsmap = std::string(r.bytes());
    else if (r.field() == field::kAddDummyPrefix) m.add_dummy_prefix = r.boolean();
    else if (r.field() == field::kRemoveExtraWs) m.remove_extra_whitespaces = r.boolean();
    else if (r.field() == field::kEscapeWs) m.escape_whitespaces = r.boolean();
  }
}

// libsentencepiece trusts the normalizer's character map: a Darts-clone double-array trie
// (uint32 units) whose leaf values are offsets of NUL-terminated strings in the blob after the
// trie. A damaged map makes it read out of bounds, so genperf walks every reachable trie node
// first, checking each child slot any input byte can reach, and each value.
void check_charsmap(std::string_view blob, const std::string& source) {
  auto bad = [&](const std::string& what) {
    fail("[tokenizer] ", source, ": broken normalizer character map (", what, ")");
  };
  uint32_t trie_bytes = 0;
  if (blob.size() <= 4) bad("shorter than its header");
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes >= blob.size() - 4 || trie_bytes % 4 != 0 || trie_bytes == 0) bad("bad trie size");
  std::vector<uint32_t> units(trie_bytes / 4);
  std::memcpy(units.data(), blob.data() + 4, trie_bytes);
  const std::string_view strings = blob.substr(4 + trie_bytes);
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  auto has_leaf = [](uint32_t u) { return (u >> 8) & 1; };
  auto label = [](uint32_t u) { return u & ((1u << 31) | 0xFF); };
  auto value = [](uint32_t u) { return u & ((1u << 31) - 1); };
  const size_t n = units.size();
  std::vector<uint8_t> seen(n, 0);
  std::vector<size_t> todo{size_t(offset(units[0]))};  // position of the root's children
  while (!todo.empty()) {
    const size_t base = todo.back();
    todo.pop_back();
    if ((base | 0xFF) >= n) bad("child slots past the end of the trie");
    if (seen[base]) continue;
    seen[base] = 1;
    for (uint32_t c = 0; c < 256; ++c) {  // input bytes, NUL included
      const uint32_t u = units[base ^ c];
      if (label(u) != c) continue;
      const size_t next = (base ^ c) ^ offset(u);
      if (next >= n) bad("child offset past the end of the trie");
      if (has_leaf(u)) {  // the value sits in the unit at `next`
        const uint32_t v = value(units[next]);
        if (v >= strings.size() || strings.find('\0', v) == std::string_view::npos) bad("value past the strings");
      }
      todo.push_back(next);
    }
  }
}

SpmModel parse_model(std::string_view data, const std::string& source) {
  SpmModel m, denormalizer;  // libsentencepiece decodes through the denormalizer's map, when present
  ProtoReader r(data, source);
  while (r.next()) {
    if (r.field() == field::kPieces) m.pieces.push_back(parse_piece(r.bytes(), source));
    else if (r.field() == field::kTrainerSpec) parse_trainer_spec(r.bytes(), source, m);
    else if (r.field() == field::kNormalizerSpec) parse_normalizer_spec(r.bytes(), source, m);
    else if (r.field() == field::kDenormalizerSpec) parse_normalizer_spec(r.bytes(), source, denormalizer);
  }
  GP_CHECK(!m.pieces.empty(), "[tokenizer] ", source, ": not a valid SentencePiece model (no pieces)");
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    // libsentencepiece builds its trie from NUL-terminated keys and aborts the process on an empty
    // one, so pieces must be non-empty and free of NUL bytes.
    GP_CHECK(!m.pieces[i].text.empty(), "[tokenizer] ", source, ": piece ", i, " is empty");
    GP_CHECK(m.pieces[i].text.find('\0') == std::string::npos, "[tokenizer] ", source, ": piece ", i,
             " contains a NUL byte");
    auto& type = m.pieces[i].type;
    if (type < kNormal || type > kByte) type = kNormal;  // protobuf reads unknown enum values as the default
  }
  if (!m.charsmap.empty()) check_charsmap(m.charsmap, source);
  if (!denormalizer.charsmap.empty()) check_charsmap(denormalizer.charsmap, source);
  return m;
}

// Serializes `m` as a ModelProto. `ids` names bos/eos/unk/pad so that libsentencepiece's own
// bos_id() etc. agree with the vocabulary.
std::string serialize_model(const SpmModel& m, const TokenizerVocab& ids) {
  ProtoWriter w;
  for (const auto& p : m.pieces) {
    ProtoWriter pw;
    pw.bytes_field(field::kPieceText, p.text);
    pw.float_field(field::kPieceScore, p.score);
    pw.int32_field(field::kPieceType, p.type);
    w.bytes_field(field::kPieces, pw.str());
  }
  ProtoWriter t;
  t.int32_field(field::kModelType, m.model_type);
  t.int32_field(field::kVocabSize, int32_t(m.pieces.size()));
  t.varint_field(field::kTreatWsAsSuffix, m.treat_whitespace_as_suffix);
  t.varint_field(field::kByteFallback, m.byte_fallback);
  t.int32_field(field::kUnkId, ids.unk_id);
  t.int32_field(field::kBosId, ids.bos_id);
  t.int32_field(field::kEosId, ids.eos_id);
  t.int32_field(field::kPadId, ids.pad_id);
  t.bytes_field(field::kUnkSurface, m.unk_surface);
  auto name_of = [&](int32_t id, std::string_view fallback) {
    return id >= 0 ? std::string_view(m.pieces[id].text) : fallback;
  };
  // Absent specials get names that are no piece, so libsentencepiece reports them as -1.
  t.bytes_field(field::kUnkPiece, name_of(ids.unk_id, "<genperf-no-unk>"));
  t.bytes_field(field::kBosPiece, name_of(ids.bos_id, "<genperf-no-bos>"));
  t.bytes_field(field::kEosPiece, name_of(ids.eos_id, "<genperf-no-eos>"));
  t.bytes_field(field::kPadPiece, name_of(ids.pad_id, "<genperf-no-pad>"));
  w.bytes_field(field::kTrainerSpec, t.str());
  ProtoWriter n;
  n.bytes_field(field::kNormName, m.normalizer_name);
  if (!m.charsmap.empty()) n.bytes_field(field::kCharsmap, m.charsmap);
  n.varint_field(field::kAddDummyPrefix, m.add_dummy_prefix);
  n.varint_field(field::kRemoveExtraWs, m.remove_extra_whitespaces);
  n.varint_field(field::kEscapeWs, m.escape_whitespaces);
  w.bytes_field(field::kNormalizerSpec, n.str());
  return w.str();
}

// The byte of a byte piece "<0xNN>", or -1 when the text has another form.
int byte_piece_value(std::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// ---------------------------------------------------------------------------------------------

class SpmTokenizer final : public Tokenizer {
 public:
  SpmTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, SpmModel model, std::string source)
      : sp_(std::move(sp)), model_(std::move(model)), source_(std::move(source)) {
    bos_ = sp_->bos_id();
    eos_ = sp_->eos_id();
    unk_ = sp_->unk_id();
    pad_ = sp_->pad_id();
  }

  // GGUF metadata and tokenizer_config.json may name other specials than the proto does.
  void set_specials(const TokenizerVocab& v) {
    bos_ = v.bos_id, eos_ = v.eos_id, unk_ = v.unk_id, pad_ = v.pad_id;
    add_bos_ = v.add_bos, add_eos_ = v.add_eos;
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int> ids;
    const auto status = sp_->Encode(text, &ids);
    GP_CHECK(status.ok(), "[tokenizer] ", source_, ": SentencePiece encode failed: ", status.ToString());
    // add_bos asks for the special tokens the configuration wants around a sequence.
    if (add_bos && add_bos_ && bos_ >= 0) ids.insert(ids.begin(), bos_);
    if (add_bos && add_eos_ && eos_ >= 0) ids.push_back(eos_);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    for (int32_t id : ids) check_id(id);
    std::string out;
    const auto status = sp_->Decode(ids, &out);
    GP_CHECK(status.ok(), "[tokenizer] ", source_, ": SentencePiece decode failed: ", status.ToString());
    return out;
  }

  // Unlike decode, keeps the space that stands for '▁' at the start of the piece: a stream is
  // the concatenation of its pieces.
  std::string piece(int32_t id) const override {
    check_id(id);
    const auto& p = model_.pieces[id];
    switch (p.type) {
      case kControl: case kUnused: return "";
      case kUnknown: return model_.unk_surface;
      case kByte: return std::string(1, char(byte_piece_value(p.text)));
      default: return replace_meta_space(p.text);
    }
  }

  int32_t vocab_size() const override { return int32_t(model_.pieces.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  bool add_bos() const override { return add_bos_ && bos_ >= 0; }
  const char* kind() const override { return "sentencepiece"; }

  TokenizerVocab vocab() const override {
    TokenizerVocab v;
    v.model = "llama";
    v.pre = "default";
    for (const auto& p : model_.pieces) {
      v.tokens.push_back(p.text);
      v.scores.push_back(p.score);
      v.token_types.push_back(p.type);
    }
    v.bos_id = bos_, v.eos_id = eos_, v.unk_id = unk_, v.pad_id = pad_;
    v.add_bos = add_bos_, v.add_eos = add_eos_;
    v.add_space_prefix = model_.add_dummy_prefix;
    v.remove_extra_whitespaces = model_.remove_extra_whitespaces;
    v.precompiled_charsmap = model_.charsmap;
    return v;
  }

 private:
  void check_id(int32_t id) const {
    GP_CHECK(id >= 0 && id < vocab_size(), "[tokenizer] ", source_, ": token id ", id,
             " out of range [0, ", vocab_size(), ")");
  }
  static std::string replace_meta_space(const std::string& s) {
    static constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581 '▁'
    std::string out;
    for (size_t i = 0; i < s.size();) {
      if (s.compare(i, kMeta.size(), kMeta) == 0) {
        out += ' ';
        i += kMeta.size();
      } else {
        out += s[i++];
      }
    }
    return out;
  }

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  SpmModel model_;
  std::string source_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = true, add_eos_ = false;  // Llama's convention; tokenizer_config.json refines it
};

std::unique_ptr<SpmTokenizer> make_spm(std::string_view serialized, const std::string& source) {
  SpmModel model = parse_model(serialized, source);
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = sp->LoadFromSerializedProto(serialized);
  } catch (const std::exception& e) {  // its trie builder throws on keys it cannot store
    fail("[tokenizer] ", source, ": SentencePiece rejected the model: ", e.what());
  }
  GP_CHECK(status.ok(), "[tokenizer] ", source, ": SentencePiece rejected the model: ", status.ToString());
  for (size_t i = 0; i < model.pieces.size(); ++i) {
    GP_CHECK(model.pieces[i].type != kByte || byte_piece_value(model.pieces[i].text) >= 0, "[tokenizer] ", source,
             ": byte piece ", i, " is '", model.pieces[i].text, "', expected <0xNN>");
  }
  GP_CHECK(sp->GetPieceSize() == int(model.pieces.size()), "[tokenizer] ", source, ": SentencePiece reports ",
           sp->GetPieceSize(), " pieces, the file has ", model.pieces.size());
  return std::make_unique<SpmTokenizer>(std::move(sp), std::move(model), source);
}

// GGUF does not record whether a SentencePiece model is BPE or unigram. SentencePiece's BPE
// trainer scores the i-th merged piece -i, so integral, non-increasing scores of the normal
// pieces mark BPE; unigram scores are log-probabilities.
int32_t guess_model_type(const TokenizerVocab& v) {
  float prev = INFINITY;
  int normal = 0;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.token_types[i] != kNormal) continue;
    const float s = v.scores[i];
    if (s != std::floor(s) || s > prev) return kUnigram;
    prev = s;
    ++normal;
  }
  return normal > 0 ? kBpe : kUnigram;
}

void check_special_id(int32_t id, const char* name, size_t n, const std::string& source) {
  GP_CHECK(id >= -1 && id < int64_t(n), "[tokenizer] ", source, ": ", name, " ", id,
           " out of range for a vocabulary of ", n, " tokens");
}

}  // namespace

std::unique_ptr<Tokenizer> sentencepiece_from_proto(std::string_view serialized, const std::string& source) {
  return make_spm(serialized, source);
}

std::unique_ptr<Tokenizer> sentencepiece_from_vocab(const TokenizerVocab& in, const std::string& source) {
  TokenizerVocab v = in;
  const size_t n = v.tokens.size();
  GP_CHECK(n > 0, "[tokenizer] ", source, ": SentencePiece vocabulary has no tokens");
  GP_CHECK(v.scores.size() == n, "[tokenizer] ", source, ": ", n, " tokens but ", v.scores.size(), " scores");
  if (v.token_types.empty()) v.token_types.assign(n, kNormal);
  GP_CHECK(v.token_types.size() == n, "[tokenizer] ", source, ": ", n, " tokens but ", v.token_types.size(),
           " token types");
  check_special_id(v.bos_id, "bos id", n, source);
  check_special_id(v.eos_id, "eos id", n, source);
  check_special_id(v.unk_id, "unknown-token id", n, source);
  check_special_id(v.pad_id, "padding id", n, source);
  // SentencePiece needs exactly one unknown piece; a vocabulary without types names it by unk_id.
  if (v.unk_id >= 0 && v.token_types[v.unk_id] == kNormal) v.token_types[v.unk_id] = kUnknown;

  SpmModel m;
  bool has_unknown = false;
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = v.token_types[i];
    GP_CHECK(type >= kNormal && type <= kByte, "[tokenizer] ", source, ": token ", i, " has type ", type,
             ", expected 1..6");
    GP_CHECK(!v.tokens[i].empty(), "[tokenizer] ", source, ": token ", i, " is empty");
    GP_CHECK(std::isfinite(v.scores[i]), "[tokenizer] ", source, ": token ", i, " has a non-finite score");
    has_unknown |= type == kUnknown;
    m.byte_fallback |= type == kByte;
    m.pieces.push_back({v.tokens[i], v.scores[i], type});
  }
  GP_CHECK(has_unknown, "[tokenizer] ", source, ": SentencePiece vocabulary has no unknown token (type 2)");
  if (v.unk_id < 0) {
    for (size_t i = 0; i < n; ++i)
      if (v.token_types[i] == kUnknown) v.unk_id = int32_t(i);
  }
  m.model_type = guess_model_type(v);
  m.normalizer_name = v.precompiled_charsmap.empty() ? "identity" : "precompiled";
  m.charsmap = v.precompiled_charsmap;
  m.add_dummy_prefix = v.add_space_prefix;
  m.remove_extra_whitespaces = v.remove_extra_whitespaces;

  auto tok = make_spm(serialize_model(m, v), source);
  tok->set_specials(v);
  return tok;
}

}  // namespace genperf

// Tokenizers of the checkpoints users have: SentencePiece (`tokenizer.model`, through
// libsentencepiece), byte-level BPE from `tokenizer.json` (GPT-2 / Llama 3 / Qwen2 style, with
// the pre-tokenizer's split regex and added special tokens), and both kinds as stored in GGUF
// metadata (`tokenizer.ggml.*`).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace genperf {

class GgufFile;  // io/gguf.h
class Json;      // genperf/json.h

// What a tokenizer writes into / reads from GGUF metadata (keys tokenizer.ggml.*).
struct TokenizerVocab {
  std::string model;                // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;                  // pre-tokenizer name for "gpt2": "llama-bpe", "qwen2", "default"
  std::vector<std::string> tokens;  // piece text, by id
  std::vector<float> scores;        // SentencePiece scores (empty for BPE)
  std::vector<int32_t> token_types; // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // "a b" pairs, highest priority first (BPE only)
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = true, add_eos = false;
  // SentencePiece normalizer ("llama" only; GGUF keys tokenizer.ggml.add_space_prefix,
  // tokenizer.ggml.remove_extra_whitespaces, tokenizer.ggml.precompiled_charsmap). The defaults are
  // those of Llama's tokenizer.model; an empty charsmap means no character normalization.
  bool add_space_prefix = true;
  bool remove_extra_whitespaces = false;
  std::string precompiled_charsmap;  // raw bytes
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text`; with add_bos the BOS id is prepended when the tokenizer has one and its
  // configuration asks for it (add_bos_token).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
  // Text of the ids; special/control tokens are skipped.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // Text of one token as it continues a stream (for printing tokens as they are generated).
  virtual std::string piece(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  virtual bool add_bos() const = 0;    // whether encode(.., true) prepends BOS
  virtual const char* kind() const = 0;  // "sentencepiece" or "bpe"
  virtual TokenizerVocab vocab() const = 0;  // for writing GGUF metadata
};

// Loads the tokenizer of a Hugging Face model directory: tokenizer.json when present, else
// tokenizer.model; tokenizer_config.json (add_bos_token, special tokens) and config.json ids refine it.
std::unique_ptr<Tokenizer> load_tokenizer_dir(const std::string& dir);
// A SentencePiece model file (.model).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);
// A tokenizer.json file (byte-level BPE).
std::unique_ptr<Tokenizer> load_bpe_json(const std::string& path);
// From GGUF metadata (tokenizer.ggml.*); `source` names the file in errors.
std::unique_ptr<Tokenizer> tokenizer_from_vocab(const TokenizerVocab& v, const std::string& source);

// The pieces the factories above are made of; `source` names the file in errors.
// A serialized SentencePiece ModelProto (the bytes of a .model file).
std::unique_ptr<Tokenizer> sentencepiece_from_proto(std::string_view serialized, const std::string& source);
// A parsed tokenizer.json (model.type "BPE" with a ByteLevel pre-tokenizer).
std::unique_ptr<Tokenizer> bpe_from_json(const Json& tokenizer_json, const std::string& source);
// tokenizer_from_vocab for v.model == "llama" (SentencePiece) and v.model == "gpt2" (byte-level BPE).
std::unique_ptr<Tokenizer> sentencepiece_from_vocab(const TokenizerVocab& v, const std::string& source);
std::unique_ptr<Tokenizer> bpe_from_vocab(const TokenizerVocab& v, const std::string& source);

}  // namespace genperf

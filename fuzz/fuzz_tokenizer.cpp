// Fuzzes the tokenizer loaders. The first byte picks the reader for the rest:
//   even: a SentencePiece ModelProto (the bytes of tokenizer.model),
//   odd:  a tokenizer.json (byte-level BPE).
// A tokenizer that loads then encodes fixed texts and the input itself (arbitrary bytes, invalid
// UTF-8 included), decodes what it encoded and ids taken from the input (out of range included),
// and is rebuilt from its own GGUF vocabulary (tokenizer_from_vocab, the reader of a GGUF's
// tokenizer.ggml.* keys), which is exercised the same way. Encoded ids must lie in the vocabulary.
// (The rebuilt tokenizer need not give the same ids: GGUF's "llama" vocabulary is read as
// SentencePiece BPE, so a unigram model's text may split differently, as in llama.cpp.)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/tokenizer.h"

namespace {

constexpr const char* kTexts[] = {"", " ", "Hello world", "  two  spaces\n\ttab", "caf\xc3\xa9 \xe2\x82\xac 123",
                                  "\xf0\x9f\x98\x80<s></s><|endoftext|>"};

std::unique_ptr<genperf::Tokenizer> load(uint8_t mode, std::string_view payload) {
  if (mode % 2 == 0) return genperf::sentencepiece_from_proto(payload, "fuzz.model");
  return genperf::bpe_from_json(genperf::Json::parse(payload, "tokenizer.json"), "tokenizer.json");
}

void exercise(const genperf::Tokenizer& tok, std::string_view payload) {
  for (const char* t : kTexts) {
    const auto ids = tok.encode(t, true);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // encode must give valid ids
    (void)tok.decode(ids);
  }
  (void)tok.decode(tok.encode(payload, false));
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= payload.size() && ids.size() < 64; i += 4) {
    int32_t id;
    std::memcpy(&id, payload.data() + i, 4);
    ids.push_back(id);
  }
  try {
    (void)tok.decode(ids);
  } catch (const genperf::Error&) {
  }
  for (int32_t id : ids) {
    try {
      (void)tok.piece(id);
    } catch (const genperf::Error&) {
    }
  }
  (void)tok.bos_id();
  (void)tok.eos_id();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::unique_ptr<genperf::Tokenizer> tok;
  try {
    tok = load(data[0], payload);
  } catch (const genperf::Error&) {
    return 0;
  }
  try {
    exercise(*tok, payload);
  } catch (const genperf::Error&) {
    // A loaded tokenizer may still refuse some text (e.g. SentencePiece's own status errors).
  }
  // The GGUF path: the same vocabulary written as tokenizer.ggml.* keys and read back.
  std::unique_ptr<genperf::Tokenizer> again;
  try {
    again = genperf::tokenizer_from_vocab(tok->vocab(), "fuzz.gguf");
  } catch (const genperf::Error&) {
    return 0;
  }
  try {
    exercise(*again, payload);
  } catch (const genperf::Error&) {
  }
  return 0;
}

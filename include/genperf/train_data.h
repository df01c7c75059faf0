// Training data: token sequences of a fixed length with their targets, made from plain text
// (documents packed end to end with EOS separators) or from JSONL prompt/response records (one
// example per sequence, loss on the response only), split into training and validation sets,
// and read in a seeded shuffled order whose position can be saved and restored.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "genperf/tokenizer.h"

namespace genperf {

// n sequences of T tokens with their targets, row-major [n, T]. A target of -1 is not scored
// (prompt tokens, padding).
struct TokenSequences {
  int64_t T = 0;
  std::vector<int32_t> tokens, targets;
  int64_t size() const { return T ? int64_t(tokens.size()) / T : 0; }
  int64_t scored() const;  // targets >= 0
  std::span<const int32_t> tokens_of(int64_t i) const { return {tokens.data() + i * T, size_t(T)}; }
  std::span<const int32_t> targets_of(int64_t i) const { return {targets.data() + i * T, size_t(T)}; }
  void append(std::span<const int32_t> tok, std::span<const int32_t> tgt);
};

// Plain text: each non-empty line is a document; documents are tokenized (BOS first when the
// tokenizer adds one), followed by EOS and concatenated into one stream, cut into windows of
// T + 1 tokens that overlap by one (inputs are a window's first T tokens, targets its last T).
// The tail shorter than a window is dropped. Errors name `source`.
TokenSequences pack_text(const Tokenizer& tok, const std::string& text, int64_t T,
                         const std::string& source);

// JSONL with {"prompt": str, "response": str} per line (blank lines skipped): each record is one
// sequence BOS? + prompt + response + EOS, padded with EOS to T; only response tokens and the
// final EOS are scored. A record longer than T is an error naming the file and line, unless
// `truncate` (then it is cut, keeping the prompt's end and as much response as fits).
TokenSequences read_prompt_response(const Tokenizer& tok, const std::string& path, int64_t T,
                                    bool truncate = false);

// Splits off a validation set: a fraction of the sequences chosen by a seeded permutation
// (at least one when fraction > 0 and there are two or more sequences). Order within each part
// follows the original order.
struct DataSplit {
  TokenSequences train, validation;
};
DataSplit split_validation(const TokenSequences& all, double fraction, uint64_t seed);

// Where a loader is: epoch and index into that epoch's permutation. Saved in checkpoints.
struct DataPosition {
  int64_t epoch = 0, index = 0;
};

// Reads batches of B sequences in an order shuffled per epoch from (seed, epoch); an epoch's
// remainder smaller than B is skipped, so every batch is full. Deterministic: the same seed and
// position give the same batches.
class DataLoader {
 public:
  DataLoader(const TokenSequences& data, int64_t batch, uint64_t seed, bool shuffle = true);
  // Copies the next batch into tokens/targets ([B, T]) and advances.
  void next(std::vector<int32_t>& tokens, std::vector<int32_t>& targets);
  DataPosition position() const { return pos_; }
  void seek(DataPosition p);  // checked against the data size
  int64_t batches_per_epoch() const;

 private:
  void make_order();
  const TokenSequences& data_;
  int64_t batch_;
  uint64_t seed_;
  bool shuffle_;
  DataPosition pos_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

// Trains a SentencePiece tokenizer (libsentencepiece's trainer) on text files and writes
// <prefix>.model: BPE, byte fallback, ids unk 0, bos 1, eos 2, the given vocabulary size and seed.
// Lines longer than 16 KB are skipped by the trainer. Errors name the input.
void train_sentencepiece(const std::vector<std::string>& inputs, const std::string& model_path,
                         int vocab_size, uint64_t seed, int64_t max_sentences = 2'000'000);

}  // namespace genperf

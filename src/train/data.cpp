// Training data: packing plain text, reading prompt/response JSONL, the validation split and the
// seeded shuffled loader.
#include <algorithm>
#include <numeric>
#include <string_view>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "genperf/train_data.h"

namespace genperf {
namespace {

// Uniform in [0, n) without modulo bias worth speaking of (Lemire's multiply-shift).
int64_t below(Rng& rng, int64_t n) {
  return int64_t((unsigned __int128)rng.next() * (unsigned __int128)uint64_t(n) >> 64);
}

void shuffle(std::vector<int64_t>& v, uint64_t seed) {
  Rng rng(seed);
  for (int64_t i = int64_t(v.size()) - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(below(rng, i + 1))]);
}

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string_view line(text.data() + b, e - b);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    b = e + 1;
  }
  return lines;
}

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

}  // namespace

int64_t TokenSequences::scored() const {
  return int64_t(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
}

void TokenSequences::append(std::span<const int32_t> tok, std::span<const int32_t> tgt) {
  GP_CHECK(int64_t(tok.size()) == T && int64_t(tgt.size()) == T, "[data] a sequence of ", tok.size(),
           " tokens does not fit sequences of ", T);
  tokens.insert(tokens.end(), tok.begin(), tok.end());
  targets.insert(targets.end(), tgt.begin(), tgt.end());
}

TokenSequences pack_text(const Tokenizer& tok, const std::string& text, int64_t T,
                         const std::string& source) {
  GP_CHECK(T > 0, "[data] ", source, ": sequence length must be positive, got ", T);
  const int32_t eos = tok.eos_id();
  GP_CHECK(eos >= 0, "[data] ", source, ": the tokenizer has no EOS token to separate documents");
  std::vector<std::string_view> docs;
  for (std::string_view l : split_lines(text))
    if (!blank(l)) docs.push_back(l);
  GP_CHECK(!docs.empty(), "[data] ", source, ": no text (every line is empty)");
  // Tokenized in parallel, concatenated in document order: the stream is the same for any
  // thread count.
  std::vector<std::vector<int32_t>> ids(docs.size());
#pragma omp parallel for num_threads(num_threads()) schedule(dynamic, 64)
  for (size_t i = 0; i < docs.size(); ++i) {
    ids[i] = tok.encode(docs[i], true);
    ids[i].push_back(eos);
  }
  std::vector<int32_t> stream;
  for (auto& d : ids) stream.insert(stream.end(), d.begin(), d.end());
  const int64_t n = (int64_t(stream.size()) - 1) / T;
  GP_CHECK(n >= 1, "[data] ", source, ": ", stream.size(), " tokens are too few for one sequence of ",
           T, " (plus one target)");
  TokenSequences out;
  out.T = T;
  out.tokens.reserve(size_t(n * T));
  out.targets.reserve(size_t(n * T));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* w = stream.data() + i * T;
    out.tokens.insert(out.tokens.end(), w, w + T);
    out.targets.insert(out.targets.end(), w + 1, w + T + 1);
  }
  return out;
}

TokenSequences read_prompt_response(const Tokenizer& tok, const std::string& path, int64_t T,
                                    bool truncate) {
  GP_CHECK(T > 1, "[data] ", path, ": sequence length must be at least 2, got ", T);
  const int32_t eos = tok.eos_id();
  GP_CHECK(eos >= 0, "[data] ", path, ": the tokenizer has no EOS token to end responses");
  const std::string text = read_text_file(path);
  TokenSequences out;
  out.T = T;
  std::vector<int32_t> seq, tgt;
  int64_t line_no = 0;
  for (std::string_view line : split_lines(text)) {
    ++line_no;
    if (blank(line)) continue;
    const std::string where = cat(path, ":", line_no);
    const Json j = Json::parse(line, where);
    GP_CHECK(j.is_object(), "[data] ", where, ": expected a JSON object with \"prompt\" and \"response\"");
    const Json* p = j.find("prompt");
    const Json* r = j.find("response");
    GP_CHECK(p && p->is_string() && r && r->is_string(), "[data] ", where,
             ": expected string fields \"prompt\" and \"response\"");
    // Prompt and response are tokenized together, as `eval mc` tokenizes context + choice, and
    // the response starts where the tokens stop matching the prompt's own: the model learns
    // exactly the tokens it is later scored on.
    const std::vector<int32_t> prompt = tok.encode(p->as_string(), true);
    std::vector<int32_t> all = tok.encode(p->as_string() + r->as_string(), true);
    all.push_back(eos);
    int64_t start = 0;
    while (start < int64_t(prompt.size()) && start < int64_t(all.size()) - 1 &&
           prompt[size_t(start)] == all[size_t(start)])
      ++start;
    GP_CHECK(start > 0, "[data] ", where, ": empty prompt (and the tokenizer adds no BOS)");
    // Inputs are all but the last token; position i predicts token i + 1, scored when that token
    // belongs to the response (index >= start).
    if (int64_t(all.size()) - 1 > T) {
      GP_CHECK(truncate, "[data] ", where, ": the record is ", all.size() - 1,
               " tokens, longer than the sequence length ", T, " (raise --seq or allow truncation)");
      // Keep as much of the response as fits with at least one token of the prompt before it.
      const int64_t resp = int64_t(all.size()) - start;
      const int64_t keep_resp = std::min<int64_t>(resp, T);
      const int64_t keep_prompt = T + 1 - keep_resp;
      all.erase(all.begin() + start + keep_resp, all.end());
      all.erase(all.begin(), all.begin() + (start - keep_prompt));
      start = keep_prompt;
    }
    const int64_t len = int64_t(all.size()) - 1;
    seq.assign(size_t(T), eos);
    tgt.assign(size_t(T), -1);
    for (int64_t i = 0; i < len; ++i) {
      seq[size_t(i)] = all[size_t(i)];
      if (i + 1 >= start) tgt[size_t(i)] = all[size_t(i + 1)];
    }
    out.append(seq, tgt);
  }
  GP_CHECK(out.size() > 0, "[data] ", path, ": no records");
  return out;
}

DataSplit split_validation(const TokenSequences& all, double fraction, uint64_t seed) {
  GP_CHECK(fraction >= 0 && fraction < 1, "[data] validation fraction must be in [0, 1), got ", fraction);
  const int64_t n = all.size();
  int64_t nv = int64_t(double(n) * fraction);
  if (fraction > 0 && nv == 0 && n >= 2) nv = 1;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, seed ^ 0x5eed0f5a11dull);
  std::vector<bool> is_val(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < nv; ++i) is_val[size_t(order[size_t(i)])] = true;
  DataSplit s;
  s.train.T = s.validation.T = all.T;
  for (int64_t i = 0; i < n; ++i)
    (is_val[size_t(i)] ? s.validation : s.train).append(all.tokens_of(i), all.targets_of(i));
  return s;
}

DataLoader::DataLoader(const TokenSequences& data, int64_t batch, uint64_t seed, bool shuffle)
    : data_(data), batch_(batch), seed_(seed), shuffle_(shuffle) {
  GP_CHECK(batch > 0, "[data] batch size must be positive, got ", batch);
  GP_CHECK(data.size() >= batch, "[data] ", data.size(), " sequences are fewer than one batch of ", batch);
}

int64_t DataLoader::batches_per_epoch() const { return data_.size() / batch_; }

void DataLoader::make_order() {
  if (order_epoch_ == pos_.epoch) return;
  order_.resize(size_t(data_.size()));
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) shuffle(order_, seed_ * 0x9E3779B97F4A7C15ull + uint64_t(pos_.epoch));
  order_epoch_ = pos_.epoch;
}

void DataLoader::seek(DataPosition p) {
  GP_CHECK(p.epoch >= 0 && p.index >= 0 && p.index <= data_.size(), "[data] position (epoch ", p.epoch,
           ", index ", p.index, ") is outside data of ", data_.size(), " sequences");
  pos_ = p;
}

void DataLoader::next(std::vector<int32_t>& tokens, std::vector<int32_t>& targets) {
  if (pos_.index + batch_ > data_.size()) pos_ = {pos_.epoch + 1, 0};
  make_order();
  const size_t T = size_t(data_.T);
  tokens.resize(size_t(batch_) * T);
  targets.resize(size_t(batch_) * T);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t i = order_[size_t(pos_.index + b)];
    std::copy_n(data_.tokens_of(i).data(), T, tokens.data() + size_t(b) * T);
    std::copy_n(data_.targets_of(i).data(), T, targets.data() + size_t(b) * T);
  }
  pos_.index += batch_;
}

}  // namespace genperf

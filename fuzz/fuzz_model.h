// The model-level half of the fuzz targets that load whole checkpoints: build the model from what
// loaded and, when it is small enough to run quickly, run one forward pass of two tokens (the
// first and the last id), checking the logits' shape. Bad input must end in a genperf::Error.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/llama.h"

namespace genperf_fuzz {

inline void build_and_run(genperf::Checkpoint ck) {
  const genperf::LlamaConfig& c = ck.config;
  const bool small = c.vocab_size <= 4096 && c.hidden_size <= 256 && c.num_hidden_layers <= 4 &&
                     c.intermediate_size <= 1024 && c.num_attention_heads <= 16;
  genperf::LlamaModel m(std::move(ck));
  if (!small) return;
  genperf::Session s(m, 4);
  const std::vector<int32_t> tokens = {0, int32_t(m.config().vocab_size - 1)};
  const genperf::Tensor logits = m.forward(s, tokens, genperf::LogitsFor::All);
  if (logits.size(0) != 2 || logits.size(1) != m.config().vocab_size) __builtin_trap();
  if (m.tokenizer()) (void)m.tokenizer()->decode(m.tokenizer()->encode("fuzz me", true));
}

}  // namespace genperf_fuzz

// Fuzzes loading a Hugging Face model directory end to end: config.json and model.safetensors
// together (BF16/F16/F32 tensors, genperf's quantized blocks described in the safetensors
// metadata, FP8 with its scale tensors), the tensors checked against the configuration, the model
// built, and one forward pass of two tokens when it is small enough to run quickly.
// Input: a 2-byte little-endian length n, then n bytes of config.json, then model.safetensors.
// Every outcome is logits or a genperf::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/llama.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(size_t(data[0]) | size_t(data[1]) << 8, size - 2);
  const std::string dir = genperf_fuzz::scratch_dir();
  genperf_fuzz::write_file(dir + "/config.json", data + 2, n);
  genperf_fuzz::write_file(dir + "/model.safetensors", data + 2 + n, size - 2 - n);
  try {
    genperf::Checkpoint ck = genperf::load_checkpoint(dir, false);
    const genperf::LlamaConfig& c = ck.config;
    const bool small = c.vocab_size <= 4096 && c.hidden_size <= 256 && c.num_hidden_layers <= 4 &&
                       c.intermediate_size <= 1024 && c.num_attention_heads <= 16;
    genperf::LlamaModel m(std::move(ck));
    if (!small) return 0;
    genperf::Session s(m, 4);
    const std::vector<int32_t> tokens = {0, int32_t(m.config().vocab_size - 1)};
    const genperf::Tensor logits = m.forward(s, tokens, genperf::LogitsFor::All);
    if (logits.size(0) != 2 || logits.size(1) != m.config().vocab_size) __builtin_trap();
  } catch (const genperf::Error&) {
  }
  return 0;
}

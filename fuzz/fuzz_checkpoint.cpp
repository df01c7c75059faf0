// Fuzzes loading a GGUF model end to end, as `genperf eval` or `bench infer` loads a quantized
// file a user already has: the GGUF reader, the llama.* configuration and its checks, the tensor
// shapes and types against the configuration, the tokenizer from tokenizer.ggml.*, the model
// built from the tensors (weights packed for the kernels), and then one forward pass of two tokens
// when the model is small enough to run quickly. Every outcome is logits or a genperf::Error.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/llama.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = genperf_fuzz::scratch_file(data, size, ".gguf");
  try {
    genperf::Checkpoint ck = genperf::load_checkpoint(path);
    const genperf::LlamaConfig& c = ck.config;
    const bool small = c.vocab_size <= 4096 && c.hidden_size <= 256 && c.num_hidden_layers <= 4 &&
                       c.intermediate_size <= 1024 && c.num_attention_heads <= 16;
    genperf::LlamaModel m(std::move(ck));
    if (!small) return 0;
    genperf::Session s(m, 4);
    const std::vector<int32_t> tokens = {0, int32_t(m.config().vocab_size - 1)};
    const genperf::Tensor logits = m.forward(s, tokens, genperf::LogitsFor::All);
    if (logits.size(0) != 2 || logits.size(1) != m.config().vocab_size) __builtin_trap();
    if (m.tokenizer()) (void)m.tokenizer()->decode(m.tokenizer()->encode("fuzz me", true));
  } catch (const genperf::Error&) {
  }
  return 0;
}

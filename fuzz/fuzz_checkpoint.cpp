// Fuzzes loading a GGUF model end to end, as `genperf eval` or `bench infer` loads a quantized
// file a user already has: the GGUF reader, the llama.* configuration and its checks, the tensor
// shapes and types against the configuration, the tokenizer from tokenizer.ggml.*, the model
// built from the tensors (weights packed for the kernels), and then one forward pass of two tokens
// when the model is small enough to run quickly. Every outcome is logits or a genperf::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "fuzz_model.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = genperf_fuzz::scratch_file(data, size, ".gguf");
  try {
    genperf_fuzz::build_and_run(genperf::load_checkpoint(path));
  } catch (const genperf::Error&) {
  }
  return 0;
}

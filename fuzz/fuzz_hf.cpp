// Fuzzes loading a Hugging Face model directory end to end: config.json and model.safetensors
// together (BF16/F16/F32 tensors, genperf's quantized blocks described in the safetensors
// metadata, FP8 with its scale tensors), the tensors checked against the configuration, the model
// built, and one forward pass of two tokens when it is small enough to run quickly.
// Input: a 2-byte little-endian length n, then n bytes of config.json, then model.safetensors.
// Every outcome is logits or a genperf::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "fuzz_model.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(size_t(data[0]) | size_t(data[1]) << 8, size - 2);
  const std::string dir = genperf_fuzz::scratch_dir();
  genperf_fuzz::write_file(dir + "/config.json", data + 2, n);
  genperf_fuzz::write_file(dir + "/model.safetensors", data + 2 + n, size - 2 - n);
  try {
    genperf_fuzz::build_and_run(genperf::load_checkpoint(dir, false));
  } catch (const genperf::Error&) {
  }
  return 0;
}

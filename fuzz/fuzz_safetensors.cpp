// Fuzzes the safetensors reader on bytes held in an exactly sized buffer, so that AddressSanitizer
// catches any read past the end; every tensor that comes back is read in full.
#include <cstddef>
#include <cstdint>

#include "genperf/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const genperf::SafetensorsFile f =
        genperf::read_safetensors(genperf::MmapFile::from_bytes("fuzz.safetensors", data, size));
    volatile uint8_t sum = 0;
    for (const auto& [name, t] : f.tensors)
      for (size_t i = 0; i < t.nbytes(); ++i) sum = uint8_t(sum + t.data<uint8_t>()[i]);
  } catch (const genperf::Error&) {
  }
  return 0;
}

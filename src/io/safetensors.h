// safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// tensor bytes (offsets relative to the end of the header). Reading validates every field against
// the file before any tensor is made; tensors borrow the mapped file (zero-copy).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genperf/tensor.h"
#include "io/mmap_file.h"

namespace genperf {

struct SafetensorsFile {
  std::shared_ptr<MmapFile> file;
  std::vector<std::string> names;         // header order
  std::map<std::string, Tensor> tensors;  // F32, F16, BF16, I32, FP8 or quantized; shapes outermost first
  std::map<std::string, std::string> metadata;
};

// genperf's quantized formats (Q4_0, Q4_K, F8_E4M3_B32, ...), which safetensors has no dtype
// for, are stored as U8 tensors of their bytes, shape [d0, ..., row bytes], with metadata
// "genperf.quant.<name>" = "<format> <d0> ... <d_last>" giving the format and the logical shape.
//
// Reads `path`; errors are genperf::Error "[safetensors] <path>: ...". Dtypes other than F32, F16,
// BF16, I32, F8_E4M3, F8_E5M2 and U8 described by genperf.quant metadata are an error naming the
// tensor; the U8
// bytes must match the format and logical shape exactly. A rank-0 (scalar) tensor reads as shape [1].
SafetensorsFile read_safetensors(const std::string& path);
// The same checks on bytes already in memory (fuzzers, tests).
SafetensorsFile read_safetensors(std::shared_ptr<MmapFile> file);

// Writes tensors in the given order, contiguous, after a header padded with spaces to a multiple
// of 8 bytes; path + ".tmp" first, renamed when complete. Quantized tensors go as U8 bytes with
// their genperf.quant metadata entry.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of a genperf type ("F32", "F16", "BF16", "I32", "F8_E4M3",
// "F8_E5M2"); Error for others.
const char* safetensors_dtype_name(DType t);

}  // namespace genperf

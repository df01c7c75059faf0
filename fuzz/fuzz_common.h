// Helpers shared by the fuzz targets: a per-process scratch file for the readers that take a
// path (the model loaders and the JSONL readers read files, as users give them).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace genperf_fuzz {

// Writes `data` to this process's scratch file (under $TMPDIR, else /tmp) and returns its path;
// the same path every call, so a run leaves one file behind at most.
inline std::string scratch_file(const uint8_t* data, size_t size, const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/genperf-fuzz-" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the machine, not the input: stop rather than fuzz nothing
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

}  // namespace genperf_fuzz

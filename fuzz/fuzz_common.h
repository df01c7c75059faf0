// Helpers shared by the fuzz targets: per-process scratch files and a scratch directory, for the
// readers that take a path (the model loaders and the JSONL readers read files, as users give
// them). The same paths serve every call, so a run leaves one of each behind at most.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace genperf_fuzz {

// $TMPDIR (else /tmp) + "/genperf-fuzz-<pid>" + suffix.
inline std::string scratch_path(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/genperf-fuzz-" + std::to_string(getpid()) + suffix;
}

// Writes `data` to `path`, replacing what was there.
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the machine, not the input: stop rather than fuzz nothing
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

// Writes `data` to this process's scratch file and returns its path.
inline std::string scratch_file(const uint8_t* data, size_t size, const char* suffix) {
  const std::string path = scratch_path(suffix);
  write_file(path, data, size);
  return path;
}

// This process's scratch directory, created on first use.
inline std::string scratch_dir() {
  static const std::string path = [] {
    std::string p = scratch_path(".d");
    if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) __builtin_trap();
    return p;
  }();
  return path;
}

}  // namespace genperf_fuzz

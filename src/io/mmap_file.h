// Files in and out. MmapFile maps a whole file for reading (or holds bytes given in memory, for
// fuzzers and tests) and is shared by the tensors that borrow from it. OutputFile writes under a
// temporary name and renames on commit(), so an error never leaves a partial file behind (for
// small whole files, genperf/fileio.h has write_file_atomic).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genperf/tensor.h"

namespace genperf {

class MmapFile {
 public:
  // Maps `path`. The mapping is private copy-on-write: the file is never modified, and a tensor
  // written in place gets its own pages instead of a crash. Errors name the file and errno.
  static std::shared_ptr<MmapFile> open(const std::string& path);
  // A copy of `size` bytes, exactly sized (so sanitizers see any read past the end); `name`
  // stands for the file in error messages.
  static std::shared_ptr<MmapFile> from_bytes(std::string name, const void* data, size_t size);

  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  MmapFile() = default;
  friend Tensor tensor_from_file(const std::shared_ptr<MmapFile>&, size_t, const std::vector<int64_t>&,
                                 DType);

  std::string name_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // munmap on destruction; otherwise delete[] (or nothing when empty)
};

// A tensor over bytes [offset, offset + bytes) of `file`, which the tensor keeps alive. The caller
// has checked that the range lies within the file. Zero-copy, except when the bytes are not
// aligned to the element size (possible in files from other writers): then a copy, since
// kernels may assume aligned elements.
Tensor tensor_from_file(const std::shared_ptr<MmapFile>& file, size_t offset,
                        const std::vector<int64_t>& shape, DType dtype);

class OutputFile {
 public:
  // Opens path + ".tmp" for writing; errors name the file and errno.
  explicit OutputFile(std::string path);
  ~OutputFile();  // removes the temporary file unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void pad_to(size_t alignment, char fill = '\0');  // pads the file size to a multiple
  uint64_t position() const { return pos_; }
  // Flushes, syncs and renames the temporary file to the final path.
  void commit();

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  uint64_t pos_ = 0;
};

// The tensor's bytes in row-major order: itself when contiguous on the CPU, else a compact copy.
Tensor contiguous_cpu(const Tensor& t, const std::string& context);

}  // namespace genperf

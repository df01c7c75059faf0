// Tensor: a typed, strided view over shared storage. Shapes are given outermost first
// (PyTorch order: a weight is [out, in]); strides are in bytes, so that rows of block-quantized
// formats fit the same description (the innermost dimension is always contiguous, in blocks).
// Storage is reference counted and may own aligned heap memory or borrow a memory-mapped file.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "genperf/dtype.h"

namespace genperf {

enum class Device : uint8_t { CPU = 0, CUDA };
const char* device_name(Device d);

// Memory of a device other than the CPU, which its backend provides (src/backend/cuda/ registers
// the CUDA one when genperf is built with it). alloc returns zeroed memory or throws.
struct DeviceAllocator {
  void* (*alloc)(size_t bytes) = nullptr;
  void (*free)(void* p) = nullptr;
};
void set_device_allocator(Device d, DeviceAllocator a);

constexpr int kMaxDims = 4;

// How a storage's bytes are ordered. kRows is the dtype's own row-major layout (the files' one);
// kRows16 is the CPU backend's for linear weights of the block formats: rows interleaved in
// groups of 16, field by field (src/backend/cpu/qpack.h). A kRows16 tensor is only a linear's
// weight: the ops that read it elsewhere, and copies and conversions, refuse it.
enum class Layout : uint8_t { kRows = 0, kRows16 };

// A block of memory and whatever keeps it alive (a heap allocation, an mmap, a parent buffer).
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::CPU;
  Layout layout = Layout::kRows;
  bool file_backed = false;  // borrowed from a read-only file mapping (its pages can be dropped)
  std::shared_ptr<void> owner;

  static std::shared_ptr<Storage> allocate(size_t bytes, Device device = Device::CPU);
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, std::shared_ptr<void> owner);
};

class Tensor {
 public:
  Tensor() = default;

  // New contiguous CPU tensor, zero-filled, 64-byte aligned.
  static Tensor zeros(std::initializer_list<int64_t> shape, DType dtype = DType::F32);
  static Tensor zeros(const std::vector<int64_t>& shape, DType dtype = DType::F32);
  // Contiguous tensor over existing memory; `owner` keeps that memory alive.
  static Tensor wrap(void* data, const std::vector<int64_t>& shape, DType dtype,
                     std::shared_ptr<void> owner);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return storage_ ? storage_->layout : Layout::kRows; }
  Device device() const { return storage_ ? storage_->device : Device::CPU; }
  int ndim() const { return ndim_; }
  int64_t size(int d) const { return shape_[norm_dim(d)]; }
  size_t stride(int d) const { return strides_[norm_dim(d)]; }  // bytes
  std::vector<int64_t> shape() const { return {shape_.begin(), shape_.begin() + ndim_}; }
  int64_t numel() const;
  size_t nbytes() const { return bytes_for(dtype_, numel()); }  // bytes if contiguous
  bool is_contiguous() const;
  std::string describe() const;  // "bf16[32000, 768]"

  void* raw() const { return static_cast<char*>(storage_->data) + offset_; }
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }
  // Pointer to the start of row i of a 2-D tensor (or of the flattened leading dims).
  template <typename T = void>
  T* row(int64_t i) const {
    return reinterpret_cast<T*>(static_cast<char*>(raw()) + size_t(i) * strides_[ndim_ >= 2 ? ndim_ - 2 : 0]);
  }

  // Views share storage.
  Tensor view(const std::vector<int64_t>& shape) const;   // requires contiguity
  Tensor slice(int dim, int64_t start, int64_t length) const;
  Tensor transpose(int d0, int d1) const;  // not for dim 'innermost' of block formats
  Tensor clone() const;                    // contiguous deep copy
  // Copy converting between types: converts through f32 with the traits table.
  Tensor to(DType dtype) const;
  void copy_from(const Tensor& src);  // same shape; converts types

  const std::shared_ptr<Storage>& storage() const { return storage_; }

 private:
  int norm_dim(int d) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  DType dtype_ = DType::F32;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<size_t, kMaxDims> strides_{};
};

}  // namespace genperf

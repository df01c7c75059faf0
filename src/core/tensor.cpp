#include "genperf/tensor.h"

#include <cstdlib>
#include <cstring>

#include "genperf/error.h"

namespace genperf {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

namespace {
DeviceAllocator& device_allocator(Device d) {
  static DeviceAllocator table[2];
  return table[size_t(d) & 1];
}
}  // namespace

void set_device_allocator(Device d, DeviceAllocator a) { device_allocator(d) = a; }

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  auto s = std::make_shared<Storage>();
  if (device != Device::CPU) {
    const DeviceAllocator a = device_allocator(device);
    GP_CHECK(a.alloc != nullptr, "[tensor] allocation on ", device_name(device),
             ": this build has no ", device_name(device), " backend (configure with -DGENPERF_CUDA=ON)");
    void* p = a.alloc(bytes);
    s->data = p;
    s->bytes = bytes;
    s->device = device;
    s->owner = std::shared_ptr<void>(p, a.free);
    return s;
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  GP_CHECK(p != nullptr, "[tensor] out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  s->data = p;
  s->bytes = bytes;
  s->owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, std::shared_ptr<void> owner) {
  auto s = std::make_shared<Storage>();
  s->data = data;
  s->bytes = bytes;
  s->owner = std::move(owner);
  return s;
}

namespace {
void set_contiguous(const std::vector<int64_t>& shape, DType dtype, int& ndim,
                    std::array<int64_t, kMaxDims>& dims, std::array<size_t, kMaxDims>& strides) {
  GP_CHECK(!shape.empty() && shape.size() <= size_t(kMaxDims), "[tensor] rank ", shape.size(),
           " not in 1..", kMaxDims);
  ndim = int(shape.size());
  for (int d = 0; d < ndim; ++d) {
    GP_CHECK(shape[d] >= 0, "[tensor] negative dimension ", shape[d]);
    dims[d] = shape[d];
  }
  const auto& tr = traits(dtype);
  strides[ndim - 1] = tr.block_size == 1 ? tr.block_bytes : 0;  // blocks: no per-element stride
  size_t row = bytes_for(dtype, dims[ndim - 1]);
  for (int d = ndim - 2; d >= 0; --d) {
    strides[d] = row;
    row *= size_t(dims[d]);
  }
}
}  // namespace

Tensor Tensor::zeros(std::initializer_list<int64_t> shape, DType dtype) {
  return zeros(std::vector<int64_t>(shape), dtype);
}

Tensor Tensor::zeros(const std::vector<int64_t>& shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  set_contiguous(shape, dtype, t.ndim_, t.shape_, t.strides_);
  t.storage_ = Storage::allocate(t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, const std::vector<int64_t>& shape, DType dtype,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  set_contiguous(shape, dtype, t.ndim_, t.shape_, t.strides_);
  t.storage_ = Storage::borrow(data, t.nbytes(), std::move(owner));
  return t;
}

int Tensor::norm_dim(int d) const {
  const int n = d < 0 ? d + ndim_ : d;
  GP_CHECK(n >= 0 && n < ndim_, "[tensor] dimension ", d, " out of range for ", describe());
  return n;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim_; ++d) n *= shape_[d];
  return ndim_ == 0 ? 0 : n;
}

bool Tensor::is_contiguous() const {
  if (ndim_ == 0) return true;
  const auto& tr = traits(dtype_);
  if (tr.block_size == 1 && strides_[ndim_ - 1] != tr.block_bytes) return false;
  size_t expect = bytes_for(dtype_, shape_[ndim_ - 1]);
  for (int d = ndim_ - 2; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expect) return false;
    expect *= size_t(shape_[d]);
  }
  return true;
}

std::string Tensor::describe() const {
  std::string s = cat(dtype_name(dtype_), "[");
  for (int d = 0; d < ndim_; ++d) s += cat(d ? ", " : "", shape_[d]);
  return s + "]";
}

Tensor Tensor::view(const std::vector<int64_t>& shape) const {
  GP_CHECK(is_contiguous(), "[tensor] view of non-contiguous ", describe());
  Tensor t;
  t.dtype_ = dtype_;
  set_contiguous(shape, dtype_, t.ndim_, t.shape_, t.strides_);
  GP_CHECK(t.numel() == numel(), "[tensor] view ", t.describe(), " of ", describe(),
           ": element counts differ");
  t.storage_ = storage_;
  t.offset_ = offset_;
  return t;
}

Tensor Tensor::slice(int dim, int64_t start, int64_t length) const {
  const int d = norm_dim(dim);
  GP_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d], "[tensor] slice [", start,
           ", ", start + length, ") out of range for dimension ", d, " of ", describe());
  GP_CHECK(layout() == Layout::kRows, "[tensor] slice of ", describe(),
           ": a weight packed for the CPU kernels (rows interleaved) has no row views");
  Tensor t = *this;
  if (d == ndim_ - 1) {
    const int64_t bs = traits(dtype_).block_size;
    GP_CHECK(start % bs == 0, "[tensor] slice of ", describe(), " must start on a block boundary");
    t.offset_ += bytes_for(dtype_, start);
  } else {
    t.offset_ += size_t(start) * strides_[d];
  }
  t.shape_[d] = length;
  return t;
}

Tensor Tensor::transpose(int d0, int d1) const {
  const int a = norm_dim(d0), b = norm_dim(d1);
  GP_CHECK(traits(dtype_).block_size == 1 || (a != ndim_ - 1 && b != ndim_ - 1),
           "[tensor] cannot transpose the innermost dimension of block format ", describe());
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = Tensor::zeros(shape(), dtype_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  Tensor t = Tensor::zeros(shape(), dtype);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  GP_CHECK(src.shape() == shape(), "[tensor] copy from ", src.describe(), " into ", describe(),
           ": shapes differ");
  GP_CHECK(src.layout() == Layout::kRows && layout() == Layout::kRows, "[tensor] copy from ",
           src.describe(), " into ", describe(),
           ": a weight packed for the CPU kernels (rows interleaved) is read by linear only");
  if (numel() == 0) return;
  const auto& st = traits(src.dtype_);
  const auto& dt = traits(dtype_);
  const int64_t inner = shape_[ndim_ - 1];
  const bool plain = st.block_size == 1 && dt.block_size == 1;
  std::vector<float> buf(plain ? 1 : size_t(inner));
  int64_t outer = numel() / inner;
  // Walk all leading indices; elements within the last dim use element strides when plain.
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t o = 0; o < outer; ++o) {
    size_t so = src.offset_, doff = offset_;
    for (int d = 0; d < ndim_ - 1; ++d) {
      so += size_t(idx[d]) * src.strides_[d];
      doff += size_t(idx[d]) * strides_[d];
    }
    const char* sp = static_cast<const char*>(src.storage_->data) + so;
    char* dp = static_cast<char*>(storage_->data) + doff;
    if (plain) {
      const size_t ss = src.strides_[ndim_ - 1], ds = strides_[ndim_ - 1];
      if (src.dtype_ == dtype_ && ss == st.block_bytes && ds == dt.block_bytes) {
        std::memcpy(dp, sp, size_t(inner) * st.block_bytes);
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          float v;
          st.to_f32(sp + size_t(i) * ss, &v, 1);
          dt.from_f32(&v, dp + size_t(i) * ds, 1);
        }
      }
    } else if (src.dtype_ == dtype_) {
      std::memcpy(dp, sp, bytes_for(dtype_, inner));
    } else {
      st.to_f32(sp, buf.data(), inner);
      dt.from_f32(buf.data(), dp, inner);
    }
    for (int d = ndim_ - 2; d >= 0; --d) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace genperf

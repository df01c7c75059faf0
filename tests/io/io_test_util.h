// Helpers of the io tests: random tensors, byte-exact comparison, writing raw bytes.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "genperf/tensor.h"

namespace genperf::testing {

// A contiguous tensor of random bits (NaNs and all: the tests compare bytes, not values).
inline Tensor random_bits(const std::vector<int64_t>& shape, DType dtype, std::mt19937& rng) {
  Tensor t = Tensor::zeros(shape, dtype);
  auto* p = t.data<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = uint8_t(rng());
  return t;
}

// Random values of a typical weight scale, stored in `dtype`.
inline Tensor random_weights(const std::vector<int64_t>& shape, DType dtype, std::mt19937& rng) {
  Tensor f = Tensor::zeros(shape, DType::F32);
  std::normal_distribution<float> n(0.f, 0.5f);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = n(rng);
  return dtype == DType::F32 ? f : f.to(dtype);
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.is_contiguous() ? a : a.clone();
  const Tensor cb = b.is_contiguous() ? b : b.clone();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}


// Little-endian byte building for hand-made files.
struct Bytes {
  std::string s;
  template <typename T>
  Bytes& put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Bytes& str(const std::string& v) {
    put(uint64_t(v.size()));
    s += v;
    return *this;
  }
  Bytes& raw(const std::string& v) {
    s += v;
    return *this;
  }
  Bytes& pad(size_t alignment) {
    s.append((alignment - s.size() % alignment) % alignment, '\0');
    return *this;
  }
};

}  // namespace genperf::testing

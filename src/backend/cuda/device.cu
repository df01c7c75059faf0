// Devices and memory of the CUDA backend (cuda_runtime.h). Compiled by nvcc, only when genperf is
// configured with -DGENPERF_CUDA=ON.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "backend/cuda/cuda_runtime.h"
#include "genperf/error.h"

namespace genperf::cuda {
namespace {

void check(cudaError_t e, const char* call) {
  GP_CHECK(e == cudaSuccess, "[cuda] ", call, " failed: ", cudaGetErrorName(e), " (",
           cudaGetErrorString(e), ")");
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string describe_device(int i) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
  int driver = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  char buf[64];
  std::snprintf(buf, sizeof buf, ", sm_%d%d, %.1f GiB, driver %d.%d", p.major, p.minor,
                double(p.totalGlobalMem) / double(1ull << 30), driver / 1000, driver % 1000 / 10);
  return std::string(p.name) + buf;
}

void* device_alloc(size_t bytes) {
  GP_CHECK(device_count() > 0, "[cuda] allocation of ", bytes, " bytes: no CUDA device is visible");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

void device_free(void* p) { (void)cudaFree(p); }

}  // namespace genperf::cuda

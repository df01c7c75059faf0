// The CUDA backend's table (ops/backend.h). It exists in every build, so that an op on a CUDA
// tensor fails by name ("[linear] has no CUDA kernel") wherever a kernel is missing, instead of
// reaching CPU code with a device pointer. Filling the backend means filling this table; its
// kernels live in .cu files beside it, compiled by nvcc when genperf is configured with
// -DGENPERF_CUDA=ON (GENPERF_HAVE_CUDA), which also registers device memory with core.
#include "ops/backend.h"

#ifdef GENPERF_HAVE_CUDA
#include "backend/cuda/cuda_runtime.h"
#endif

namespace genperf::ops {

#ifdef GENPERF_HAVE_CUDA
namespace {
// Device memory for Storage::allocate(bytes, Device::CUDA), registered at start-up: this file is
// always linked, since ops::backend refers to cuda_backend().
[[maybe_unused]] const bool kRegistered = [] {
  set_device_allocator(Device::CUDA, {cuda::device_alloc, cuda::device_free});
  return true;
}();
}  // namespace
#endif

const Backend& cuda_backend() {
  static const Backend table = [] {
    Backend b;
    b.name = "CUDA";
    // No op has a CUDA kernel yet: every entry stays empty and names itself when called.
    return b;
  }();
  return table;
}

}  // namespace genperf::ops

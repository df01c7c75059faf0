// The CUDA runtime as the backend uses it (device.cu, compiled by nvcc): devices and memory.
// Errors are genperf::Error naming the CUDA call and its message.
#pragma once
#include <cstddef>
#include <string>

namespace genperf::cuda {

// Devices visible to the process (0 when the driver finds none).
int device_count();
// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, driver 13.0" for device i.
std::string describe_device(int i);
// Zeroed device memory on the current device; throws when no device or memory is available.
void* device_alloc(size_t bytes);
void device_free(void* p);

}  // namespace genperf::cuda

#include "gpu/device_probe.hpp"

#include <cuda_runtime.h>

namespace troupe::gpu {

device_probe probe_devices() {
  device_probe out;
  int n = -1;
  // Without a driver this returns cudaErrorInsufficientDriver and leaves n
  // unwritten: trust the status, not n.
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    out.error = cudaGetErrorString(status);
    return out;
  }
  if (n <= 0) {
    out.error = "no CUDA device";
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
      continue;
    out.names.push_back(std::string{prop.name} + " (sm_"
                        + std::to_string(prop.major)
                        + std::to_string(prop.minor) + ")");
  }
  out.count = static_cast<int>(out.names.size());
  if (out.count == 0)
    out.error = "no CUDA device answered cudaGetDeviceProperties";
  return out;
}

} // namespace troupe::gpu

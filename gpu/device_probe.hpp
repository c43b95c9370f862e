// Which CUDA devices this process can use. A plain C++ boundary: callers
// outside gpu/ never see a CUDA header.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <string>
#include <vector>

namespace troupe::gpu {

struct device_probe {
  int count = 0;                  ///< usable devices; 0 on any error
  std::string error;              ///< why none, from cudaGetErrorString
  std::vector<std::string> names; ///< "NVIDIA H100 80GB HBM3 (sm_90)"
};

/// Asks the CUDA runtime for its devices. Never throws or aborts: without a
/// driver or a device it returns count 0 and the runtime's reason.
device_probe probe_devices();

} // namespace troupe::gpu

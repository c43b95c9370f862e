// What libtroupe_cuda.so, the GPU backend as a module, offers the process
// that loads it (models/cuda_module_loader.cpp). The module holds gpu/ and
// links CUDA's runtime and cuBLAS; a program links neither, so a process
// that trains on the CPU never maps them (cuBLAS alone adds 67 MB to a
// process's RSS when it is loaded).
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <memory>

#include "caf/expected.hpp"
#include "gpu/device_probe.hpp"
#include "runtime/compute/backend.hpp"

namespace troupe::gpu {

/// The module's table. C++ types cross the boundary, so a module is only
/// used by the build that made it: `build_token` must equal the loader's
/// TROUPE_BUILD_TOKEN.
struct cuda_module {
  const char* version;     ///< TROUPE_VERSION
  const char* build_token; ///< TROUPE_BUILD_TOKEN
  device_probe (*probe)();
  caf::expected<std::unique_ptr<compute_backend>> (*make_backend)(int device);
};

/// The one symbol the module exports (gpu/cuda_module.map): a function
/// returning its table.
inline constexpr const char* cuda_module_entry = "troupe_cuda_module";
using cuda_module_entry_fn = const cuda_module* (*)();

} // namespace troupe::gpu

// Finds and opens libtroupe_cuda.so (gpu/cuda_module.hpp) the first time a
// process asks for a GPU; built only with CUDA.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "the GPU module exists only in builds with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <string>

#include "gpu/cuda_module.hpp"

namespace troupe {

/// The GPU module, or why it cannot be used.
struct cuda_module_load {
  const gpu::cuda_module* module = nullptr;
  std::string path;  ///< the file opened, "" when none was found
  std::string error; ///< "" when module is set
};

/// Opens the module once per process: the file that $TROUPE_CUDA_MODULE
/// names; else, for a program that runs from its build tree, the build
/// tree's; else the installed one (<libdir>/troupe/modules/), found from
/// the folder of the installed program or Python module, or under the
/// configured prefix. The handle stays open for the life of the process.
const cuda_module_load& load_cuda_module();

} // namespace troupe

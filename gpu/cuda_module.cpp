// The entry point of libtroupe_cuda.so (gpu/cuda_module.hpp).
#include "gpu/cuda_module.hpp"

#include "gpu/gpu_backend.hpp"

namespace troupe::gpu {

namespace {

caf::expected<std::unique_ptr<compute_backend>> make_any_backend(int device) {
  auto made = make_gpu_backend(device);
  if (!made)
    return made.error();
  return std::unique_ptr<compute_backend>{std::move(*made)};
}

const cuda_module module_table{TROUPE_VERSION, TROUPE_BUILD_TOKEN,
                               &probe_devices, &make_any_backend};

} // namespace

} // namespace troupe::gpu

extern "C" const troupe::gpu::cuda_module* troupe_cuda_module() {
  return &troupe::gpu::module_table;
}

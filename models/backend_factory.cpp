#include "models/backend_factory.hpp"

#include "runtime/base/build_config.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/base/errc.hpp"
#if TROUPE_HAVE_CUDA
#include "models/cuda_module_loader.hpp"
#endif

namespace troupe {

namespace {

/// Why `device` (a GPU) cannot be used here, or "" when it can.
std::string gpu_problem(const device_spec& device) {
#if TROUPE_HAVE_CUDA
  const auto& loaded = load_cuda_module();
  if (loaded.module == nullptr)
    return device.to_string() + " was asked for, but " + loaded.error;
  auto probe = loaded.module->probe();
  if (probe.count == 0)
    return device.to_string()
           + " was asked for, but no CUDA device is "
             "usable here: "
           + probe.error;
  if (device.index >= probe.count)
    return device.to_string() + " was asked for, but this machine has "
           + std::to_string(probe.count) + " CUDA device"
           + (probe.count == 1 ? "" : "s")
           + " (gpu:0 to gpu:" + std::to_string(probe.count - 1) + ")";
  return "";
#else
  return device.to_string()
         + " was asked for, but this troupe was built "
           "without CUDA (configure with CUDA's nvcc found to build gpu/)";
#endif
}

} // namespace

caf::expected<std::unique_ptr<compute_backend>>
make_backend(const device_spec& device, int threads) {
  if (!device.is_gpu()) {
    try {
      return make_cpu_backend(threads);
    } catch (const std::exception& e) {
      return make_error(errc::backend_unavailable, e.what());
    }
  }
#if TROUPE_HAVE_CUDA
  // The module's make_backend checks the device itself (and says why it
  // is missing); the start-up check already ran gpu_problem's probe.
  const auto& loaded = load_cuda_module();
  if (loaded.module == nullptr)
    return make_error(errc::backend_unavailable, gpu_problem(device));
  return loaded.module->make_backend(device.index);
#else
  return make_error(errc::backend_unavailable, gpu_problem(device));
#endif
}

caf::error check_device(const device_spec& device, const std::string& where) {
  if (!device.is_gpu())
    return caf::none;
  if (auto problem = gpu_problem(device); !problem.empty())
    return make_error(errc::invalid_config, where + ": " + problem);
  return caf::none;
}

} // namespace troupe

// Which compute backend a worker gets: the only place outside gpu/ that
// knows whether troupe was built with CUDA.
#pragma once

#include <memory>
#include <string>

#include "caf/error.hpp"
#include "caf/expected.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// A backend on `device`: the CPU backend on `threads` OpenBLAS threads, or
/// the GPU backend. errc::backend_unavailable naming the reason when the
/// device cannot be used here (a build without CUDA, no such GPU, no
/// driver); never aborts.
caf::expected<std::unique_ptr<compute_backend>>
make_backend(const device_spec& device, int threads);

/// For a process about to start workers: errc::invalid_config
/// "<where>: <reason>" when `device` cannot be used in this process, so a
/// GPU asked for on a machine without one is a start-up error rather than
/// a worker that fails and is restarted until the restart limit.
/// `where` names the setting, e.g. "run.json: /training/device".
caf::error check_device(const device_spec& device, const std::string& where);

} // namespace troupe

// The device a process's workers compute on, as the flags and the config
// file say, checked before anything starts.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "caf/error.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// Adds --device to `app`: "cpu", "gpu" or "gpu:N", checked while the
/// command line is parsed, so a malformed value is a usage error (exit 2,
/// "--device: expected ...") before anything starts; `out` stays empty
/// when the flag is not given.
void add_device_option(CLI::App& app, std::optional<device_spec>& out,
                       const std::string& help);

/// Sets cfg.training.device to the device of this process's workers:
/// `flag` (--device) when given, else the "device" of cluster node `node`
/// when the file gives one, else the file's /training/device. Then checks
/// that the device can be used here, and that the model trains on it (a
/// click model only on the CPU). errc::invalid_config naming the flag or
/// the JSON pointer when it is missing (e.g. "run.json:
/// /cluster/nodes/2/device: gpu:0 was asked for, but no CUDA device is
/// usable here: ...").
caf::error choose_device(run_config& cfg, const std::string& node,
                         const std::optional<device_spec>& flag);

} // namespace troupe

// The device a process's workers compute on, as the flags and the config
// file say, checked before anything starts.
#pragma once

#include <string>

#include "caf/error.hpp"
#include "runtime/config.hpp"

namespace troupe {

/// Sets cfg.training.device to the device of this process's workers:
/// `device_flag` (--device) when not empty, else the "device" of cluster
/// node `node` when the file gives one, else the file's /training/device.
/// Then checks that the device can be used here. errc::invalid_config
/// naming the flag or the JSON pointer when the flag is malformed or the
/// device is missing (e.g. "run.json: /cluster/nodes/2/device: gpu:0 was
/// asked for, but no CUDA device is usable here: ...").
caf::error choose_device(run_config& cfg, const std::string& node,
                         const std::string& device_flag);

} // namespace troupe

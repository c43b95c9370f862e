// What troupe-train's --metrics-listen serves: the one-process run as the
// chief's exposition shows a cluster (apps/metrics/prometheus_text), with mode
// "local" and one worker, 0 on node "local".
#pragma once

#include <string>

#include "models/trainer.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// The exposition of `status` (read under its mutex) for run `cfg`.
std::string local_metrics(local_status& status, const run_config& cfg);

} // namespace troupe

// Time helpers shared by the actors: a monotonic clock in seconds and the
// finite timeout every request between actors carries.
#pragma once

#include <chrono>

#include "caf/timespan.hpp"
#include "runtime/config.hpp"

namespace troupe {

/// Seconds on a monotonic clock (for durations only).
inline double now_seconds() {
  return std::chrono::duration<double>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// The run's request timeout (cluster.request_timeout_ms).
inline caf::timespan request_timeout(const run_config& cfg) {
  return std::chrono::milliseconds(cfg.cluster.request_timeout_ms);
}

/// How long the feeder holds a lease request and a shard a pull that it
/// cannot answer yet, before it answers "ask again": a third of the
/// request timeout, so that the answer always beats the timeout, even on
/// a loaded machine. A waiting worker then sends one small message per
/// hold instead of polling.
inline caf::timespan hold_time(const run_config& cfg) {
  return request_timeout(cfg) / 3;
}

} // namespace troupe

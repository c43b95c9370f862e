// Time helpers shared by the actors: a monotonic clock in seconds and the
// finite timeout every request between actors carries.
#pragma once

#include <chrono>

#include "caf/timespan.hpp"
#include "runtime/config/config.hpp"

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

/// How long a member that lost its chief waits for the answer to one
/// registration before it connects and tries again: a chief back from a
/// freeze may let the first tries run into its old, dead connections, or
/// take a registration on a new connection that it cannot answer on yet.
/// Asking again is harmless: the chief answers a node's own agent that is
/// up already as it did the first time (on_register).
constexpr std::chrono::seconds reregister_patience{2};

/// How long a shard recovery waits for the nodes of lost shards to
/// register again: three unanswered registrations of theirs, then twice
/// the silence after which a link counts as broken. A node that froze or
/// lost its link for a moment (a frozen chief that thaws loses every link
/// at once) is back by then with its shards alive, and they can be kept;
/// a node that died is not, and the shards are restored elsewhere.
inline caf::timespan shard_node_wait(const run_config& cfg) {
  return 3 * caf::timespan{reregister_patience}
         + std::chrono::milliseconds(2 * cfg.cluster.connection_timeout_ms);
}

} // namespace troupe

// Settings every actor system of troupe starts with: the protocol's types,
// troupe's error category and the scheduler. Every app and test fixture
// calls init_config before constructing its actor_system.
#pragma once

#include "caf/actor_system_config.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// Keeps freed memory in the process (keep_freed_memory, before any actor
/// thread starts), registers the protocol's message types and the "troupe"
/// error renderer, and picks the 'sharing' scheduler (2-4x faster
/// request/response than 'stealing' on small machines) with one thread per
/// hardware thread.
void init_config(caf::actor_system_config& cfg);

/// Loads the middleman and turns its heartbeats on: CAF 0.17 leaves them
/// off, and then a frozen or partitioned node is never noticed (a killed
/// one is, at once, from the closed socket).
void init_network(caf::actor_system_config& cfg, const cluster_config& c);

} // namespace troupe

// The parts of troupe-node that run one process of a multi-process
// cluster: a member node (shards and workers placed there by the cluster
// file) and a node joining a running cluster with extra workers.
#pragma once

#include <optional>
#include <string>

#include "apps/launch/link_options.hpp"
#include "caf/error.hpp"
#include "caf/fwd.hpp"
#include "models/external_step.hpp"
#include "apps/launch/stop_signals.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// Settles /training/threads for the `workers_here` workers of this process
/// (compute_threads: "auto" splits the cores among them) and prints the
/// split, so an operator sees at start what computes where, e.g.
/// "threads: 16 cores, 16 actor threads, 4 compute threads per worker (4
/// workers here, auto)", with a warning when the workers' threads
/// together exceed the cores.
void settle_thread_split(caf::actor_system& sys, run_config& cfg,
                         int workers_here);

/// Starts this process's agent on `node`'s address, registers with the
/// chief (waiting up to the config's node_timeout_s for it) and serves
/// until the run ends. Returns no error when the run succeeded or the node
/// left it (the first SIGINT/SIGTERM); else why the run failed, or why the
/// chief was lost (exit_code() makes troupe-node's exit code of it). `guard`:
/// from load_link_guard (null: --insecure). `external`: the step of an external
/// model's workers (the Python module's run_node); troupe-node has none.
caf::error run_member_node(const run_config& cfg, const std::string& node,
                           std::shared_ptr<const link_guard> guard,
                           const link_options& links, stop_signals& signals,
                           external_step_factory external = nullptr);

/// What troupe-node --join was asked for.
struct join_options {
  std::string chief_address; ///< HOST:PORT
  int workers = 1;
  std::string name; ///< this node's name; empty: the chief picks one
  int threads = 0;  ///< 0: the run config's
  std::optional<device_spec> device; ///< --device; empty: the config's
  double timeout_s = 10;
  link_options links; ///< --key, --tls-* and --insecure
  /// The step of an external model's workers (the Python module's
  /// join); troupe-node has none, and refuses to join such a run.
  external_step_factory external;
};

/// Connects to the chief within timeout_s, takes the run config from it,
/// checks the device and adds the workers in this process. Returns what
/// run_member_node does.
caf::error run_joining_node(const join_options& opts, stop_signals& signals);

} // namespace troupe

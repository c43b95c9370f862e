// The chief's process of troupe-node: the whole run in one process (the
// embedded mode) or the chief's node of a cluster file, which runs the run
// and serves the shell and the metrics. The Python module's run_node()
// runs it too, with the user's step and evaluation functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "apps/launch/link_options.hpp"
#include "apps/launch/stop_signals.hpp"
#include "actors/protocol/chief_protocol.hpp"
#include "caf/expected.hpp"
#include "models/external_step.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// What the chief's process runs beyond its config.
struct chief_process {
  std::string config_path; ///< for the first line of the log
  /// The config's JSON text, handed to every node that registers.
  std::string config_text;
  /// The embedded mode's shell address (--listen); unset: none.
  std::optional<std::pair<std::string, uint16_t>> listen;
  /// Where Prometheus metrics are served (--metrics-listen); unset: none.
  std::optional<std::pair<std::string, uint16_t>> metrics_at;
  /// An external model's step and evaluation (the Python module).
  external_step_factory external;
  external_evaluator evaluate;
  /// How the hints say "start over" and "train further" (the Python
  /// module's arguments in Python).
  restart_words words;
};

/// Runs the run of `cfg` as its chief until it ends; the first signal
/// caught by `signals` stops it (final checkpoint and summary). Returns
/// the run's summary, or why it failed (exit_code() makes troupe-node's
/// exit code of it). `guard`: from load_link_guard (null: no links to
/// guard or --insecure).
caf::expected<cluster_summary>
run_chief_node(run_config cfg, chief_process what,
               std::shared_ptr<const link_guard> guard,
               const link_options& links, stop_signals& signals);

} // namespace troupe

// The chief supervisor: sets up and runs one training run on the cluster.
//
// States: idle -> (run) waiting for nodes: spawns the feeder and this
// process's node agent; in a multi-process cluster every other node
// registers its agent (or the node timeout names the missing ones) ->
// starting: initialises parameters (or reads the newest checkpoint), has
// the agents start the shards where the cluster file puts them, joins the
// worker ids on every shard, has the agents start the workers; monitors
// them all -> training: takes worker reports, logs progress, evaluates and
// checkpoints every K steps (a checkpoint pauses the feeder until every
// lease is acked, so all shards are snapshot at one step), restarts failed
// workers through their node's agent (or another node's, when theirs is
// down) under the restart intensity, adds joining workers, answers the
// shell; a lost shard sends it through recovering (every worker stopped;
// the lost shards' nodes waited for; the live shards kept if they hold
// every step since the newest checkpoint, else every shard restored from
// it and the feeder rewound; the workers started again) back to training
// -> finishing (all workers
// done, the target accuracy reached, or "stop"): final evaluation and
// checkpoint, summary, every agent told to finish, reply -> down. A NaN
// loss, a dead feeder, a lost shard without checkpoints, or too many
// restarts end the run with an error reply instead (the agents finish with
// it, so every node exits 1 naming it). The phases are run_phase in
// chief_state.hpp.
//
// A stop (the shell's, or SIGINT/SIGTERM on its process) finishes after
// the steps in flight. A node may leave: its workers finish their steps,
// their leases go back and they are placed again. Nodes that registered
// with a lost chief name its run when they register here: before the
// shards start, this chief takes that run over, keeping the live shards
// when they hold every step since its newest checkpoint (chief_takeover)
// and restoring that checkpoint otherwise.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "actors/protocol/chief_protocol.hpp"
#include "models/external_step.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

class data_server;

struct chief_options {
  run_config cfg;
  /// The config's JSON text, handed to every node that registers.
  std::string config_text;
  std::shared_ptr<const train_test> data;
  std::ostream* log = nullptr; ///< progress lines; null: quiet
  /// The run's id (registrations, checkpoints); empty: a new random one.
  std::string run_id;
  /// Plaintext links beyond loopback (--insecure): every line says so.
  bool insecure_links = false;
  /// This process's data plane (serves the shards placed here to workers
  /// on other nodes); null in the embedded mode.
  std::shared_ptr<data_server> data_plane;
  /// Passed to every worker (see worker_options::fault_hook).
  std::function<void(int32_t, int64_t)> fault_hook;
  /// Passed to this process's agent (see agent_options::external).
  external_step_factory external;
  /// An external model's evaluation (see external_evaluator); null: the
  /// run is not evaluated.
  external_evaluator evaluate;
  /// The embedded mode's shell port (troupe-node --listen): the chief is
  /// published at this host and port (0: any free one) for troupe-shell,
  /// and the log says where. Unset: none. A cluster's chief always
  /// listens on its node's address instead.
  std::optional<std::pair<std::string, uint16_t>> listen;
  /// The key file the shell must be given (--key) to reach `listen`;
  /// empty: the default one, which the shell finds itself.
  std::string shell_key;
  /// Called at the end of a successful run with the final parameters (the
  /// whole flat vector) and every shard's counters; for tests.
  std::function<void(const std::vector<float>&,
                     const std::vector<shard_stats>&)>
    on_finish;
  /// Each metrics record as it is made (metrics_log::set_listener), on
  /// the chief's thread; null: none.
  std::function<void(const std::string&)> on_record;
  /// The words the hints use for starting over and training further.
  restart_words words;
};

struct chief_state;

/// The chief as it runs: its interface, and its own timers. Others hold a
/// chief_actor.
using chief_self_actor = chief_actor::extend<
  // The time for every node to register is up.
  caf::reacts_to<deadline_atom>,
  // The wait of shard recovery G for the nodes of the lost shards is over.
  caf::reacts_to<restore_atom, int64_t>,
  // Worker N, which lost a shard node's data-plane connection in
  // generation G, is restarted unless a shard recovery has started it
  // meanwhile.
  caf::reacts_to<place_atom, int32_t, int64_t, caf::error>,
  // data.follow: the folder of training parts is listed again.
  caf::reacts_to<follow_atom>,
  // A replica that could not be started is tried again.
  caf::reacts_to<replicate_atom>,
  // Node N is lost: the answers still awaited from it are given up
  // (node_answers).
  caf::reacts_to<forget_atom, std::string>>;

chief_self_actor::behavior_type
chief_impl(chief_self_actor::stateful_pointer<chief_state> self,
           chief_options opts);

/// Runs `opts.cfg` and waits for its end. Embedded (no nodes in the
/// config): every actor in `sys`, the chief published at `opts.listen` if
/// given. Otherwise the chief also publishes
/// itself on its node's address and places shards and workers through the
/// agents of the nodes that register. The run's own errors come back as
/// errors. `started` gets the chief's handle as soon as it exists (to send
/// it a stop on a signal).
caf::expected<cluster_summary>
run_cluster(caf::actor_system& sys, chief_options opts,
            const std::function<void(const chief_actor&)>& started = nullptr);

} // namespace troupe

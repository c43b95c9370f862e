// The chief's interface (actors/chief/chief.hpp): the run, the workers'
// reports, the nodes' registrations, and troupe-shell's commands (their
// views and keys in shell_protocol.hpp); and how a run ended.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/protocol/ids.hpp"
#include "actors/protocol/node_agent_protocol.hpp"
#include "actors/protocol/shell_protocol.hpp"
#include "caf/all.hpp"

namespace troupe {

/// How a run ended.
struct cluster_summary {
  int64_t steps = 0; ///< batches trained, all workers together
  double epochs = 0;
  double seconds = 0;
  double examples_per_sec = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  int32_t restarts = 0;
  int64_t version = 0; ///< shard 0's version at the end
  int64_t pushes_accepted = 0, pushes_stale = 0, pushes_refused = 0;
  std::vector<int64_t> epoch_samples; ///< samples trained per epoch
  std::vector<worker_epochs> workers; ///< per worker, per epoch
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_summary& x) {
  return f(caf::meta::type_name("cluster_summary"), x.steps, x.epochs,
           x.seconds, x.examples_per_sec, x.test_accuracy, x.test_loss,
           x.restarts, x.version, x.pushes_accepted, x.pushes_stale,
           x.pushes_refused, x.epoch_samples, x.workers);
}

/// The chief supervisor (actors/chief/chief.hpp).
using chief_actor = caf::typed_actor<
  // Starts the run; replies when it ends, or with the error that ended it.
  caf::replies_to<run_atom>::with<cluster_summary>,
  // A worker's step report.
  caf::reacts_to<report_atom, worker_report>,
  // A primary's news of its replica (shard_actor's replicate): in step at
  // version V, or dropped (V -1); the text says how long the copy took,
  // or why.
  caf::reacts_to<replicate_atom, int32_t, int64_t, std::string>,
  // A node process announces itself. The reply is the node's name (a
  // joining node may come without one) and the run id.
  caf::replies_to<register_atom, node_registration>::with<std::string,
                                                          std::string>,
  // The run config's JSON text, which every node runs.
  caf::replies_to<register_atom>::with<std::string>,
  // Finish after the steps in flight (evaluate, checkpoint, summary), as
  // the shell's "stop" does; the text says who asked ("SIGTERM").
  caf::reacts_to<stop_atom, std::string>,
  // Node N leaves the run: its workers finish their steps and their
  // leases go back; the reply comes once they are all down (an error: it
  // cannot leave, e.g. it holds shards that have nowhere to go).
  caf::replies_to<leave_atom, std::string>::with<bool>,
  // -- troupe-shell (actors/protocol/shell_protocol.hpp; errors leave the run
  // as it is) -- The cluster as the chief sees it; the shards and the feeder
  // are asked for their counters (5 s at most; one that does not answer is
  // down).
  caf::replies_to<stats_atom>::with<cluster_view>,
  // The run id and config digest, from the chief alone (empty before the
  // run starts): a shell's first question, answered without the view's
  // round of the shards and agents.
  caf::replies_to<who_atom>::with<std::string, std::string>,
  // N more workers on a node (empty: the least loaded); their ids, node.
  caf::replies_to<join_atom, int32_t, std::string>::with<std::vector<int32_t>,
                                                         std::string>,
  // Kills a worker or a shard (a fault drill).
  caf::replies_to<kill_atom, actor_ref>::with<bool>,
  // Writes a checkpoint now; replies with its path.
  caf::replies_to<snapshot_atom>::with<std::string>,
  // Writes an export of the tables now (training.export); replies with
  // what it wrote.
  caf::replies_to<export_atom>::with<std::string>,
  // Sets a shard setting on every shard; replies with the value.
  caf::replies_to<tune_atom, tune_key, double>::with<double>,
  // Adds a shard on node N, or drains shard N into the others, while the
  // run trains: leasing pauses while the parameters and table rows move
  // to the new placement, the workers get it, and leasing resumes. The
  // reply says what moved and how long the pause took.
  caf::replies_to<grow_atom, std::string>::with<std::string>,
  caf::replies_to<drain_atom, int32_t>::with<std::string>,
  // Stops, or starts again, handing out batches; replies with "paused".
  caf::replies_to<pause_atom>::with<bool>,
  caf::replies_to<resume_atom>::with<bool>,
  // Finishes after the steps in flight, as SIGTERM does.
  caf::replies_to<stop_atom>::with<bool>>;

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_chief, troupe::type_ids::chief)
  CAF_ADD_TYPE_ID(troupe_chief, (troupe::cluster_summary))
  CAF_ADD_TYPE_ID(troupe_chief, (troupe::actor_ref))
  CAF_ADD_TYPE_ID(troupe_chief, (troupe::tune_key))
  CAF_ADD_TYPE_ID(troupe_chief, (troupe::cluster_view))
  CAF_ADD_TYPE_ID(troupe_chief, (troupe::chief_actor))
CAF_END_TYPE_ID_BLOCK(troupe_chief)
// clang-format on

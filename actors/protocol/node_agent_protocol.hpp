// The node agent's interface (actors/node_agent.hpp), one per process:
// what the chief asks it to start (shard_spawn, worker_spawn), where the
// shards are after they moved (shard_map), the shards a new chief adopts,
// and how a node process announces itself (node_registration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/protocol/feeder_protocol.hpp"
#include "actors/protocol/ids.hpp"
#include "actors/protocol/shard_protocol.hpp"
#include "actors/protocol/worker_protocol.hpp"
#include "caf/all.hpp"
#include "runtime/base/process_usage.hpp"

namespace troupe {

/// What a node agent needs to start a shard: its id, the pushes per sync
/// update (the worker count can change while a run goes on) and its
/// initial state. Everything else comes from the run config that the
/// agent got from the chief.
struct shard_spawn {
  int32_t id = 0;
  int32_t aggregate = 1;
  shard_state_msg state;
  /// A replica of shard `id` (cluster.shard_replicas), which its primary
  /// feeds; its state comes from the primary, not from `state`.
  bool replica = false;
  /// The parts of its slice that buffers hold (param_block::options::
  /// buffers), as begin, end pairs relative to the slice's start.
  std::vector<uint64_t> buffers;
};

/// What a node agent needs to start a worker: its id, the peers it talks
/// to and the shard map (shard i owns [bounds[i], bounds[i+1]) of the flat
/// vector). The chief goes as an untyped pointer: the chief's interface
/// names the agent's, so the agent's cannot name the chief's.
///
/// `data_links[i]` is the "host:port" of the data plane
/// (actors/data_plane/data_link) of the node that holds shard i, empty when the
/// worker reaches that shard as an actor in its own process. The worker's pulls
/// and pushes then go on the data plane's own connection between the two nodes,
/// never as CAF messages: CAF 0.17 routes a message to a node it has no
/// connection to through the node that introduced the handle, i.e. through
/// the chief.
struct worker_spawn {
  int32_t id = 0;
  feeder_actor feeder;
  std::vector<shard_actor> shards;
  std::vector<uint64_t> bounds;
  caf::strong_actor_ptr chief;
  std::vector<std::string> data_links;
  /// An external model's tensors, names and shapes in the chief's order:
  /// the node builds the layout its worker hands the step from them, so
  /// only the chief reads the parameters file. Empty for troupe's models.
  std::vector<std::string> tensor_names;
  std::vector<std::vector<int64_t>> tensor_dims;
  /// Each tensor's dtype when it is a buffer (tensor_slot::buffer), empty
  /// for a parameter; empty as a whole when no tensor is a buffer.
  std::vector<std::string> buffer_dtypes;
};

/// Where the shards are after the chief added or drained one: their
/// handles, the flat vector's bounds (shard i owns [bounds[i],
/// bounds[i+1])) and, as in worker_spawn, the data-plane address of each
/// for the workers of the node it is sent to.
struct shard_map {
  std::vector<shard_actor> shards;
  std::vector<uint64_t> bounds;
  std::vector<std::string> data_links;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_map& x) {
  return f(caf::meta::type_name("shard_map"), x.shards, x.bounds, x.data_links);
}

/// The shards of a node that a new chief adopts (node_agent_actor's
/// adopt): their handles and what each applied, in the same order.
struct live_shards {
  std::vector<shard_actor> handles;
  std::vector<shard_history> histories;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, live_shards& x) {
  return f(caf::meta::type_name("live_shards"), x.handles, x.histories);
}

/// What a node that lost its link to the chief, and registered with it
/// again, keeps of the shards and replicas it still runs (node_agent_actor's
/// keep): meanwhile the chief may have made a replica elsewhere the shard,
/// or given a replica up, and two shards of one id must never live.
struct kept_shards {
  /// The run's shards and replicas on that node, as the chief has them.
  std::vector<shard_actor> handles;
  /// Shards the chief lost and is waiting for: whatever runs as one of
  /// them on the node stays (it is what the recovery waits for).
  std::vector<int32_t> awaited;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kept_shards& x) {
  return f(caf::meta::type_name("kept_shards"), x.handles, x.awaited);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_spawn& x) {
  return f(caf::meta::type_name("shard_spawn"), x.id, x.aggregate, x.state,
           x.replica, x.buffers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_spawn& x) {
  return f(caf::meta::type_name("worker_spawn"), x.id, x.feeder, x.shards,
           x.bounds, x.chief, x.data_links, x.tensor_names, x.tensor_dims,
           x.buffer_dtypes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_usage& x) {
  return f(caf::meta::type_name("process_usage"), x.resident_bytes,
           x.heap_bytes, x.cpu_seconds, x.started_unix, x.pid, x.host,
           x.program);
}

/// The node agent (actors/node_agent.hpp): one per OS process; starts
/// shards and workers there for the chief.
using node_agent_actor = caf::typed_actor<
  caf::replies_to<place_atom, shard_spawn>::with<shard_actor>,
  // The replica of shard N here becomes the shard (its primary is lost);
  // replies with its version.
  caf::replies_to<promote_atom, int32_t>::with<int64_t>,
  caf::replies_to<place_atom, worker_spawn>::with<worker_actor>,
  // The shards moved (an empty map: they are moving): every worker here
  // gets the map, with stubs made anew; replies with the workers told.
  caf::replies_to<reshard_atom, shard_map>::with<int32_t>,
  // The chief is lost: stop the workers here (their feeder and chief are
  // gone), keep the shards with their values for a chief that comes back.
  caf::reacts_to<stop_atom>,
  // A chief takes the run of the shards that live here over: each is
  // adopted (see shard_actor) and answers what it applied since version
  // V (a shard that does not answer is left out, as if it had died).
  caf::replies_to<adopt_atom, int64_t>::with<live_shards>,
  // The chief this node registered with again (its link was lost a
  // while) keeps these: every other shard and replica here stops. Replies
  // with what stopped ("shard 0, the replica of shard 3"; "" for none).
  caf::replies_to<keep_atom, kept_shards>::with<std::string>,
  // The run is over: stop everything here and quit, with the run's error
  // as the exit reason (none: the run succeeded), which the node process
  // reports.
  caf::replies_to<finish_atom, caf::error>::with<bool>,
  // Who listens here: the node's name and its chief's "host:port" (from
  // the cluster file), for a shell or a node that came to this port
  // looking for the chief.
  caf::replies_to<who_atom>::with<std::string, std::string>,
  // This process's resident memory, heap in use and CPU time (the shell's
  // `nodes`, the metrics endpoint).
  caf::replies_to<stats_atom>::with<process_usage>,
  // data.follow: the training parts are now these, in order (those here
  // are a beginning of them): the node's click logs take the new ones
  // before the feeder leases their samples. Replies with the samples the
  // node's set holds (0: it reads none yet; it takes them when it does).
  caf::replies_to<follow_atom, std::vector<std::string>>::with<int64_t>>;

/// A node process announcing itself to the chief (register_atom).
struct node_registration {
  std::string name; ///< empty: a joining node that takes the chief's name
  std::string host; ///< where it listens
  uint16_t port = 0;
  node_agent_actor agent;
  /// The workers it brings: -1 those the cluster file places on it, N >= 0
  /// for a node joining a running cluster.
  int32_t workers = -1;
  uint16_t data_port = 0; ///< its data plane; 0: none
  /// Its config's training identity (runtime/config/run_identity.hpp, as
  /// identity_text).
  std::string identity;
  /// The id of the run it served before its chief was lost (empty: none;
  /// a restarted chief takes that run over).
  std::string served_run;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_registration& x) {
  return f(caf::meta::type_name("node_registration"), x.name, x.host, x.port,
           x.agent, x.workers, x.data_port, x.identity, x.served_run);
}

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_node_agent, troupe::type_ids::node_agent)
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::shard_spawn))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::worker_spawn))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::live_shards))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::shard_map))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::kept_shards))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::node_registration))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::node_agent_actor))
  CAF_ADD_TYPE_ID(troupe_node_agent, (troupe::process_usage))
CAF_END_TYPE_ID_BLOCK(troupe_node_agent)
// clang-format on

// The node agent: one per OS process. The chief asks it to start shards and
// workers in its process; that is how a cluster file's placement becomes
// real, how a failed worker is restarted on its node (or moved to another
// one), and how workers are added to a running cluster.
//
// States: one. It keeps the handles of what it started until they end.
// When its node loses the chief it stops the workers and keeps the shards
// (a chief that comes back may take their values over, and replaces them
// when it places shards of the same ids). On finish it stops them and quits
// with the run's error, if any, as its exit reason (the node process then
// exits, with 1 for a failed run).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/node_agent_protocol.hpp"
#include "models/external_step.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

class data_client;
class data_server;

struct agent_options {
  std::string node;
  run_config cfg;
  /// The datasets; null: loaded from cfg.data when the first worker starts.
  std::shared_ptr<const train_test> data;
  /// Passed to every worker (see worker_options::fault_hook).
  std::function<void(int32_t, int64_t)> fault_hook;
  /// model.type "external": makes each worker's step (the Python
  /// module's workers); null on a node that cannot run one.
  external_step_factory external;
  /// This process's data plane: shards placed here are served on it. Null
  /// in the embedded mode and on nodes that hold no shards (joined ones).
  std::shared_ptr<data_server> data_plane;
};

struct agent_state {
  static inline const char* name = "node_agent";
  agent_options opts;
  /// What it started and still runs (monitored; stopped on finish).
  std::map<int32_t, shard_actor> shards; ///< by id
  /// Replicas of shards whose primaries live elsewhere, by id: a new chief
  /// does not adopt them (it builds its own), a promotion makes one a shard.
  std::map<int32_t, shard_actor> replicas;
  std::vector<worker_actor> workers;
  /// external: the tensors the run declared, as the chief sent them with
  /// the first worker placed here (worker_spawn::tensor_names).
  std::shared_ptr<const param_layout> declared;
  /// data.follow: the training parts the chief named last, which the
  /// node's click logs take once it reads them.
  std::vector<std::string> followed;
  /// Data-plane connections to shard nodes, by "host:port", and the stubs
  /// that stand for their shards, shared by the workers here.
  std::map<std::string, std::shared_ptr<data_client>> data_links;
  std::map<std::pair<std::string, int32_t>, shard_data_actor> stubs;

  ~agent_state();
};

node_agent_actor::behavior_type
node_agent_impl(node_agent_actor::stateful_pointer<agent_state> self,
                agent_options opts);

} // namespace troupe

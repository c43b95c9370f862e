// A cluster's nodes from the environment a scheduler gives its processes,
// instead of a cluster file's /cluster/nodes:
// - TF_CONFIG, as Kubeflow's TFJob and TensorFlow's launchers write it:
//   {"cluster": {"chief": ["h:p"], "ps": [...], "worker": [...]},
//    "task": {"type": "worker", "index": 1}}.
//   "chief" (or "master") is the chief's node; without one, worker 0 runs
//   the chief beside its workers, as TensorFlow makes worker 0 the chief.
//   The ps tasks are shard nodes ps0, ps1, ...; the worker tasks worker
//   nodes worker0, worker1, .... Each node listens at its entry's port,
//   its data plane at that port plus /cluster/data_port_offset (or one the
//   kernel chooses when the offset is 0).
// - Slurm, in a step of two or more tasks (srun -n N): task 0 is the chief,
//   tasks 1..S shard nodes (one shard each, S the config's
//   /cluster/shards), the rest worker nodes; hosts from the step's node
//   list and tasks per node (block distribution, srun's default); task i
//   listens at /cluster/base_port + 2i, its data plane at the port above.
// Shards and workers are spread over their nodes as evenly as the counts
// allow, and each such node gets at least one. Pure functions of their
// inputs: the program passes getenv.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// Where a node's membership came from.
enum class membership_source { config, tf_config, slurm };

/// "the config", "TF_CONFIG", "Slurm".
const char* to_string(membership_source s);

/// Reads one environment variable; null when unset (getenv's contract).
using env_lookup = std::function<const char*(const char*)>;

/// TF_CONFIG when set and not empty; else Slurm in a step of two or more
/// tasks (SLURM_STEP_NUM_TASKS, which srun sets and a batch script's own
/// step does not); else the config.
membership_source membership_in(const env_lookup& env);

/// This process's node and what the start line says about the cluster.
struct membership {
  membership_source source = membership_source::config;
  std::string node;    ///< this process's node name
  std::string summary; ///< "the chief on chief (h:p); shards on ps0 (2); ..."
};

/// Fills c.nodes, c.chief_node, c.shards and c.workers from `text` (the
/// value of TF_CONFIG). errc::invalid_config names what is wrong in it.
caf::expected<membership> membership_from_tf_config(const std::string& text,
                                                    cluster_config& c);

/// The same from Slurm's variables.
caf::expected<membership> membership_from_slurm(const env_lookup& env,
                                                cluster_config& c);

/// The settings that write `c`'s nodes into a config text (/cluster/nodes,
/// /cluster/chief, and the counts they sum to): the text a chief hands to
/// nodes that join, so that their config, and so their training identity,
/// places the nodes as the environment did.
std::vector<config_setting> node_settings(const cluster_config& c);

/// A Slurm host list ("node[01-03,7],gpu2,r[1-2]n[1-2]") as host names, in
/// order; the error names the bad part.
caf::expected<std::vector<std::string>>
expand_host_list(const std::string& text);

/// Slurm's tasks per node ("2(x3),1") as one count per node.
caf::expected<std::vector<int>> expand_tasks_per_node(const std::string& text);

} // namespace troupe

// Where the chief puts a worker or a shard whose node is gone: one rule
// for both. A plain function over a snapshot of the nodes, so that it is
// tested without actors.
#pragma once

#include <string>
#include <vector>

namespace troupe {

/// One node as placement sees it.
struct node_slot {
  std::string name;
  bool up = false;
  /// The cluster file gives it actors of this kind (workers, or shards),
  /// or it joined to run them.
  bool meant = false;
  int load = 0; ///< actors of this kind it runs now
};

/// Whether nodes not meant for the kind may take it.
enum class fallback { any_node, meant_only };

/// The up node that should take one more actor: nodes meant for the kind
/// first, then (with fallback::any_node) the others; within each, the one
/// with the fewest; ties go to the first in `nodes`. Empty when no node
/// qualifies.
std::string least_loaded(const std::vector<node_slot>& nodes, fallback rule);

} // namespace troupe

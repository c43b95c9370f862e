// Where the run's shards are: their slices of the flat parameter vector,
// the actor and the node of each, each shard's replica, and the feeder.
// The indexes that name the shard or replica behind a down message change
// only here, with the handles they index. chief_start.cpp places the
// shards first; chief_placement.cpp and chief_recovery.cpp replace a lost
// one, chief_takeover.cpp keeps a lost chief's, chief_reshard.cpp moves
// them, chief_replicas.cpp keeps the replicas.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/protocol/feeder_protocol.hpp"
#include "actors/protocol/shard_protocol.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// A shard's replica as the chief sees it (cluster.shard_replicas).
struct replica_entry {
  shard_actor handle;   ///< null while none runs
  std::string node;     ///< where it runs, or is being started
  bool in_step = false; ///< its primary says it holds every acked push
  bool placing = false; ///< an agent is starting it
  double asked = 0;     ///< when its primary was asked to copy to it
  /// The asks of its primary so far, and whether the latest is answered.
  /// News the primary sends before its answer are of the replica before
  /// this one (its answer comes after them on the same way), and must
  /// not stop this one: a late "gave up" for each replica in turn once
  /// stopped every new one, until the shard ran without any.
  uint64_t asks = 0;
  bool primary_answered = false;
  /// Replicas the shard's primary gave up (a failed update, not a lost
  /// node): past max_replica_failures the shard runs without one.
  int failures = 0;
};

class shard_placement {
public:
  /// Each shard's slice of the flat vector, by shard.
  std::vector<flat_range> ranges;
  std::vector<float> initial;              ///< a fresh run's initial parameters
  int64_t initial_version = 0;             ///< the shards' version at the start
  std::shared_ptr<checkpoint> resume_from; ///< until the shards have it
  feeder_actor feeder;
  /// The shard map's generation: each move of the shards
  /// (chief_reshard.cpp) makes a new one.
  int64_t layout = 0;

  // -- the shards ----------------------------------------------------------

  /// Every shard's actor, by shard (null: down, or not started yet).
  const std::vector<shard_actor>& handles() const { return handles_; }
  size_t count() const { return handles_.size(); }
  /// Shard i's node.
  const std::string& node_of(size_t i) const { return nodes_[i]; }
  /// Every shard's node, by shard.
  const std::vector<std::string>& nodes() const { return nodes_; }

  /// As many shards as `nodes` name, none started yet, shard i to start
  /// on nodes[i].
  void plan(std::vector<std::string> nodes);
  /// Shard i runs as `handle` on `node`.
  void started(size_t i, shard_actor handle, const std::string& node);
  /// Shard i went down (its handle is forgotten).
  void lost(size_t i);
  /// A shard the run no longer watches (the old shards of a move).
  void forget(const caf::actor_addr& addr) { index_of_.erase(addr); }
  /// The shard that `addr` is.
  std::optional<size_t> shard_of(const caf::actor_addr& addr) const;

  /// The shards' bounds in the flat vector: shard i owns [b[i], b[i+1]).
  std::vector<uint64_t> bounds() const;
  /// The number of shards on each node, those down left out.
  std::map<std::string, int> live_per_node() const;

  // -- their replicas (cluster.shard_replicas) -----------------------------

  std::vector<replica_entry>& replicas() { return replicas_; }
  /// Whether shard i has a replica running.
  bool has_replica(size_t i) const {
    return i < replicas_.size() && replicas_[i].handle;
  }
  /// Shard i's replica runs as `handle`, not yet in step.
  void replica_started(size_t i, shard_actor handle);
  /// Shard i's replica is down.
  void replica_gone(size_t i);
  /// Shard i's replica `handle` took over as its primary.
  void replica_took_over(size_t i, const shard_actor& handle);
  /// Stops keeping every replica (a move builds them anew); returns their
  /// handles.
  std::vector<shard_actor> drop_replicas();
  /// The shard whose replica `addr` is.
  std::optional<size_t> replica_of(const caf::actor_addr& addr) const;
  /// Shard i's replica could not be placed: true the first time (the
  /// log says so once; it is tried again when a node registers).
  bool replica_homeless(size_t i) { return homeless_.insert(i).second; }
  void replica_housed(size_t i) { homeless_.erase(i); }

private:
  std::vector<shard_actor> handles_;
  std::vector<std::string> nodes_;
  std::map<caf::actor_addr, size_t> index_of_;
  std::vector<replica_entry> replicas_;
  std::map<caf::actor_addr, size_t> replica_index_of_;
  std::set<size_t> homeless_;
};

} // namespace troupe

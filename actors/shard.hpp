// The parameter shard actor: a thin shell around runtime/params/param_block
// and, when the model has embedding tables, this shard's rows of each
// (runtime/sparse/sparse_table; in sync mode held for their update by
// runtime/sparse/sync_rows).
//
// States: one. It accepts joins, pulls, pushes, snapshots, restores, stats,
// adoption by a new chief and a checkpoint's forget at any time. A pull that
// the consistency mode cannot answer yet (sync: version not reached; ssp: the
// worker too far ahead) is parked and answered by the push that makes it ready,
// or, once it has waited `hold` (a pause, a worker waiting for its lost node),
// with "ask again" well within the worker's request timeout: a waiting worker
// costs one small message per `hold`, never a stream of pulls.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/shard_protocol.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/sync_rows.hpp"

namespace troupe {

class data_client;

struct shard_options {
  int32_t id = 0;
  param_block::options block;
  std::vector<float> initial; ///< this shard's slice of the parameters
  /// The run's embedding tables: this shard holds the rows that
  /// shard_of_row places on it, of every table, made as they are touched
  /// (or all at once for a fixed vocabulary: the caller gives each shard a
  /// table of its own rows then), each updated by its own optimizer.
  std::vector<table_setup> tables;
  /// How long a pull that is not ready may be parked before "ask again";
  /// keep it well below the workers' request timeout.
  caf::timespan hold = std::chrono::seconds(10);
  /// How long the shard waits for its replica's answer, and for the data
  /// plane connection to it (cluster.request_timeout_ms).
  caf::timespan replica_timeout = std::chrono::seconds(30);
  /// It starts as a replica, which follows its primary's op stream.
  bool follower = false;
};

/// A primary's side of replication (cluster.shard_replicas). The primary
/// forwards every push and row push it took, in the order it took them,
/// and every other change (replica_op) to its replica, on one connection:
/// the replica applies the same ops to the same state and ends bitwise
/// where the primary is. A new replica gets the whole dense state first
/// (a replica_image), then the table rows in chunks while the pushes go
/// on (a chunk is taken when it is sent, so it holds every push before it
/// and the replica applies the later ones on top). Once the last chunk is
/// sent, the primary answers a push only when the replica has answered
/// it too, and once the replica has answered that last chunk, it is in
/// step: every push the primary acknowledged is on the replica, so either
/// may be lost without losing one.
struct replication {
  shard_data_actor to;               ///< null: no replica
  std::shared_ptr<data_client> link; ///< to a replica on another node
  /// Each new replica (or none) starts a generation: answers of an older
  /// one change nothing.
  int64_t generation = 0;
  replica_state state = replica_state::none;
  bool pushes_wait = false;   ///< the last chunk is sent
  caf::strong_actor_ptr told; ///< who asked, told when in step or dropped
  size_t table = 0;           ///< the copy's next table
  uint64_t next_row = 0;      ///< and row there
  /// Whether a chunk of the table went yet: one goes even for a table of
  /// no rows, with its push count (a bounded table may have taken pushes
  /// and hold none, and Adam's bias correction counts them).
  bool table_begun = false;
  /// Then each table's admission counts: the table, and the counter.
  size_t count_table = 0;
  uint64_t next_count = 0;
  /// Then each table's log of evictions (delta exports' tombstones).
  size_t log_table = 0;
  int64_t rows = 0;   ///< rows copied
  int chunks_out = 0; ///< chunks sent, not yet answered
  /// Every op sent and not yet answered, in the order sent, whatever its
  /// generation: what runs with its answer. A replica that answers none
  /// for the replica timeout is dropped.
  struct unanswered_op {
    uint64_t seq;
    uint64_t link_id; ///< its request id on `link`; 0: a CAF request
    caf::actor_clock::time_point sent; ///< on the actor clock
    int64_t generation;
    std::shared_ptr<const bool> taken; ///< null, or whether the primary took it
    std::function<void(bool)> done;
  };
  std::deque<unanswered_op> unanswered;
  uint64_t sent = 0;          ///< ops sent, each generation together
  bool check_pending = false; ///< a check of the oldest is on its way
  /// Ops of this generation sent and not yet answered (a new copy's
  /// count starts afresh).
  int64_t lag() const {
    return std::count_if(unanswered.begin(), unanswered.end(),
                         [&](const unanswered_op& op) {
                           return op.generation == generation;
                         });
  }
  int64_t version = -1; ///< the replica's, as of its last answer
  std::chrono::steady_clock::time_point began;
};

struct shard_state {
  static inline const char* name = "shard";
  struct parked_pull {
    caf::typed_response_promise<float_block> promise;
    int32_t worker;
    int64_t min_version;
    caf::actor_clock::time_point
      since; /// on the actor clock (a test drives it)
  };
  int32_t id = 0;
  std::unique_ptr<param_block> block;
  std::vector<std::unique_ptr<sparse_table>> tables;
  std::vector<parked_pull> parked; ///< in arrival order
  caf::timespan hold{};
  bool expiry_pending = false; ///< an expire message is on its way
  int64_t ssp_pulls = 0;       ///< ssp: worker pulls answered
  int64_t ssp_max_lead = 0;    ///< ssp: widest clock lead at an answered pull
  /// Parameter bytes sent in answered pulls, gradient bytes received in
  /// pushes (whatever became of them): what the shard moves, in values.
  int64_t pulled_bytes = 0, pushed_bytes = 0;
  /// sync: each worker's row push, held until the update its dense push
  /// of the same tag joins is applied, or until that push is refused or
  /// stale.
  sync_rows sync;
  /// Each table's last export cut (shard_ops::cut_export): every row, or
  /// the slots of the rows changed; read while training is paused.
  struct export_cut {
    bool all = false;
    std::vector<uint32_t> slots;
  };
  std::vector<export_cut> cuts;
  bool follower = false; ///< a replica, which its primary feeds
  caf::timespan replica_timeout{};
  replication rep;
};

/// The shard as it runs: its interface, and its own timer, which answers
/// pulls held for their bound with "ask again". Others hold a shard_actor.
/// The second is the replica's check (check_replica), the last two the
/// replica's answers on the data plane (replica_answered).
using shard_self_actor =
  shard_actor::extend<caf::reacts_to<expire_atom>,
                      caf::reacts_to<expire_atom, replicate_atom>,
                      caf::reacts_to<data_atom, uint64_t, push_ack>,
                      caf::reacts_to<data_atom, uint64_t, caf::error>>;

shard_self_actor::behavior_type
shard_impl(shard_self_actor::stateful_pointer<shard_state> self,
           shard_options opts);

} // namespace troupe

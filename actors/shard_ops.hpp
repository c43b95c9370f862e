// The shard's operations, which its handlers (actors/shard.cpp) and a
// replica applying its primary's op stream (actors/shard_replica.cpp) both
// use, and the primary's side of replication. Private to the shard.
#pragma once

#include <functional>
#include <string>

#include "actors/shard.hpp"

namespace troupe::shard_ops {

using self_ptr = shard_self_actor::stateful_pointer<shard_state>;

// -- what changes a shard, whoever asks --------------------------------------

/// Accepts pushes from `worker`; the version.
int64_t join(self_ptr self, int32_t worker);
/// Forgets a worker that has finished.
void leave(self_ptr self, int32_t worker);
/// Steering: "lr" or "aggregate"; errors leave the shard unchanged.
caf::error tune(self_ptr self, const std::string& key, double value);
/// Forgets every worker: a new chief adopts the shard.
void adopt(self_ptr self);
/// Rows [first, first + count) of table `t` (whose index is `table`) in
/// its own order, with its row and push counts: a checkpoint's piece or
/// a replica's copy.
row_chunk rows_of(self_ptr self, const sparse_table& t, int32_t table,
                  uint64_t first, uint64_t count);
/// Puts rows back (a checkpoint's, or the primary's copy); the rows the
/// table holds now.
caf::expected<uint64_t> restore_rows(self_ptr self, const row_chunk& c);
/// An empty table of `like`'s settings, evicting as update_eviction says.
std::unique_ptr<sparse_table> make_table(self_ptr self,
                                         const sparse_table& like);
/// Whether the shard's tables evict on their own: not on a replica (it
/// follows its primary's evictions), nor while a replica copies the rows.
void update_eviction(self_ptr self);
/// Tells the replica which rows the last pushes evicted (a replica's
/// bounded tables evict only those).
void forward_evictions(self_ptr self);
/// On a replica: evicts what its primary evicted.
caf::error evict_rows(self_ptr self, const replica_evict& op);

/// A replica's table's log of evictions, as its primary's (set, or
/// forgotten up to a durable export).
caf::error follow_eviction_log(self_ptr self, const replica_eviction_log& op);

/// Cuts table `table`'s export after push `since` (-1: every row, a full
/// export): the rows changed since, kept until the next cut, and the
/// keys evicted since (the answer's ids); forgets the evictions at or
/// before `since` here and on the replica. The answer's `rows` counts
/// the rows cut, `pushes` is the table's.
caf::expected<row_chunk> cut_export(self_ptr self, int32_t table,
                                    int64_t since);

/// Rows [first, first + count) of table `table`'s last cut: ids and
/// values.
caf::expected<row_chunk> export_rows(self_ptr self, int32_t table,
                                     uint64_t first, uint64_t count);
/// Table `t`'s admission counts [first, first + count) (whose index is
/// `table`), with their total (0: the table counts no keys).
key_counts counts_of(self_ptr self, const sparse_table& t, int32_t table,
                     uint64_t first, uint64_t count);
/// Adds counts back (a checkpoint's), or sets them (a replica's copy);
/// errc::layout_mismatch for counts of a filter of another size.
caf::error restore_counts(self_ptr self, const key_counts& c);

// -- replication (actors/shard_replica.cpp) ----------------------------------

/// Keeps `to` in step from now on (null: no replica), replacing any
/// replica before; `told` hears when it is in step or dropped.
void set_replica(self_ptr self, shard_data_actor to,
                 std::shared_ptr<data_client> link, caf::strong_actor_ptr told);

/// Whether there is a replica to forward to.
inline bool replicating(self_ptr self) {
  return static_cast<bool>(self->state.rep.to);
}

/// Sends a new copy of everything to the replica (after a restore).
void start_copy(self_ptr self);

/// The image of everything the shard holds but its table rows: the dense
/// block and (sync) the row pushes held for the update under way.
replica_image image_of(self_ptr self);

/// Forwards a push (a gradient_push or a row_push) or an op; `done` runs
/// once the replica has answered, or failed to (before forward returns
/// when the connection to it is found broken). A failure drops the
/// replica, unless `taken` says the shard refused the push too.
void forward(self_ptr self, gradient_push g, std::shared_ptr<const bool> taken,
             std::function<void()> done);
void forward(self_ptr self, row_push p, std::shared_ptr<const bool> taken,
             std::function<void()> done);
void forward(self_ptr self, replica_op op);

/// Whether a push's answer must wait for the replica's.
inline bool pushes_wait(self_ptr self) {
  return replicating(self) && self->state.rep.pushes_wait;
}

/// Answers every parked pull that has become ready.
void serve_parked(self_ptr self);

/// The answer to request `id` on the data plane's connection to the
/// replica (data_client::send).
void replica_answered(self_ptr self, uint64_t id, caf::expected<push_ack> a);

/// The replica's oldest unanswered op is due: a replica that has not
/// answered it within the replica timeout is dropped (a node that hangs
/// keeps its connection open).
void check_replica(self_ptr self);

/// Applies an op from the primary (the shard is its replica).
caf::expected<push_ack> apply_replica_op(self_ptr self, replica_op& op);

} // namespace troupe::shard_ops

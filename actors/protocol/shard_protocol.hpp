// A parameter shard's interface (actors/shard.hpp): the data requests a
// worker sends (shard_data_actor, which a data-plane stub also answers),
// and what the chief asks of it: its state for checkpoints, its counters,
// a takeover, steering, replication.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "actors/protocol/ids.hpp"
#include "actors/protocol/replica_protocol.hpp"
#include "actors/protocol/shard_data_messages.hpp"
#include "caf/all.hpp"
#include "runtime/rules/takeover.hpp"

namespace troupe {

/// A shard's full state: values, optimizer slots, version.
struct shard_state_msg {
  int32_t shard = 0;
  int64_t version = 0;
  std::vector<float> values;
  std::vector<std::string> slot_names;
  std::vector<std::vector<float>> slots;
};

/// One embedding table's counters on one shard (see shard_stats): and of
/// a bounded table (runtime/sparse/sparse_table.hpp), the rows made, the
/// row gradients dropped for keys not admitted, and the rows evicted
/// since the table was made on this shard.
struct table_counts {
  int64_t rows = 0, row_bytes = 0, rows_pulled = 0, rows_pushed = 0;
  int64_t rows_made = 0, rows_rejected = 0, rows_evicted = 0;
  /// Admission by count: the filter's counters above zero, and all of
  /// them (0: the table counts no keys).
  int64_t filter_used = 0, filter_counters = 0;
};

/// Counters of one shard, for the chief, the shell and tests.
struct shard_stats {
  int32_t shard = 0;
  int64_t version = 0;
  int64_t accepted = 0;
  int64_t stale = 0;
  int64_t refused = 0;
  /// ssp: worker pulls answered, and the widest lead (the worker's clock
  /// minus the slowest clock) seen when answering one.
  int64_t ssp_pulls = 0;
  int64_t ssp_max_lead = 0;
  /// Bytes of parameters answered to pulls and of gradients pushed.
  int64_t pulled_bytes = 0, pushed_bytes = 0;
  /// Embedding tables (all of the shard's together): rows held, bytes of
  /// their values, optimizer state and index, and row ids in pulls
  /// answered and pushes taken.
  int64_t rows = 0, row_bytes = 0, rows_pulled = 0, rows_pushed = 0;
  /// Replication (cluster.shard_replicas): whether this is a replica that
  /// follows its primary; for a primary, its replica's state (none,
  /// copying, in_step), the ops it forwarded that the replica has not
  /// answered yet (the replication lag), the rows copied so far and the
  /// replica's version as of its last answer.
  bool follower = false;
  int8_t replica = 0;
  int64_t replica_lag = 0, replica_rows = 0, replica_version = -1;
  /// Each embedding table's share of rows .. rows_pushed, in the run's
  /// order of tables (runtime/config embedding_tables).
  std::vector<table_counts> tables;
};

template <class Processor>
caf::error raw_form_of(Processor& f, shard_state_msg& x) {
  return detail::raw_form<Processor>{f}
    .fields(x.shard, x.version, x.slot_names)
    .raw(x.values)
    .lists(x.slots)
    .done();
}

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error>
inspect(Inspector& f, shard_state_msg& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, shard_state_msg& x) {
  return f(caf::meta::type_name("shard_state_msg"), x.shard, x.version,
           x.slot_names, static_cast<uint64_t>(x.values.size()));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_counts& x) {
  return f(caf::meta::type_name("table_counts"), x.rows, x.row_bytes,
           x.rows_pulled, x.rows_pushed, x.rows_made, x.rows_rejected,
           x.rows_evicted, x.filter_used, x.filter_counters);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_stats& x) {
  return f(caf::meta::type_name("shard_stats"), x.shard, x.version, x.accepted,
           x.stale, x.refused, x.ssp_pulls, x.ssp_max_lead, x.pulled_bytes,
           x.pushed_bytes, x.rows, x.row_bytes, x.rows_pulled, x.rows_pushed,
           x.follower, x.replica, x.replica_lag, x.replica_rows,
           x.replica_version, x.tables);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_history& x) {
  return f(caf::meta::type_name("shard_history"), x.shard, x.version, x.since,
           x.complete, x.batches, x.size);
}

/// What a worker asks of a shard: pulls and pushes, of values and of rows.
/// A shard_actor is one; so is a data-plane stub (actors/data_plane), which
/// answers these over its connection for a shard on another node.
using shard_data_actor = caf::typed_actor<
  // Values for `worker` once version >= min_version (sync) and the worker is
  // within the staleness bound (ssp); the chief pulls as worker -1.
  caf::replies_to<pull_atom, int32_t, int64_t>::with<float_block>,
  // Applies or aggregates a push; errors leave the shard unchanged.
  caf::replies_to<push_atom, gradient_push>::with<push_ack>,
  // Rows of an embedding table (made on first touch where the table does
  // so), and a push of row gradients, applied at once; an id the table
  // refuses (at or above its vocabulary) fails the whole request and
  // changes nothing.
  caf::replies_to<pull_atom, row_request>::with<row_block>,
  caf::replies_to<push_atom, row_push>::with<push_ack>,
  // The same for several tables at once (one part per table).
  caf::replies_to<pull_atom, row_requests>::with<row_blocks>,
  caf::replies_to<push_atom, row_pushes>::with<push_ack>,
  // A primary's op stream to its replica (replica_op), between the pushes
  // it forwards; replies with the replica's version.
  caf::replies_to<replicate_atom, replica_op>::with<push_ack>>;

/// The name of a data-plane stub (actors/data_plane: data_client::stub),
/// which fails each request its shard leaves unanswered for its
/// connection's timeout with caf::sec::request_timeout.
constexpr const char* shard_stub_name = "shard_stub";

/// Whether `h` is a data-plane stub. A worker asks one without a timeout
/// of its own: each request with one costs a timer on CAF's clock thread
/// and a hand-off to it, several per step of a model of small tables.
inline bool times_out_itself(const shard_data_actor& h) {
  auto* a = dynamic_cast<caf::local_actor*>(
    caf::actor_cast<caf::abstract_actor*>(h));
  return a != nullptr && std::strcmp(a->name(), shard_stub_name) == 0;
}

/// A parameter shard (actors/shard.hpp): the data requests, and what the
/// chief asks of it.
using shard_actor = shard_data_actor::extend<
  // Accepts pushes from this worker from now on; replies with the version.
  caf::replies_to<join_atom, int32_t>::with<int64_t>,
  // Forgets a worker that has finished (ssp stops waiting for its clock).
  caf::reacts_to<leave_atom, int32_t>,
  // The shard's full state, for checkpoints.
  caf::replies_to<snapshot_atom>::with<shard_state_msg>,
  // Replaces the shard's state; replies with the version. Its tables
  // start empty again: a restore's rows follow as row chunks.
  caf::replies_to<restore_atom, shard_state_msg>::with<int64_t>,
  // Table T's rows [first, first + count) in the shard's order, for a
  // checkpoint (count 0: its row and push counts alone), and rows put
  // back from one; replies with the rows the table holds.
  caf::replies_to<snapshot_atom, int32_t, uint64_t, uint64_t>::with<row_chunk>,
  caf::replies_to<restore_atom, row_chunk>::with<uint64_t>,
  // Table T's admission counts [first, first + count) (count 0: their
  // number alone), for a checkpoint; and counts added back from one.
  caf::replies_to<snapshot_atom, counts_atom, int32_t, uint64_t,
                  uint64_t>::with<key_counts>,
  caf::replies_to<restore_atom, key_counts>::with<bool>,
  // An export of table T (training.export): its rows changed after push
  // `since` (-1: all) cut and kept, the answer counting them (`rows`),
  // with the table's pushes and the keys evicted since (its ids); then
  // rows [first, first + count) of that cut, ids and values.
  caf::replies_to<export_atom, int32_t, int64_t>::with<row_chunk>,
  caf::replies_to<export_atom, int32_t, uint64_t, uint64_t>::with<row_chunk>,
  // Counters and (ssp) the widest clock lead it allowed.
  caf::replies_to<stats_atom>::with<shard_stats>,
  // A chief takes the shard's run over: the old chief's workers are
  // forgotten (their pushes refused until joined again) and the reply
  // names the batches applied since version V (runtime/rules/takeover.hpp).
  caf::replies_to<adopt_atom, int64_t>::with<shard_history>,
  // Version V is in a checkpoint now: the applied log drops what came
  // up to it.
  caf::reacts_to<forget_atom, int64_t>,
  // Steering: "lr" (base learning rate) or "aggregate" (sync pushes per
  // update) to a value; errors leave the shard unchanged.
  caf::replies_to<tune_atom, std::string, double>::with<bool>,
  // Keep a replica in step from now on: the shard on another node reached
  // at data-plane address A ("host:port"), or the handle itself when A is
  // empty (the same process); a null handle and no address: none. The
  // copy runs in the background; the sender hears of it as
  // (replicate_atom, shard, version, text): in step, or dropped
  // (version -1) with the reason.
  caf::replies_to<replicate_atom, shard_data_actor, std::string>::with<bool>,
  // A replica becomes its shard's primary (its primary is lost); replies
  // with its version.
  caf::replies_to<promote_atom>::with<int64_t>,
  // Everything the shard holds but its table rows, as the image op that
  // makes another shard a copy of it (the chief moving the run's shards).
  caf::replies_to<image_atom>::with<replica_image>>;

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_shard, troupe::type_ids::shard)
  CAF_ADD_TYPE_ID(troupe_shard, (troupe::shard_state_msg))
  CAF_ADD_TYPE_ID(troupe_shard, (troupe::shard_stats))
  CAF_ADD_TYPE_ID(troupe_shard, (troupe::shard_history))
  // Handles travel in messages: the agent's replies, the shard maps.
  CAF_ADD_TYPE_ID(troupe_shard, (troupe::shard_actor))
  CAF_ADD_TYPE_ID(troupe_shard, (troupe::shard_data_actor))
  CAF_ADD_TYPE_ID(troupe_shard, (std::vector<troupe::shard_actor>))
  CAF_ADD_TYPE_ID(troupe_shard, (std::vector<troupe::shard_data_actor>))
CAF_END_TYPE_ID_BLOCK(troupe_shard)
// clang-format on

// The whole message protocol of troupe: atoms, message types (with their
// inspect overloads), the type-ID block and one typed_actor alias per role.
// Nothing else defines atoms or type IDs, so moving to CAF 0.18+ is a
// change to this file. Plain structs that belong to a part of the runtime
// (a lease, a shard's history) live there, and the shell's commands and
// views in actors/protocol/shell_protocol.hpp (keeping this file readable); their
// inspect overloads and type IDs are here or there.
//
// Parameter and gradient payloads are flat float buffers tagged with shard,
// version/step and worker. They are written as one raw block
// (actors/protocol/float_wire.hpp; host byte order, little-endian checked below).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "caf/all.hpp"
#include "actors/protocol/float_wire.hpp"
#include "actors/protocol/wire_form.hpp"
#include "actors/protocol/shell_protocol.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/rules/batch_plan.hpp"
#include "runtime/base/process_usage.hpp"
#include "runtime/rules/takeover.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "float payloads travel in host byte order");

namespace troupe {

// -- message types ------------------------------------------------------------

/// A pull reply: one shard's values at a version. The pointer is shared with
/// the shard (copy on write there), so an in-process pull copies nothing.
/// Version -1 and no values: the pull waited at the shard for as long as a
/// pull may be held (sync: version not reached; ssp: the worker too far
/// ahead) and is to be sent again; a held pull is answered long before its
/// request times out.
struct float_block {
  int32_t shard = 0;
  int64_t version = 0;
  std::shared_ptr<const std::vector<float>> values;

  static float_block ask_again_for(int32_t shard) { return {shard, -1, {}}; }
  bool ask_again() const { return version < 0; }
};

/// A push: a worker's gradient (or EASGD elastic difference) for one shard.
/// `tag` is the version of the shard's values the worker computed on (the
/// shard counts the updates since as the push's staleness);
/// `batch` the plan number of the batch it was computed on (lease_grant;
/// -1: none), by which a shard applies each batch once. The
/// values are [offset, offset + size) of a buffer the worker shares: in one
/// process every shard reads its slice of the worker's gradient buffer
/// without a copy; on the wire only the slice travels.
struct gradient_push {
  int32_t shard = 0;
  int32_t worker = 0;
  int64_t tag = 0;
  int64_t batch = -1;
  std::shared_ptr<const std::vector<float>> buffer;
  uint64_t offset = 0;
  uint64_t size = 0;

  const float* data() const { return buffer ? buffer->data() + offset : nullptr; }

  /// A push that owns its values.
  static gradient_push of(int32_t shard, int32_t worker, int64_t tag,
                          std::vector<float> values, int64_t batch = -1) {
    auto n = values.size();
    return {shard, worker, tag, batch,
            std::make_shared<const std::vector<float>>(std::move(values)), 0,
            n};
  }
};

/// A sparse pull: rows `ids` of embedding table `table` (an index into the
/// run's tables) that one shard holds (runtime/sparse/sparse_table.hpp). A worker
/// asks each shard only for the distinct ids of its batch that live there
/// (shard_of_row), and the reply carries exactly those rows, in that
/// order: the ids do not travel back, the asker knows them.
struct row_request {
  int32_t shard = 0;
  int32_t table = 0;
  int32_t worker = 0;
  std::vector<uint64_t> ids;
  /// Make no row: an absent one is answered as it would be made (the
  /// chief's evaluations, which must not grow the table).
  bool peek = false;
};

/// The answer to a row_request: ids.size() x dim floats.
struct row_block {
  int32_t shard = 0;
  int32_t table = 0;
  std::shared_ptr<const std::vector<float>> values;
};

/// A sparse push: the gradients of rows `ids` (ids.size() x dim floats) of
/// table `table`, computed on plan batch `batch` (-1: none) with the
/// shard's dense values of version `tag`. In async and ssp the shard
/// applies them at once, row by row (the table's optimizer), and answers
/// a push_ack whose version counts the table's pushes. In sync they are
/// the rows of the worker's next dense push of the same tag: held until
/// that push is aggregated into the update of version `tag` (stale: both
/// dropped), applied with that update as the mean of its pushes' rows.
struct row_push {
  int32_t shard = 0;
  int32_t table = 0;
  int32_t worker = 0;
  int64_t batch = -1;
  int64_t tag = 0;
  std::vector<uint64_t> ids;
  std::shared_ptr<const std::vector<float>> grads;
};

/// Rows of one table of one shard as a checkpoint holds them: their ids,
/// values and optimizer slots (ids.size() x dim floats each), in the
/// shard's own order. A snapshot answers rows [first, first + count) of
/// that order, with `rows` (all the shard holds) and `pushes` (the
/// table's, which Adam's bias correction counts); a restore takes them
/// back (pushes -1: leave the count).
struct row_chunk {
  int32_t shard = 0;
  int32_t table = 0;
  uint64_t rows = 0;
  int64_t pushes = -1;
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
};

/// What a primary shard sends its replica (actors/shard.hpp) beside the
/// pushes it forwards as they came, in the order the primary took them:
/// the whole state to start from (image: the block, the sync rows held,
/// the tables emptied), rows of its tables (rows: a row_chunk restored
/// over what the replica holds), and the chief's messages that change a
/// shard (join, leave, tune, forget, adopt).
struct replica_op {
  enum kind_t : uint8_t { image = 1, rows, join, leave, tune, forget, adopt };
  uint8_t kind = 0;
  int32_t worker = 0;  ///< join, leave
  int64_t version = 0; ///< forget; adopt: the version asked about
  std::string key;     ///< tune
  double value = 0;    ///< tune
  block_image block;   ///< image
  /// image, sync: the row pushes held for the update under way.
  std::vector<int32_t> held_workers, held_tables;
  std::vector<int64_t> held_tags;
  std::vector<std::vector<uint64_t>> held_ids;
  std::vector<std::vector<float>> held_grads;
  row_chunk chunk; ///< rows

  /// An op without payload: join, leave, forget or adopt.
  static replica_op of(kind_t kind, int32_t worker = 0, int64_t version = 0) {
    replica_op op;
    op.kind = kind;
    op.worker = worker;
    op.version = version;
    return op;
  }
};

/// A shard's answer to a valid push.
struct push_ack {
  int64_t version = 0; ///< the shard's version after the push
  /// Dropped: stale (sync), or its batch was applied before (async, ssp).
  bool stale = false;
};

/// The feeder's answer to a lease request. A request that the feeder cannot
/// grant yet (paused, every batch out) is held until it can, or until it
/// has waited as long as a request may be held: then the answer is `wait`
/// and the worker asks again. Nobody polls.
struct lease_reply {
  static constexpr uint8_t granted = 0;
  static constexpr uint8_t wait = 1; ///< held long enough: ask again
  static constexpr uint8_t done = 2; ///< nothing more to train
  uint8_t status = wait;
  /// The grant came after the request was held: values pulled alongside
  /// the lease may be older than the pause, and are pulled again.
  bool held = false;
  lease_grant grant;
};

/// What a worker reports to the chief: a few settled steps at a time (every
/// 8 steps or 50 ms, and before it ends), so that the chief is not woken
/// for every batch.
struct worker_report {
  int32_t worker = 0;
  int32_t epoch = 0;       ///< of the last step
  int32_t steps = 0;       ///< steps covered
  int32_t samples = 0;
  int32_t hits = 0;
  double loss_sum = 0;
  double step_seconds = 0; ///< wall time of the steps, summed
  int64_t clock = 0;       ///< the worker's own step count
  /// The most updates any shard applied between a pull of these steps and
  /// their push (0: the push met the version it was computed on).
  int64_t staleness = 0;
  /// Reading the steps' samples from the dataset (a streamed part's
  /// blocks, a mapped file's pages): wall time the steps waited on it,
  /// and the bytes read (from the file: compressed ones for gzip).
  double read_seconds = 0;
  int64_t read_bytes = 0;
};

/// A shard's full state: values, optimizer slots, version.
struct shard_state_msg {
  int32_t shard = 0;
  int64_t version = 0;
  std::vector<float> values;
  std::vector<std::string> slot_names;
  std::vector<std::vector<float>> slots;
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
};

/// A primary's replica: none, its copy under way, or in step (every push
/// the primary acknowledges has reached it).
enum class replica_state : int8_t { none = 0, copying = 1, in_step = 2 };

/// The feeder's counters.
struct feeder_stats {
  int64_t acked = 0;    ///< batches done
  int64_t position = 0; ///< batch_plan::position()
  int64_t total = 0;    ///< batches in the plan (batch_plan::total())
  std::vector<int64_t> epoch_samples; ///< samples done per epoch
  std::vector<worker_epochs> workers; ///< samples per worker per epoch
};

/// Where a paused feeder stands: what a checkpoint records of it.
struct feeder_position {
  int64_t step = 0; ///< batch_plan::position(): the checkpoint's step
  std::string plan; ///< batch_plan::save()
};

/// How a run ended.
struct cluster_summary {
  int64_t steps = 0;       ///< batches trained, all workers together
  double epochs = 0;
  double seconds = 0;
  double examples_per_sec = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  int32_t restarts = 0;
  int64_t version = 0;     ///< shard 0's version at the end
  int64_t pushes_accepted = 0, pushes_stale = 0, pushes_refused = 0;
  std::vector<int64_t> epoch_samples; ///< samples trained per epoch
  std::vector<worker_epochs> workers; ///< per worker, per epoch
};

// -- the data messages' wire form ---------------------------------------------
//
// What a worker and a shard exchange, described once (actors/protocol/
// wire_form.hpp): BASP's form is derived below, the data plane's frame in
// actors/data_plane/data_frames.hpp. The order of the fields is BASP's;
// the slot is where a field sits in a frame header.

template <class Form>
auto wire_form(Form& w, float_block& x) {
  using wire::slot;
  return w("float_block", wire::at<slot::shard>(x.shard),
           wire::at<slot::tag>(x.version), wire::floats{x.values});
}

template <class Form>
auto wire_form(Form& w, gradient_push& x) {
  using wire::slot;
  return w("gradient_push", wire::at<slot::shard>(x.shard),
           wire::at<slot::worker>(x.worker), wire::at<slot::tag>(x.tag),
           wire::at<slot::batch>(x.batch),
           wire::float_slice{x.buffer, x.offset, x.size});
}

template <class Form>
auto wire_form(Form& w, row_request& x) {
  using wire::slot;
  return w("row_request", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::at<slot::worker>(x.worker),
           wire::at<slot::flag>(x.peek), wire::row_ids{x.ids});
}

template <class Form>
auto wire_form(Form& w, row_block& x) {
  using wire::slot;
  return w("row_block", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::floats{x.values});
}

template <class Form>
auto wire_form(Form& w, row_push& x) {
  using wire::slot;
  return w("row_push", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::at<slot::worker>(x.worker),
           wire::at<slot::batch>(x.batch), wire::at<slot::tag>(x.tag),
           wire::row_ids{x.ids}, wire::floats{x.grads});
}

template <class Form>
auto wire_form(Form& w, push_ack& x) {
  using wire::slot;
  return w("push_ack", wire::at<slot::tag>(x.version),
           wire::at<slot::flag>(x.stale));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, float_block& x) {
  return wire::inspect(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gradient_push& x) {
  return wire::inspect(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_request& x) {
  return wire::inspect(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_block& x) {
  return wire::inspect(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_push& x) {
  return wire::inspect(f, x);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_ack& x) {
  return wire::inspect(f, x);
}

// -- inspect of the other messages --------------------------------------------

inline caf::error inspect(caf::serializer& f, shard_state_msg& x) {
  if (auto err = f(x.shard, x.version, x.slot_names))
    return err;
  if (auto err = detail::write_floats(f, x.values.data(), x.values.size()))
    return err;
  return detail::write_float_vectors(f, x.slots);
}

inline caf::error inspect(caf::deserializer& f, shard_state_msg& x) {
  if (auto err = f(x.shard, x.version, x.slot_names))
    return err;
  if (auto err = detail::read_floats(f, x.values))
    return err;
  return detail::read_float_vectors(f, x.slots);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, shard_state_msg& x) {
  return f(caf::meta::type_name("shard_state_msg"), x.shard, x.version,
           x.slot_names, static_cast<uint64_t>(x.values.size()));
}

inline caf::error inspect(caf::serializer& f, row_chunk& x) {
  if (auto err = f(x.shard, x.table, x.rows, x.pushes))
    return err;
  if (auto err = detail::write_ids(f, x.ids))
    return err;
  if (auto err = detail::write_floats(f, x.values.data(), x.values.size()))
    return err;
  return detail::write_float_vectors(f, x.slots);
}

inline caf::error inspect(caf::deserializer& f, row_chunk& x) {
  if (auto err = f(x.shard, x.table, x.rows, x.pushes))
    return err;
  if (auto err = detail::read_ids(f, x.ids))
    return err;
  if (auto err = detail::read_floats(f, x.values))
    return err;
  return detail::read_float_vectors(f, x.slots);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, row_chunk& x) {
  return f(caf::meta::type_name("row_chunk"), x.shard, x.table, x.rows,
           x.pushes, static_cast<uint64_t>(x.ids.size()));
}

inline caf::error inspect(caf::serializer& f, block_image& x) {
  using namespace detail;
  caf::error err;
  auto step = [&](auto&& write) {
    if (!err)
      err = write();
  };
  step([&] { return write_floats(f, x.values.data(), x.values.size()); });
  step([&] { return f(x.slot_names); });
  step([&] { return write_float_vectors(f, x.slots); });
  step([&] {
    return f(x.lowered_beta1_ratio, x.version, x.learning_rate, x.aggregate,
             x.log_base, x.unnamed_through, x.stale_mean, x.accepted, x.stale,
             x.refused, x.staleness_sum, x.staleness_max);
  });
  step([&] { return write_raw(f, x.workers); });
  step([&] { return write_raw(f, x.clocks); });
  step([&] { return write_raw(f, x.log); });
  step([&] { return write_floats(f, x.sum.data(), x.sum.size()); });
  step([&] { return write_raw(f, x.pushed); });
  step([&] { return write_raw(f, x.last_update); });
  return err;
}

inline caf::error inspect(caf::deserializer& f, block_image& x) {
  using namespace detail;
  caf::error err;
  auto step = [&](auto&& read) {
    if (!err)
      err = read();
  };
  step([&] { return read_floats(f, x.values); });
  step([&] { return f(x.slot_names); });
  step([&] { return read_float_vectors(f, x.slots); });
  step([&] {
    return f(x.lowered_beta1_ratio, x.version, x.learning_rate, x.aggregate,
             x.log_base, x.unnamed_through, x.stale_mean, x.accepted, x.stale,
             x.refused, x.staleness_sum, x.staleness_max);
  });
  step([&] { return read_raw(f, x.workers); });
  step([&] { return read_raw(f, x.clocks); });
  step([&] { return read_raw(f, x.log); });
  step([&] { return read_floats(f, x.sum); });
  step([&] { return read_raw(f, x.pushed); });
  step([&] { return read_raw(f, x.last_update); });
  return err;
}

inline caf::error inspect(caf::serializer& f, replica_op& x) {
  using namespace detail;
  if (auto err = f(x.kind, x.worker, x.version, x.key, x.value))
    return err;
  if (x.kind == replica_op::image) {
    if (auto err = inspect(f, x.block))
      return err;
    if (auto err = write_raw(f, x.held_workers))
      return err;
    if (auto err = write_raw(f, x.held_tables))
      return err;
    if (auto err = write_raw(f, x.held_tags))
      return err;
    if (auto err = f(static_cast<uint64_t>(x.held_ids.size())))
      return err;
    for (auto& ids : x.held_ids)
      if (auto err = write_ids(f, ids))
        return err;
    return write_float_vectors(f, x.held_grads);
  }
  if (x.kind == replica_op::rows)
    return inspect(f, x.chunk);
  return {};
}

inline caf::error inspect(caf::deserializer& f, replica_op& x) {
  using namespace detail;
  if (auto err = f(x.kind, x.worker, x.version, x.key, x.value))
    return err;
  if (x.kind == replica_op::image) {
    if (auto err = inspect(f, x.block))
      return err;
    if (auto err = read_raw(f, x.held_workers))
      return err;
    if (auto err = read_raw(f, x.held_tables))
      return err;
    if (auto err = read_raw(f, x.held_tags))
      return err;
    uint64_t n = 0;
    if (auto err = f(n))
      return err;
    if (auto err = check_fits(f, n, 1))
      return err;
    x.held_ids.resize(n);
    for (auto& ids : x.held_ids)
      if (auto err = read_ids(f, ids))
        return err;
    return read_float_vectors(f, x.held_grads);
  }
  if (x.kind == replica_op::rows)
    return inspect(f, x.chunk);
  return {};
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, replica_op& x) {
  return f(caf::meta::type_name("replica_op"), x.kind, x.worker, x.version,
           x.key, x.value);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, lease_grant& x) {
  return f(caf::meta::type_name("lease_grant"), x.id, x.epoch, x.index,
           x.batch, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, lease_reply& x) {
  return f(caf::meta::type_name("lease_reply"), x.status, x.held, x.grant);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("worker_report"), x.worker, x.epoch, x.steps,
           x.samples, x.hits, x.loss_sum, x.step_seconds, x.clock, x.staleness,
           x.read_seconds, x.read_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_usage& x) {
  return f(caf::meta::type_name("process_usage"), x.resident_bytes,
           x.cpu_seconds, x.pid, x.host, x.program);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_stats& x) {
  return f(caf::meta::type_name("shard_stats"), x.shard, x.version, x.accepted,
           x.stale, x.refused, x.ssp_pulls, x.ssp_max_lead, x.pulled_bytes,
           x.pushed_bytes, x.rows, x.row_bytes, x.rows_pulled, x.rows_pushed,
           x.follower, x.replica, x.replica_lag, x.replica_rows,
           x.replica_version);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_history& x) {
  return f(caf::meta::type_name("shard_history"), x.shard, x.version, x.since,
           x.complete, x.batches, x.size);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_epochs& x) {
  return f(caf::meta::type_name("worker_epochs"), x.worker, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feeder_stats& x) {
  return f(caf::meta::type_name("feeder_stats"), x.acked, x.position,
           x.total, x.epoch_samples, x.workers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feeder_position& x) {
  return f(caf::meta::type_name("feeder_position"), x.step, x.plan);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_summary& x) {
  return f(caf::meta::type_name("cluster_summary"), x.steps, x.epochs, x.seconds,
           x.examples_per_sec, x.test_accuracy, x.test_loss, x.restarts,
           x.version, x.pushes_accepted, x.pushes_stale, x.pushes_refused,
           x.epoch_samples, x.workers);
}

} // namespace troupe

// -- type IDs and atoms -------------------------------------------------------

// CAF's block macros end without a semicolon, which makes clang-format
// indent everything after them: the rest of the file keeps its hand-made
// layout.
// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(troupe, (troupe::float_block))
  CAF_ADD_TYPE_ID(troupe, (troupe::gradient_push))
  CAF_ADD_TYPE_ID(troupe, (troupe::push_ack))
  CAF_ADD_TYPE_ID(troupe, (troupe::lease_reply))
  CAF_ADD_TYPE_ID(troupe, (troupe::worker_report))
  CAF_ADD_TYPE_ID(troupe, (troupe::shard_state_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::shard_stats))
  CAF_ADD_TYPE_ID(troupe, (troupe::feeder_stats))
  CAF_ADD_TYPE_ID(troupe, (troupe::cluster_summary))
  CAF_ADD_TYPE_ID(troupe, (troupe::shard_history))
  CAF_ADD_TYPE_ID(troupe, (std::vector<int64_t>))
  CAF_ADD_TYPE_ID(troupe, (std::vector<int32_t>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actor_ref))
  CAF_ADD_TYPE_ID(troupe, (troupe::tune_key))
  CAF_ADD_TYPE_ID(troupe, (troupe::cluster_view))
  CAF_ADD_TYPE_ID(troupe, (troupe::feeder_position))
  CAF_ADD_TYPE_ID(troupe, (troupe::row_request))
  CAF_ADD_TYPE_ID(troupe, (troupe::row_block))
  CAF_ADD_TYPE_ID(troupe, (troupe::row_push))
  CAF_ADD_TYPE_ID(troupe, (troupe::row_chunk))
  CAF_ADD_TYPE_ID(troupe, (troupe::replica_op))
CAF_END_TYPE_ID_BLOCK(troupe)

CAF_ADD_ATOM(troupe, troupe, pull_atom, "pull")
CAF_ADD_ATOM(troupe, troupe, push_atom, "push")
CAF_ADD_ATOM(troupe, troupe, join_atom, "join")
CAF_ADD_ATOM(troupe, troupe, leave_atom, "leave")
CAF_ADD_ATOM(troupe, troupe, lease_atom, "lease")
CAF_ADD_ATOM(troupe, troupe, ack_atom, "ack")
CAF_ADD_ATOM(troupe, troupe, requeue_atom, "requeue")
CAF_ADD_ATOM(troupe, troupe, pause_atom, "pause")
CAF_ADD_ATOM(troupe, troupe, resume_atom, "resume")
CAF_ADD_ATOM(troupe, troupe, finish_atom, "finish")
CAF_ADD_ATOM(troupe, troupe, snapshot_atom, "snapshot")
CAF_ADD_ATOM(troupe, troupe, restore_atom, "restore")
CAF_ADD_ATOM(troupe, troupe, stats_atom, "stats")
CAF_ADD_ATOM(troupe, troupe, report_atom, "report")
CAF_ADD_ATOM(troupe, troupe, step_atom, "step")
CAF_ADD_ATOM(troupe, troupe, run_atom, "run")
CAF_ADD_ATOM(troupe, troupe, place_atom, "place")
CAF_ADD_ATOM(troupe, troupe, register_atom, "register")
CAF_ADD_ATOM(troupe, troupe, tune_atom, "tune")
CAF_ADD_ATOM(troupe, troupe, deadline_atom, "deadline")
CAF_ADD_ATOM(troupe, troupe, expire_atom, "expire")
CAF_ADD_ATOM(troupe, troupe, data_atom, "data")
CAF_ADD_ATOM(troupe, troupe, stop_atom, "stop")
CAF_ADD_ATOM(troupe, troupe, adopt_atom, "adopt")
CAF_ADD_ATOM(troupe, troupe, skip_atom, "skip")
CAF_ADD_ATOM(troupe, troupe, forget_atom, "forget")
CAF_ADD_ATOM(troupe, troupe, kill_atom, "kill")
CAF_ADD_ATOM(troupe, troupe, who_atom, "who")
CAF_ADD_ATOM(troupe, troupe, replicate_atom, "replicate")
CAF_ADD_ATOM(troupe, troupe, promote_atom, "promote")
CAF_ADD_ATOM(troupe, troupe, image_atom, "image")
CAF_ADD_ATOM(troupe, troupe, reshard_atom, "reshard")
CAF_ADD_ATOM(troupe, troupe, grow_atom, "grow")
CAF_ADD_ATOM(troupe, troupe, drain_atom, "drain")

// -- actor interfaces ---------------------------------------------------------

namespace troupe {

/// What a worker asks of a shard: pulls and pushes, of values and of rows.
/// A shard_actor is one; so is a data-plane stub (actors/data_plane), which
/// answers these four over its connection for a shard on another node.
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
  // A primary's op stream to its replica (replica_op), between the pushes
  // it forwards; replies with the replica's version.
  caf::replies_to<replicate_atom, replica_op>::with<push_ack>>;

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
  caf::replies_to<image_atom>::with<replica_op>>;

/// The data feeder (actors/feeder.hpp).
using feeder_actor = caf::typed_actor<
  // The next batch for a worker, or wait (paused, all out), or done.
  caf::replies_to<lease_atom, int32_t>::with<lease_reply>,
  // Marks a lease done (an unknown or repeated ack changes nothing).
  caf::reacts_to<ack_atom, int64_t>,
  // Puts a lost worker's leases back; replies with how many.
  caf::replies_to<requeue_atom, int32_t>::with<int32_t>,
  // Leaves samples [first, first + count) out of the batches leased from
  // now on (batch_plan::skip); replies with the ranges left out so far.
  caf::replies_to<skip_atom, int64_t, int64_t>::with<int32_t>,
  // Stops leasing; replies with its position once no lease is out.
  caf::replies_to<pause_atom>::with<feeder_position>,
  // Leases again after a pause.
  caf::reacts_to<resume_atom>,
  // Leases nothing more: workers get done.
  caf::reacts_to<finish_atom>,
  // Continues from a checkpointed position and plan text with the given
  // plan numbers after it done too (batch_plan::restore); replies with the
  // position.
  caf::replies_to<restore_atom, int64_t, std::string,
                  std::vector<int64_t>>::with<int64_t>,
  // Gives workers their own streams (replicated, sharded; nothing in
  // shared mode); replies with the batches in the plan now.
  caf::replies_to<join_atom, std::vector<int32_t>>::with<int64_t>,
  // Counters: batches done, position, samples done per epoch and worker.
  caf::replies_to<stats_atom>::with<feeder_stats>>;

/// A worker (actors/worker.hpp).
using worker_actor = caf::typed_actor<
  // Runs the next training step (its own loop).
  caf::reacts_to<step_atom>,
  // Starts no new step and ends normally once every pushed step is
  // settled: a lease it holds but has not trained stays unacked, for the
  // chief to put back (a node that leaves the run).
  caf::reacts_to<finish_atom>,
  // The shards moved (the chief added or drained one while the feeder
  // was paused): pulls and pushes go to these from now on, shard i owning
  // [bounds[i], bounds[i+1]); no shards: they are moving, and a pull
  // answered or failed now waits for the map. Sent by the worker's node
  // agent, which makes the data-plane stubs; replies once the worker has
  // them.
  caf::replies_to<reshard_atom, std::vector<shard_data_actor>,
                  std::vector<uint64_t>>::with<bool>>;

// -- across processes ---------------------------------------------------------

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
/// `data_links[i]` is the "host:port" of the data plane (actors/data_plane/data_link)
/// of the node that holds shard i, empty when the worker reaches that
/// shard as an actor in its own process. The worker's pulls and pushes
/// then go on the data plane's own connection between the two nodes, never
/// as CAF messages: CAF 0.17 routes a message to a node it has no
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
  return f(caf::meta::type_name("shard_map"), x.shards, x.bounds,
           x.data_links);
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
  // The run is over: stop everything here and quit, with the run's error
  // as the exit reason (none: the run succeeded), which the node process
  // reports.
  caf::replies_to<finish_atom, caf::error>::with<bool>,
  // Who listens here: the node's name and its chief's "host:port" (from
  // the cluster file), for a shell or a node that came to this port
  // looking for the chief.
  caf::replies_to<who_atom>::with<std::string, std::string>,
  // This process's resident memory and CPU time (the shell's `nodes`, the
  // metrics endpoint).
  caf::replies_to<stats_atom>::with<process_usage>>;

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
  // -- troupe-shell (actors/protocol/shell_protocol.hpp; errors leave the run as
  // it is) --
  // The cluster as the chief sees it; the shards and the feeder are asked
  // for their counters (5 s at most; one that does not answer is down).
  caf::replies_to<stats_atom>::with<cluster_view>,
  // N more workers on a node (empty: the least loaded); their ids, node.
  caf::replies_to<join_atom, int32_t, std::string>::with<
    std::vector<int32_t>, std::string>,
  // Kills a worker or a shard (a fault drill).
  caf::replies_to<kill_atom, actor_ref>::with<bool>,
  // Writes a checkpoint now; replies with its path.
  caf::replies_to<snapshot_atom>::with<std::string>,
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

CAF_BEGIN_TYPE_ID_BLOCK(troupe_cluster, caf::id_block::troupe::end)
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::shard_spawn))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::worker_spawn))
  CAF_ADD_TYPE_ID(troupe_cluster, (std::vector<troupe::shard_actor>))
  CAF_ADD_TYPE_ID(troupe_cluster, (std::vector<troupe::shard_data_actor>))
  CAF_ADD_TYPE_ID(troupe_cluster, (std::vector<uint64_t>))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::live_shards))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::shard_map))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::node_registration))
  // Handles travel in messages: the agent's in a registration, the
  // shards' and workers' in the agent's replies.
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::shard_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::shard_data_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::feeder_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::worker_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::node_agent_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::chief_actor))
  CAF_ADD_TYPE_ID(troupe_cluster, (troupe::process_usage))
CAF_END_TYPE_ID_BLOCK(troupe_cluster)

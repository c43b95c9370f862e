// What a primary shard sends its replica beside the pushes it forwards
// (actors/shard_replica.cpp): one replica_op per change, each operation a
// type of its own, and the rows of a table as a checkpoint holds them
// (row_chunk, which a shard's snapshot and restore use too). The messages
// that carry vectors of numbers describe their BASP form once
// (raw_form_of below), for writing and reading alike.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "actors/protocol/float_wire.hpp"
#include "actors/protocol/ids.hpp"
#include "caf/all.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/sparse/sync_rows.hpp"

namespace troupe {

/// Rows of one table of one shard as a checkpoint holds them: their ids,
/// values and optimizer slots (ids.size() x dim floats each), in the
/// shard's own order. A snapshot answers rows [first, first + count) of
/// that order, with `rows` (all the shard holds) and `pushes` (the
/// table's, which Adam's bias correction counts); a restore takes them
/// back (pushes -1: leave the count). A replica restores them over what
/// it holds.
struct row_chunk {
  int32_t shard = 0;
  int32_t table = 0;
  uint64_t rows = 0;
  int64_t pushes = -1;
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  /// A table that evicts (sparse_table::keeps_ages): each row's pushes
  /// since its last push and its pushes; empty otherwise, or when not
  /// known (a restore then counts the rows as pushed now).
  std::vector<int64_t> ages;
  std::vector<uint32_t> uses;
};

/// The whole state a replica starts from: the block, the row pushes held
/// for a sync update; its tables start empty (their rows follow as
/// row_chunks). Also what a shard answers image_atom with: the chief
/// moving the run's shards cuts these anew.
struct replica_image {
  block_image block;
  std::vector<held_row_push> held; ///< runtime/sparse/sync_rows.hpp
};

/// A table's admission counts on one shard (runtime/sparse/
/// admission_filter.hpp): counters [first, first + counts.size()) of its
/// `total`, hashed `hashes` times. A snapshot answers them (total 0: the
/// table counts no keys). A restore adds them to the shard's, saturating,
/// so that the counts of the shards a checkpoint had add up on the shards
/// it is put back on; a replica's copy (`replace`) sets them instead: the
/// primary's counts then already hold the pushes it forwarded before.
struct key_counts {
  int32_t shard = 0;
  int32_t table = 0;
  uint64_t total = 0;
  uint64_t first = 0;
  int32_t hashes = 0;
  bool replace = false;
  std::vector<uint8_t> counts;
};

/// Rows of table `table` its primary evicted: a replica's bounded tables
/// evict only these (sparse_table::set_follower).
struct replica_evict {
  int32_t table = 0;
  std::vector<uint64_t> ids;
};

/// A table's log of evictions (sparse_table::eviction_log), which a delta
/// export's tombstones come from: the entries at or before push `since`
/// are forgotten (an export up to there is durable); with `keys`, the log
/// is set to (pushes[i], keys[i]) first (a replica's copy).
struct replica_eviction_log {
  int32_t table = 0;
  int64_t since = -1;
  bool replace = false;
  std::vector<int64_t> pushes;
  std::vector<uint64_t> keys;
};

/// The chief's messages that change a shard, as its replica applies them.
struct replica_join {
  int32_t worker = 0;
};
struct replica_leave {
  int32_t worker = 0;
};
struct replica_tune {
  std::string key;
  double value = 0;
};
/// Version V is in a checkpoint (-1: forgets nothing; sent for its answer
/// alone, which comes after every op before it).
struct replica_forget {
  int64_t version = -1;
};
struct replica_adopt {};

/// One change a primary sends its replica, in the order the primary made
/// it, between the pushes it forwards. Its type says which.
struct replica_op {
  using any =
    std::variant<replica_image, row_chunk, replica_join, replica_leave,
                 replica_tune, replica_forget, replica_adopt, key_counts,
                 replica_evict, replica_eviction_log>;
  any op;
};

/// A primary's replica: none, its copy under way, or in step (every push
/// the primary acknowledges has reached it).
enum class replica_state : int8_t { none = 0, copying = 1, in_step = 2 };

// -- BASP forms --------------------------------------------------------------

template <class Processor>
caf::error raw_form_of(Processor& f, row_chunk& x) {
  return detail::raw_form<Processor>{f}
    .fields(x.shard, x.table, x.rows, x.pushes)
    .raw(x.ids)
    .raw(x.values)
    .lists(x.slots)
    .raw(x.ages)
    .raw(x.uses)
    .done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, replica_evict& x) {
  return detail::raw_form<Processor>{f}.fields(x.table).raw(x.ids).done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, replica_eviction_log& x) {
  return detail::raw_form<Processor>{f}
    .fields(x.table, x.since, x.replace)
    .raw(x.pushes)
    .raw(x.keys)
    .done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, key_counts& x) {
  return detail::raw_form<Processor>{f}
    .fields(x.shard, x.table, x.total, x.first, x.hashes, x.replace)
    .raw(x.counts)
    .done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, block_image& x) {
  return detail::raw_form<Processor>{f}
    .raw(x.values)
    .fields(x.slot_names)
    .lists(x.slots)
    .fields(x.lowered_beta1_ratio, x.version, x.learning_rate, x.aggregate,
            x.log_base, x.unnamed_through, x.done_below, x.stale_mean,
            x.accepted, x.stale, x.refused, x.staleness_sum, x.staleness_max,
            x.uncompensated)
    .raw(x.workers)
    .raw(x.clocks)
    .raw(x.log)
    .raw(x.sum)
    .raw(x.pushed)
    .raw(x.last_update)
    .raw(x.compensation.versions)
    .lists(x.compensation.values)
    .raw(x.compensation.step_mean)
    .raw(x.compensation.square_mean)
    .done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, held_row_push& x) {
  return detail::raw_form<Processor>{f}
    .fields(x.worker, x.table, x.tag)
    .raw(x.ids)
    .shared(x.grads)
    .done();
}

template <class Processor>
caf::error raw_form_of(Processor& f, replica_image& x) {
  auto form = detail::raw_form<Processor>{f};
  form.part(x.block);
  uint64_t n = x.held.size();
  form.fields(n);
  if (auto err = form.done())
    return err;
  if constexpr (detail::is_reader<Processor>) {
    if (auto err = detail::check_fits(f, n, 1))
      return err;
    x.held.resize(n);
  }
  for (auto& h : x.held)
    if (auto err = raw_form_of(f, h))
      return err;
  return {};
}

template <class Processor>
caf::error raw_form_of(Processor& f, replica_join& x) {
  return f(x.worker);
}
template <class Processor>
caf::error raw_form_of(Processor& f, replica_leave& x) {
  return f(x.worker);
}
template <class Processor>
caf::error raw_form_of(Processor& f, replica_tune& x) {
  return f(x.key, x.value);
}
template <class Processor>
caf::error raw_form_of(Processor& f, replica_forget& x) {
  return f(x.version);
}
template <class Processor>
caf::error raw_form_of(Processor&, replica_adopt&) {
  return {};
}

/// An op: the index of its type in replica_op::any, then its form.
template <class Processor>
caf::error raw_form_of(Processor& f, replica_op& x) {
  auto kind = static_cast<uint8_t>(x.op.index());
  if (auto err = f(kind))
    return err;
  if constexpr (detail::is_reader<Processor>)
    if (!detail::emplace_by_index(x.op, kind))
      return caf::make_error(caf::sec::invalid_argument);
  return std::visit([&](auto& op) { return raw_form_of(f, op); }, x.op);
}

// Each message's inspect: its raw form on the wire, a summary for CAF's
// other inspectors (to_string).

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error> inspect(Inspector& f,
                                                                 row_chunk& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, row_chunk& x) {
  return f(caf::meta::type_name("row_chunk"), x.shard, x.table, x.rows,
           x.pushes, static_cast<uint64_t>(x.ids.size()));
}

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error>
inspect(Inspector& f, key_counts& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, key_counts& x) {
  return f(caf::meta::type_name("key_counts"), x.shard, x.table, x.total,
           x.first, x.hashes, static_cast<uint64_t>(x.counts.size()));
}

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error>
inspect(Inspector& f, block_image& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error>
inspect(Inspector& f, replica_image& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, replica_image& x) {
  return f(caf::meta::type_name("replica_image"), x.block.version,
           static_cast<uint64_t>(x.block.values.size()),
           static_cast<uint64_t>(x.held.size()));
}

template <class Inspector>
std::enable_if_t<detail::is_wire<Inspector>, caf::error>
inspect(Inspector& f, replica_op& x) {
  return raw_form_of(f, x);
}

template <class Inspector>
std::enable_if_t<!detail::is_wire<Inspector>, typename Inspector::result_type>
inspect(Inspector& f, replica_op& x) {
  return f(caf::meta::type_name("replica_op"),
           static_cast<uint8_t>(x.op.index()));
}

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_replica, troupe::type_ids::replica)
  CAF_ADD_TYPE_ID(troupe_replica, (troupe::row_chunk))
  CAF_ADD_TYPE_ID(troupe_replica, (troupe::replica_op))
  CAF_ADD_TYPE_ID(troupe_replica, (troupe::replica_image))
  CAF_ADD_TYPE_ID(troupe_replica, (troupe::key_counts))
CAF_END_TYPE_ID_BLOCK(troupe_replica)
// clang-format on

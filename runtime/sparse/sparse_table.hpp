// A shard's part of a sparse embedding table: rows of `dim` floats keyed by
// 64-bit ids, pulled and pushed row by row, updated by a row-wise optimizer
// that touches only the rows a push names (lazily, as TF's sparse apply
// and LazyAdam do: an untouched row's value and state stay as they are).
//
// Rows live in chunks of rows_per_chunk (values, then each optimizer slot
// in chunks of its own), so a table that grows by first touch never copies
// what it holds; an id_index maps an id to its slot. With a fixed
// vocabulary every row exists from the start and a row's slot is its id.
//
// A row is created with values drawn from (seed, id) alone, so every
// process, every placement and every order of first touches gives a row
// the same initial values: a table re-spread over other shards starts
// identical.
//
// A table on an endless stream stays bounded by its admission (a key gets
// a row only once pushed min_count times, or with a probability) and its
// eviction (rows not pushed for steps_to_live pushes, and past max_rows
// the least recently or least often pushed). An evicted row's slot is
// filled by the last row, so slots stay dense and memory stops growing
// once the table is full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "caf/error.hpp"
#include "runtime/sparse/admission_filter.hpp"
#include "runtime/sparse/id_index.hpp"
#include "runtime/sparse/sparse_config.hpp"

namespace troupe {

/// The shard (0..shards-1) that holds row `id`: a hash of the id, so that
/// the few hottest ids of a Zipf-skewed field (the smallest ones, as
/// readers assign them) spread over every shard instead of loading the
/// first, as ranges of ids would.
inline int32_t shard_of_row(uint64_t id, int32_t shards) {
  // The top bits: the low ones also pick the bucket inside the shard.
  return static_cast<int32_t>((mix64(id ^ 0x726f77ull) >> 33)
                              % static_cast<uint64_t>(shards));
}

class sparse_table {
public:
  static constexpr size_t rows_per_chunk = 1 << 16;

  sparse_table(embedding_table_config table, sparse_optimizer_config opt);

  /// Copies rows ids[0..n) into out (n x dim), making absent ones. A
  /// bounded table (admission or eviction) makes none: an absent row reads
  /// as it would be made, or as zeros with admission. An id at
  /// or above the vocabulary is refused (errc::invalid_argument, naming
  /// the table and the id) before anything is made or copied.
  caf::error pull(const uint64_t* ids, size_t n, float* out);

  /// Applies gradients grads (n x dim) to rows ids[0..n): one optimizer
  /// step, in which rows named more than once get the sum of their
  /// gradients (as TF sums an IndexedSlices' duplicates). Absent rows are
  /// made first (with admission: those admitted now; the others' gradients
  /// are dropped). Then rows due to go are evicted. Refuses as pull does.
  caf::error push(const uint64_t* ids, size_t n, const float* grads);

  /// Copies rows ids[0..n) into out as pull does, but makes no row: an
  /// absent row reads as it would be made (with admission: as zeros, what
  /// training read). What an evaluation reads (it must not grow the
  /// table); not counted as pulled.
  caf::error peek(const uint64_t* ids, size_t n, float* out) const;

  /// The error pull and push give ids[0..n) (one at or above the
  /// vocabulary); none when every id fits. For a push held before it is
  /// applied (a sync update's), so that it is refused when it arrives.
  caf::error check(const uint64_t* ids, size_t n) const;

  /// Rows [first, first + n) in slot order (for_each_row's): their ids,
  /// and their values and each optimizer slot (n x dim floats each), for
  /// a checkpoint's pieces; with `ages` and `uses` (a table that evicts:
  /// keeps_ages()), each row's pushes since its last and its pushes. Rows
  /// past rows() are left as they are.
  void copy_rows(size_t first, size_t n, uint64_t* ids, float* values,
                 float* const* slots, int64_t* ages = nullptr,
                 uint32_t* uses = nullptr) const;

  /// Whether rows have an age and a push count that eviction and delta
  /// exports read (and a checkpoint keeps).
  bool keeps_ages() const { return table_.keeps_ages(); }

  // -- delta exports (embedding_table_config::changes) ----------------------
  // A row's stamp is the push that last changed (or made) it, the clock a
  // replica shares with its primary: the rows changed since an export at
  // push count P are those stamped after P, whichever of the two cuts them.

  /// The slots of the rows stamped after push `since` (every row when
  /// `since` < 0), ascending.
  std::vector<uint32_t> changed_slots(int64_t since) const;
  /// Copies the rows at slots[0..n) (changed_slots') into ids and values.
  void copy_slots(const uint32_t* slots, size_t n, uint64_t* ids,
                  float* values) const;
  /// The keys evicted after push `since` that have no row now (a key
  /// evicted and made again is a changed row, not a tombstone), sorted.
  std::vector<uint64_t> evicted_since(int64_t since) const;
  /// Forgets the evictions at or before push `upto`: an export up to
  /// there is durable.
  void forget_evicted(int64_t upto);
  /// The log of evictions not forgotten: (push, key), oldest first; what a
  /// replica's copy starts from.
  const std::vector<std::pair<int64_t, uint64_t>>& eviction_log() const {
    return gone_;
  }
  void set_eviction_log(std::vector<std::pair<int64_t, uint64_t>> log) {
    gone_ = std::move(log);
  }

  /// The row's values, or null when it does not exist.
  const float* row(uint64_t id) const;

  const embedding_table_config& table() const { return table_; }
  const sparse_optimizer_config& optimizer() const { return opt_; }
  int dim() const { return table_.dim; }
  /// Rows that exist.
  size_t rows() const { return rows_; }
  /// Bytes of values, optimizer state and index.
  size_t memory_bytes() const;
  /// Row ids in pulls answered and in pushes taken (with duplicates as
  /// they came), and pushes taken.
  int64_t rows_pulled() const { return rows_pulled_; }
  int64_t rows_pushed() const { return rows_pushed_; }
  int64_t pushes() const { return pushes_; }
  /// Rows made, gradients of absent keys dropped (not admitted), and rows
  /// evicted, since the table was made here.
  int64_t rows_made() const { return rows_made_; }
  int64_t rows_rejected() const { return rows_rejected_; }
  int64_t rows_evicted() const { return rows_evicted_; }
  /// Whether pushes evict (steps_to_live, max_rows). A replica's table
  /// does not: it evicts only what its primary did (evict_ids), so that
  /// its rows stay its primary's. Nor does a primary's while its replica
  /// copies its rows: a row moved into a slot already copied would be
  /// missed.
  void set_evicting(bool evicting) { evicting_ = evicting; }
  /// The ids evicted since the last call: what a primary tells its
  /// replica to evict. Kept until taken: the shard takes them after each
  /// push it applies.
  std::vector<uint64_t> take_evicted() { return std::move(evicted_); }
  /// Evicts the rows of ids[0..n) that are here (what the primary
  /// evicted).
  void evict_ids(const uint64_t* ids, size_t n);

  /// The admission filter's, when the table counts keys (min_count).
  const admission_filter* filter() const { return filter_.get(); }
  admission_filter* filter() { return filter_.get(); }

  /// Optimizer slots per row: 0 (sgd), 1 (adagrad: "accumulator"), 2
  /// (adam: "m", "v"); and their names.
  size_t slot_count() const;
  std::vector<std::string> slot_names() const;

  /// Calls f(id, values, slots) for every row, in slot order (the order
  /// rows were made), where slots[k] points at slot k's dim floats: what a
  /// checkpoint streams, chunk by chunk, without a copy of the table.
  template <class F>
  void for_each_row(F&& f) const {
    std::vector<const float*> slots(slot_count());
    for (size_t s = 0; s < rows_; ++s) {
      for (size_t k = 0; k < slots.size(); ++k)
        slots[k] = at(state_[k], s);
      f(ids_of_slot(s), at(values_, s), slots.data());
    }
  }

  /// Sets a row's values and slots (restoring a checkpoint): the row is
  /// made if absent. `slots` holds slot_count() pointers to dim floats.
  /// `age` (pushes since its last, counted from the push count now) and
  /// `uses` as copy_rows gave them; age -1: unknown, the row counts as
  /// pushed now.
  caf::error restore_row(uint64_t id, const float* values,
                         const float* const* slots, int64_t age = -1,
                         uint32_t uses = 0);
  /// The pushes count, which Adam's bias correction uses (a checkpoint's);
  /// set before the rows are restored, whose ages count from it.
  void set_pushes(int64_t pushes);

private:
  using chunks = std::vector<std::unique_ptr<float[]>>;

  float* at(const chunks& c, size_t slot) const {
    return c[slot / rows_per_chunk].get()
           + (slot % rows_per_chunk) * static_cast<size_t>(table_.dim);
  }
  uint64_t ids_of_slot(size_t slot) const {
    return table_.create == embedding_table_config::rows::fixed ? slot
                                                                : ids_[slot];
  }
  /// The slot of `id`, making the row when absent.
  size_t slot_of(uint64_t id);
  void make_row(size_t slot, uint64_t id);
  /// Whether a push admits absent key `id` now (and counts it).
  bool admits(uint64_t id);
  bool admitting() const {
    return table_.admit.type != row_admission::kind::all;
  }
  /// A bounded table, and one that exports deltas, makes rows on pushes
  /// only: what it holds, and so what it evicts and exports, follows from
  /// its pushes alone, which a replica applies too (pulls do not reach
  /// it).
  bool bounded() const {
    return table_.create == embedding_table_config::rows::on_touch
           && (admitting() || keeps_ages());
  }
  /// The row at `slot` was pushed to now.
  void touch(size_t slot);
  /// Evicts the rows past their time to live and over max_rows.
  void evict_due();
  /// Removes the rows at `slots` (sorted, descending), each hole filled
  /// by the last row.
  void remove_slots(const std::vector<size_t>& slots);
  /// A new row's values, drawn from (seed, id).
  void initial_row(uint64_t id, float* out) const;
  void apply(size_t slot, const float* g, float alpha_adam);

  embedding_table_config table_;
  sparse_optimizer_config opt_;
  id_index index_;
  std::vector<uint64_t> ids_; ///< on_touch: the id of each slot
  chunks values_;
  std::vector<chunks> state_; ///< per optimizer slot
  size_t rows_ = 0;
  int64_t rows_pulled_ = 0, rows_pushed_ = 0, pushes_ = 0;
  int64_t rows_made_ = 0, rows_rejected_ = 0, rows_evicted_ = 0;
  std::unique_ptr<admission_filter> filter_; ///< admit min_count
  /// With eviction, per slot: the push that last touched it (or made it),
  /// and (lfu) how many pushes did.
  std::vector<int64_t> touched_;
  std::vector<uint32_t> uses_;
  int64_t next_sweep_ = 0; ///< the push at which steps_to_live is checked
  bool evicting_ = true;
  std::vector<uint64_t> evicted_; ///< since take_evicted
  /// With changes: (push, key) of each eviction not yet forgotten.
  std::vector<std::pair<int64_t, uint64_t>> gone_;
  // A push's scratch: its distinct ids and their summed gradients.
  id_index scratch_;
  std::vector<uint64_t> unique_;
  std::vector<uint32_t> position_;
  std::vector<float> summed_;
};

} // namespace troupe

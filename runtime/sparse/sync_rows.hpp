// sync mode's rows: a worker's row push joins its dense push. A sync update
// is the mean of `aggregate` workers' dense pushes (param_block); a
// worker's rows belong to that update exactly when its dense push does (a
// backup worker's late rows are dropped with its late push), and are
// applied with it: per table one optimizer step on the rows' gradients
// summed over the update's pushes and divided by their number, the mean
// the dense part gets. TF's SparseConditionalAccumulator divides each row
// by the pushes that named it instead; dividing by all of them keeps a
// sync step of N workers the step of one batch N times as large, dense
// and sparse alike, whatever the rows' overlap.
//
// The shard actor keeps one of these beside its param_block and its
// tables, and calls it where the dense part may have moved on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/sparse/sparse_table.hpp"

namespace troupe {

/// One worker's row push to one table of a shard.
struct held_row_push {
  int32_t worker = 0;
  int32_t table = 0;
  int64_t tag = 0; ///< the version the push was computed on
  std::vector<uint64_t> ids;
  std::shared_ptr<const std::vector<float>> grads; ///< ids.size() x dim
};

class sync_rows {
public:
  using tables = std::vector<std::unique_ptr<sparse_table>>;

  /// Whether a shard of `block` with `t` holds its row pushes: sync mode
  /// and at least one table.
  static bool applies(const param_block& block, const tables& t) {
    return block.opts().mode == consistency_mode::sync && !t.empty();
  }

  /// Holds `p` (its shape and values already checked against `table`)
  /// until its worker's dense push comes; refuses what that push would
  /// refuse (`shard` names the shard in the error). True when the push is
  /// stale instead: its update was applied without it, or the worker is in
  /// the update already (its second dense push would be stale too).
  caf::expected<bool> hold(const param_block& block, const sparse_table& table,
                           held_row_push p, int32_t shard);

  /// `worker`'s dense push came out as `r` while the version was `before`:
  /// its held rows stay for the update when the push joined it and are
  /// dropped otherwise; then as after(). Nothing is held where the rows do
  /// not apply, so any shard may call it after every dense push.
  void settle(const param_block& block, tables& t, int32_t worker,
              const caf::expected<param_block::outcome>& r, int64_t before);

  /// After anything that may have applied an update (a push, a worker
  /// leaving, a new aggregate; the version was `before`): the rows held
  /// for it are applied with it.
  void after(const param_block& block, tables& t, int64_t before);

  /// Drops what `worker` holds (it left the run).
  void drop(int32_t worker);

  /// Forgets the rows of updates not yet applied (a restore, a new
  /// chief's workers).
  void clear() { held_.clear(); }

  /// Pushes held now, one per worker and table at the most.
  size_t held() const { return held_.size(); }

  /// Held pushes are keyed by worker, then table.
  using key = std::pair<int32_t, int32_t>;

  /// What is held, and holding it again: a replica's copy of its primary.
  const std::map<key, held_row_push>& held_pushes() const { return held_; }
  void put(held_row_push p) {
    key k{p.worker, p.table};
    held_[k] = std::move(p);
  }

private:
  std::map<key, held_row_push> held_; ///< a later push replaces one
};

} // namespace troupe

// One parameter shard's slice of the flat vector, its optimizer state, its
// version counter and the rules of the consistency modes. The shard actor is
// a thin shell around this class, so the rules are tested without actors.
//
// Modes (see cluster_config):
// - async: every valid push is applied on arrival; version += 1 per push.
// - sync:  pushes tagged with the current version are summed until
//          `aggregate` distinct workers have pushed, then their mean is
//          applied once (version += 1); pushes tagged with an older version
//          are stale and dropped, as in TF's SyncReplicasOptimizer.
// - ssp:   as async, plus a clock per worker (its accepted pushes); a pull
//          by a worker more than `staleness` clocks ahead of the slowest
//          waits (pull_ready() says when it may be answered).
// - easgd: the block holds the center variable; a push carries the elastic
//          difference local - center and applies center += rate * diff.
//
// async and ssp tag each push with the version its values were pulled at;
// the updates applied since are its staleness s. With stale_rate::divide
// its learning rate is divided by s, and with stale_momentum_rule::reduce
// the optimizer's momentum is lowered by 1 - 1/(the recent mean of s) (see
// cluster_config; one worker makes 0, or 1 with cluster.prefetch, which
// both keep the full rate and momentum).
//
// async and ssp also keep the applied log: the batch (the feeder's global
// batch number) of each update since the last restore or forget_through().
// It makes a push of a batch already applied a duplicate (counted as stale,
// the values untouched), so a batch is applied at most once per shard
// whatever happens to the worker that pushed it; and it lets a chief that
// took a lost chief's run over prove which batches the live shards hold
// (applied_since()). In these modes one update is one push is one batch,
// so update v + k + 1 holds the k-th logged batch after version v.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/params/consistency.hpp"
#include "runtime/params/optimizer.hpp"
#include "runtime/params/param_layout.hpp"
#include "runtime/params/stale_compensation.hpp"

namespace troupe {

/// Everything a param_block holds, for a replica that must become an
/// exact copy of it (param_block::image() and param_block::load()): the
/// values and optimizer state, the version, the workers' clocks, the
/// applied log, a sync update's pushes so far, the settings the shell may
/// have changed and the counters.
struct block_image {
  std::vector<float> values;
  std::vector<std::string> slot_names;
  std::vector<std::vector<float>> slots;
  double lowered_beta1_ratio = 1.0;
  int64_t version = 0;
  double learning_rate = 0;
  int32_t aggregate = 1;
  std::vector<int32_t> workers; ///< and their clocks, in the same order
  std::vector<int64_t> clocks;
  std::vector<int64_t> log; ///< the applied log, from log_base
  int64_t log_base = 0;
  int64_t unnamed_through = -1;
  int64_t done_below = 0; ///< options::ordered_batches

  double stale_mean = 0;
  std::vector<float> sum; ///< sync: empty while nobody has pushed
  std::vector<int32_t> pushed, last_update;
  int64_t accepted = 0, stale = 0, refused = 0, staleness_sum = 0,
          staleness_max = 0, uncompensated = 0;
  /// stale_rate::gap, delay compensation: the versions kept and the
  /// moving means (stale_compensation).
  stale_compensation::image compensation;
};

/// How a stale push's update differs from a fresh one's: see
/// optimizer::apply.
struct stale_adjust {
  double lr_scale = 1.0;
  double implicit_momentum = 0;
  /// stale_compensation's: the gradient to apply in place of the pushed
  /// one, and each coordinate's step scale; null: the pushed one, 1.
  const float* grads = nullptr;
  const float* step_scale = nullptr;
};

class param_block {
public:
  struct options {
    consistency_mode mode = consistency_mode::async;
    optimizer_config optimizer;
    int aggregate = 1;       ///< sync: pushes per update
    int staleness = 0;       ///< ssp
    double elastic_rate = 0; ///< easgd: moving rate
    /// async, ssp: the learning rate of stale pushes.
    stale_rate stale_lr = stale_rate::none;
    /// async, ssp: the momentum of stale pushes.
    stale_momentum_rule stale_momentum = stale_momentum_rule::none;
    /// sync: the learning rate of an update of several pushes.
    sync_rate sync_lr = sync_rate::none;
    /// sync: updates over which the scaled rate is reached (0: at once).
    int64_t sync_warmup = 0;
    /// async, ssp: DC-ASGD's lambda (stale_compensation); 0: off.
    double delay_compensation = 0;
    /// async, ssp: workers pull the values extrapolated along the last
    /// update by this many times the pushes' mean staleness (see
    /// values_for_workers); 0: off.
    double lookahead = 0;
    /// async, ssp with stale_rate::gap or delay compensation: the versions
    /// whose values the block keeps for stale pushes (about twice the
    /// workers: with prefetch a worker's push is two pulls behind).
    size_t history = 0;
    /// The feeder numbers its batches in one order (data partition
    /// "shared"): once a checkpoint holds batches, every batch below the
    /// highest of them is done, and a push of one is a duplicate even when
    /// the log has forgotten it (a push held back in a cut link and
    /// delivered after its batch was trained again and checkpointed).
    bool ordered_batches = false;
    /// The parts of the block that buffers hold (tensor_slot::buffer),
    /// relative to its start: an update subtracts the pushed change there
    /// as it is (the mean of a sync update's changes), without the
    /// optimizer, its learning rate or its weight decay.
    std::vector<flat_range> buffers;
  };

  /// What became of a valid push. duplicate: its batch is applied already
  /// (async, ssp), so the values are untouched.
  enum class outcome : uint8_t { applied, aggregated, stale, duplicate };

  /// Counters, for the shell and for tests.
  struct counters {
    int64_t accepted = 0; ///< pushes applied or aggregated
    int64_t stale = 0;    ///< pushes dropped: stale (sync) or duplicates
    int64_t refused = 0;  ///< pushes refused with an error
    /// async, ssp: the staleness of the applied pushes, summed and at most.
    int64_t staleness_sum = 0;
    int64_t staleness_max = 0;
    /// stale_rate::gap, delay compensation: stale pushes computed on a
    /// version the block no longer kept (updated as divide would).
    int64_t uncompensated = 0;
  };

  /// Whether blocks of mode `m` keep the applied log: async and ssp, where
  /// one update is one push of one batch.
  static bool logs_batches(consistency_mode m) {
    return m == consistency_mode::async || m == consistency_mode::ssp;
  }

  /// The most batches the applied log holds; past it the log starts over
  /// at the current version (a run that never checkpoints). 2^20 batches
  /// take 16 MiB.
  static constexpr size_t max_logged = size_t{1} << 20;

  param_block(options opts, std::vector<float> initial);

  size_t size() const { return values_->size(); }
  int64_t version() const { return version_; }
  const counters& stats() const { return stats_; }
  const options& opts() const { return opts_; }

  /// The current values, shared until the next update (copy on write).
  std::shared_ptr<const std::vector<float>> values() const { return values_; }

  /// What a worker's pull gets: the values, or with `lookahead` (async,
  /// ssp) where they are headed. A push is applied about s updates after
  /// its values were pulled (s the pushes' mean staleness), and Adam's
  /// steps keep their direction from one update to the next, so the
  /// gradient is better taken at w + lookahead * s * (w - w_before), the
  /// last update carried on s more times, than at w: the point it will be
  /// applied near (after DANA's look-ahead, Hakimi et al. 2019, with the
  /// last step standing for the optimizer's direction). Made once per
  /// version; evaluation and checkpoints read values().
  std::shared_ptr<const std::vector<float>> values_for_workers();

  /// Workers whose pushes are accepted; pushes from others are refused.
  void add_worker(int32_t id);
  /// A worker that has finished: its clock no longer holds ssp pulls back
  /// and its pushes are refused. sync: the pushes of an update are capped
  /// by the workers left, so the last ones are not left waiting for
  /// gradients that will never come (an update waiting for them is applied
  /// now).
  void remove_worker(int32_t id);
  /// Steering from the shell: the optimizer's base learning rate, and
  /// (sync) the pushes per update, e.g. after workers were added. An
  /// update already complete under a lower count is applied now.
  caf::error set_learning_rate(double lr);
  caf::error set_aggregate(int aggregate);
  bool knows(int32_t id) const { return clocks_.count(id) > 0; }
  /// sync: whether `id` has pushed for the update being aggregated, and
  /// the workers whose pushes made the last update applied (its mean is
  /// over them): what a shard's embedding rows follow.
  bool in_update(int32_t id) const { return pushed_.count(id) > 0; }
  const std::set<int32_t>& last_update() const { return last_update_; }
  /// ssp: the worker's clock (accepted pushes); 0 for unknown workers.
  int64_t clock(int32_t id) const;
  int64_t min_clock() const;

  /// Validates and applies or aggregates one push of `n` floats tagged with
  /// the version the worker computed on (every mode but easgd), computed on
  /// batch `batch` of the feeder's plan (-1: none named; it is applied,
  /// and the log cannot vouch for the updates around it). Errors, with
  /// the block unchanged and `refused` counted: errc::wrong_size,
  /// errc::invalid_argument (unknown worker, a sync push for a version not
  /// yet reached), errc::non_finite (NaN or Inf).
  caf::expected<outcome> push(int32_t worker, int64_t tag, const float* data,
                              size_t n, int64_t batch = -1);

  /// The batches of the updates after `version` up to the current one, in
  /// ascending order; nothing when the log cannot say (a mode without a
  /// log, a version before the log begins or after the current one, or an
  /// update in that range whose push named no batch).
  std::optional<std::vector<int64_t>> applied_since(int64_t version) const;

  /// Drops the log's batches of updates up to `version` (they are in a
  /// checkpoint now, and never leased again unless it is restored).
  void forget_through(int64_t version);

  /// Forgets every worker (their clocks, a sync update's pushes so far):
  /// a new chief takes the shard over and joins its own workers.
  void forget_workers();

  /// Whether a pull by `worker` that needs at least `min_version` may be
  /// answered now: sync waits for the version, ssp for the slowest worker.
  bool pull_ready(int32_t worker, int64_t min_version) const;

  /// Optimizer state vectors (empty for SGD and EASGD centers).
  std::vector<std::pair<std::string, std::vector<float>>> slots() const {
    return opt_.copy_slots();
  }

  /// Replaces values, optimizer slots and version (a restore from a
  /// checkpoint). errc::wrong_size / errc::layout_mismatch when they do not
  /// fit this block; the block is unchanged then.
  caf::error
  restore(std::vector<float> values,
          const std::vector<std::pair<std::string, std::vector<float>>>& slots,
          int64_t version);

  /// A copy of everything the block holds (see block_image).
  block_image image() const;
  /// Becomes the block `img` was taken of. errc::wrong_size /
  /// errc::layout_mismatch when it does not fit this block (another
  /// slice, another optimizer); the block is unchanged then.
  caf::error load(const block_image& img);

private:
  /// The values, cloned first when a pull still holds them.
  std::vector<float>& writable();
  void apply_update(const float* grads, stale_adjust adjust = {});
  /// async, ssp: the adjustment of a push computed on version `tag`, by the
  /// rules stale_lr and stale_momentum, counting its staleness.
  stale_adjust adjust_for_staleness(int64_t tag, const float* grads);
  /// The values a pull answered with at version `v` when lookahead is on
  /// (its extrapolation), null when the ring lacks v or the version
  /// before it, or when there is nothing to extrapolate (no staleness).
  std::shared_ptr<std::vector<float>> extrapolated(int64_t v) const;
  /// sync: applies the mean of this version's pushes once enough are in;
  /// true when it did.
  bool apply_aggregate_if_complete();
  /// sync: the pushes an update takes (the aggregate, capped by the
  /// workers there are).
  size_t updates_needed() const;

  options opts_;
  std::shared_ptr<std::vector<float>> values_;
  std::vector<float> buffer_values_; ///< apply_update's scratch
  optimizer opt_;
  int64_t version_ = 0;
  counters stats_;
  double stale_mean_ = 0; ///< the pushes' staleness, moving average
  stale_compensation compensation_;
  /// values_for_workers' view and the version it was made at (-1: none).
  std::shared_ptr<const std::vector<float>> ahead_;
  int64_t ahead_version_ = -1;
  std::map<int32_t, int64_t> clocks_;
  /// The applied log (async, ssp): log_[k] is the batch of update
  /// log_base_ + k + 1; sorted_ the same batches in order, for the
  /// duplicate check; unnamed_through_ the last update whose push named
  /// no batch.
  std::vector<int64_t> log_;
  std::vector<int64_t> sorted_;
  int64_t log_base_ = 0;
  int64_t unnamed_through_ = -1;
  /// ordered_batches: every batch below this is done (forget_through).
  int64_t done_below_ = 0;
  void log_update(int64_t batch);
  // sync: the sum of this version's pushes and who sent them; the sum
  // holds nothing while nobody has pushed (the first push overwrites it).
  std::vector<float> sum_;
  std::set<int32_t> pushed_, last_update_;
};

} // namespace troupe

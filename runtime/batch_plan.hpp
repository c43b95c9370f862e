// The data feeder's plan: which samples make up each batch of each epoch,
// which batches are leased to which worker, and which are done. The feeder
// actor is a thin shell around it.
//
// Each epoch's order is epoch_order(samples, seed, epoch); batch b of an
// epoch is samples [b * batch, min((b + 1) * batch, samples)) of that order.
// A batch is done when its lease is acked. Leases held by a worker that is
// lost go back to the queue and are leased again before any new batch, so
// every sample is trained exactly once per epoch whatever happens to
// workers. The next epoch's batches are leased while stragglers of the last
// one are still out.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "caf/error.hpp"

namespace troupe {

struct lease_grant {
  int64_t id = 0;
  int32_t epoch = 0;   ///< 0-based
  int64_t index = 0;   ///< batch index within the epoch
  /// The batch's number in the whole plan (epoch * batches per epoch +
  /// index): the same whoever trains it and however often it is leased,
  /// so the shards can tell a batch they applied before.
  int64_t batch = 0;
  std::vector<uint32_t> samples;
};

class batch_plan {
public:
  /// `max_batches` 0: no limit besides `epochs`.
  batch_plan(size_t samples, int batch, uint64_t seed, int epochs,
             int64_t max_batches);

  int64_t batches_per_epoch() const { return per_epoch_; }

  /// The next batch for `worker`, or nothing when none is left to lease
  /// (all leased and out, or the plan is complete). With `new_batches`
  /// false only requeued batches are leased (a paused feeder still lets
  /// the batches of a lost worker be trained, so its pause can settle).
  std::optional<lease_grant> lease(int32_t worker, bool new_batches = true);

  /// Marks a lease done; false for an unknown or already acked lease.
  bool ack(int64_t lease_id);

  /// Puts every lease of `worker` back in the queue; returns how many.
  int requeue(int32_t worker);

  /// Every batch leased and acked.
  bool complete() const;
  /// Leases out and not acked.
  size_t outstanding() const { return out_.size(); }
  /// Requeued batches waiting for a worker.
  size_t queued() const { return requeued_.size(); }
  /// Batches acked so far (the cluster's step count).
  int64_t acked() const { return acked_; }
  /// Samples acked in `epoch` (each sample once per epoch when complete).
  int64_t samples_done(int32_t epoch) const;
  /// Samples acked per epoch, from epoch 0 to the last one touched.
  std::vector<int64_t> epoch_samples() const;
  /// The epoch that the next new batch belongs to (epochs when done).
  int32_t epoch() const { return static_cast<int32_t>(next_ / per_epoch_); }

  /// Where the plan stands, for checkpoints: batches handed out in order.
  /// Only meaningful with nothing outstanding or queued (the chief pauses
  /// the feeder and drains the leases before it checkpoints).
  int64_t position() const { return next_; }
  /// Continues from a checkpointed position (batches before it counted as
  /// acked), with the batches `done_after` (plan numbers at or after it,
  /// e.g. those the live shards of a lost chief's run applied) done too;
  /// the ones between that are not come first, as if requeued. Clears
  /// leases and queue. errc::invalid_argument, the plan unchanged, for a
  /// number before the position, past the plan or given twice.
  caf::error restore(int64_t position,
                     const std::vector<int64_t>& done_after = {});

private:
  struct batch_ref {
    int32_t epoch;
    int64_t index;
  };
  struct out_lease {
    int32_t worker;
    batch_ref batch;
  };
  lease_grant make_grant(batch_ref b);
  /// Batch `index` of an epoch: samples [first, last) of its order.
  std::pair<size_t, size_t> span(int64_t index) const;
  /// Counts batch `b`'s samples as done in its epoch.
  void count_done(batch_ref b);
  /// The batch of plan number `number`.
  batch_ref ref_of(int64_t number) const;
  const std::vector<uint32_t>& order(int32_t epoch);

  size_t samples_;
  int batch_;
  uint64_t seed_;
  int epochs_;
  int64_t per_epoch_;
  int64_t total_;       ///< batches in the whole plan
  int64_t next_ = 0;    ///< next new batch, counted over all epochs
  int64_t next_id_ = 1;
  int64_t acked_ = 0;
  std::deque<batch_ref> requeued_;
  std::map<int64_t, out_lease> out_;
  std::map<int32_t, int64_t> samples_done_;
  struct cached_order {
    int32_t epoch = -1;
    std::vector<uint32_t> order;
  };
  cached_order cache_[2];
};

} // namespace troupe

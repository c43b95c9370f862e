// The data feeder's plan: which samples make up each batch of each epoch,
// which batches are leased to which worker, and which are done. The feeder
// actor is a thin shell around it.
//
// The plan is made of streams: sequences of batches, each batch numbered
// by its place k in its stream. training.data_partition (data_partition.hpp)
// decides the streams:
// - shared: one stream that any worker leases from. Epoch e's order is
//   epoch_order(samples, seed, e); batch b of an epoch is samples
//   [b * batch, min((b + 1) * batch, samples)) of that order.
// - replicated: one stream per worker over the whole set, each with its
//   own orders (the seed mixed with the worker id). A worker added to a
//   running plan starts at the epoch the slowest other worker is in, so it
//   speeds up the run instead of prolonging it.
// - sharded: one stream per worker; epoch e's order (the shared one) is
//   cut into one contiguous part per member of the epoch, members in
//   ascending id order. An epoch's members are fixed when its first batch
//   is leased: every worker known then. A worker added later joins from
//   the next epoch whose members are not fixed yet, so every epoch stays
//   one exact partition.
//
// A batch is done when its lease is acked. Leases held by a worker that is
// lost go back to its stream's queue and are leased again before any new
// batch of that stream (in shared mode: to whichever worker asks first), so
// every batch is trained exactly once whatever happens to workers.
//
// A set that grows (data.follow) has an open plan: one epoch in the set's
// order, shared, whose batch k is samples [k * batch, (k + 1) * batch) as
// the set grows. It leases only whole batches (the last part's tail waits
// for the next part) and is never complete until it is closed; closing
// leases the tail as a last, smaller batch. A
// worker's stream waits for it: the chief restarts a failed worker under
// the same id. The next epoch's batches are leased while stragglers of the
// last one are still out.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "caf/error.hpp"
#include "runtime/data/data_partition.hpp"

namespace troupe {

struct lease_grant {
  int64_t id = 0;
  int32_t epoch = 0; ///< 0-based
  int64_t index = 0; ///< batch index within the epoch (of its part)
  /// The batch's number in the whole plan: the same whoever trains it and
  /// however often it is leased, so the shards can tell a batch they
  /// applied before. shared: epoch * batches per epoch + index; otherwise
  /// (worker + 1) * 2^40 + the batch's place in the worker's stream.
  int64_t batch = 0;
  std::vector<uint32_t> samples;
};

/// Samples one worker trained, per epoch (index = epoch).
struct worker_epochs {
  int32_t worker = 0;
  std::vector<int64_t> samples;
};

/// Batches a cluster of `workers` trains per epoch under `partition`:
/// what the chief counts an epoch of steps.
int64_t plan_steps_per_epoch(data_partition partition, size_t samples,
                             int batch, int workers);

class batch_plan {
public:
  /// `max_batches` 0: no limit besides `epochs`.
  /// `shuffle_block`: epoch_order's block (1: every sample shuffled).
  /// `read_parts`: for a set read part by part from start to end
  /// (streamed click logs), each part's samples; the epochs then follow
  /// interleaved_order.
  /// `in_order`: every epoch takes the samples in the set's order
  /// (a stream that drifts), shuffling nothing.
  batch_plan(size_t samples, int batch, uint64_t seed, int epochs,
             int64_t max_batches,
             data_partition partition = data_partition::shared,
             size_t shuffle_block = 1, std::vector<size_t> read_parts = {},
             bool in_order = false);

  data_partition partition() const { return partition_; }

  /// The set grows (see above): the plan stays open until close(). Only
  /// for a shared plan of one epoch in order.
  void follow() { open_ = true; }
  /// The set now has `samples` (more than before: a part was added).
  void extend(size_t samples);
  /// The set grows no more: its tail is leased, then the plan completes.
  void close() { open_ = false; }
  bool open() const { return open_; }
  size_t samples() const { return samples_; }
  /// Batches in one epoch of the whole set.
  int64_t batches_per_epoch() const { return per_epoch_; }

  /// replicated, sharded: gives `worker` its stream (nothing if it has
  /// one); shared: nothing. lease() joins an unknown worker itself.
  void join(int32_t worker);

  /// The next batch for `worker`, or nothing when none is left to lease
  /// now (all of its batches out, or none left). With `new_batches` false
  /// only requeued batches are leased (a paused feeder still lets the
  /// batches of a lost worker be trained, so its pause can settle).
  std::optional<lease_grant> lease(int32_t worker, bool new_batches = true);

  /// Marks a lease done; false for an unknown or already acked lease.
  bool ack(int64_t lease_id);

  /// Puts every lease of `worker` back in the queue; returns how many.
  int requeue(int32_t worker);

  /// Leaves samples [first, first + count) out of every batch leased from
  /// now on, requeued ones included (a dataset file that changed during
  /// the run, with data.on_file_change "skip"). A batch left with no
  /// sample is done without being leased (so the lease that passes over
  /// the plan's last batches may find nothing and leave it complete);
  /// samples_done counts only the samples leased. Not saved with the
  /// plan: a plan restored from a checkpoint leases them again.
  void skip(int64_t first, int64_t count);
  /// The ranges skip() left out, as (first, count).
  const std::vector<std::pair<int64_t, int64_t>>& skipped() const {
    return skipped_;
  }

  /// Every batch leased and acked.
  bool complete() const;
  /// Nothing is or will be left for `worker` to train: the plan is
  /// complete (shared) or its stream is (replicated, sharded).
  bool done_for(int32_t worker) const;
  /// Leases out and not acked.
  size_t outstanding() const { return out_.size(); }
  /// Requeued batches waiting for a worker.
  size_t queued() const;
  /// Nothing that a checkpoint cannot hold: no lease out and, in shared
  /// mode, nothing requeued (a worker's own queue is saved with its
  /// stream: its worker may be away for long).
  bool quiet() const;
  /// Batches acked so far (the cluster's step count).
  int64_t acked() const { return acked_; }
  /// Batches in the plan: done, out and to come (replicated, sharded: with
  /// the workers known now).
  int64_t total() const;
  /// Samples acked in `epoch`, all workers together.
  int64_t samples_done(int32_t epoch) const;
  /// Samples acked per epoch, from epoch 0 to the last one touched.
  std::vector<int64_t> epoch_samples() const;
  /// Samples each worker trained per epoch, by worker id (shared: those
  /// acked since the start or the last restore).
  std::vector<worker_epochs> worker_samples() const;

  /// Where the plan stands, for checkpoints: shared: batches handed out in
  /// order; otherwise the batches acked. Meaningful when quiet() (the
  /// chief pauses the feeder and drains the leases before it checkpoints).
  int64_t position() const;
  /// What a checkpoint needs besides position() to continue the plan:
  /// "" in shared mode; otherwise every stream's place and queue and the
  /// sharded epochs' members, as text.
  std::string save() const;
  /// Continues from a checkpoint: `position` and the `saved` text of
  /// save() ("" with position 0: from the start, keeping the workers).
  /// The batches `done_after` (plan numbers after the position, e.g. those
  /// the live shards of a lost chief's run applied) are done too; the ones
  /// between that are not come first, as if requeued. Clears leases.
  /// The batches `again` (some live shards applied them and others did
  /// not) come first too, whatever their number.
  /// errc::invalid_argument, the plan unchanged, for a number before the
  /// position, past the plan or given twice; errc::bad_format for a
  /// `saved` text that is not this partition's or does not fit.
  caf::error restore(int64_t position,
                     const std::vector<int64_t>& done_after = {},
                     const std::string& saved = {},
                     const std::vector<int64_t>& again = {});

private:
  struct stream {
    int32_t worker = -1;     ///< -1: the shared stream
    int32_t first_epoch = 0; ///< its batch 0 is in this epoch
    int64_t next = 0;        ///< its next new batch
    std::deque<int64_t> requeued;
    int64_t out = 0;                         ///< its leases out
    std::map<int32_t, int64_t> samples_done; ///< by epoch
  };
  /// One of a stream's epochs: where its part lies in the epoch's order.
  struct part {
    size_t first = 0, last = 0;
    int64_t batches = 0;
  };
  struct batch_ref {
    int32_t epoch = 0;
    int64_t index = 0;
    size_t first = 0, last = 0; ///< samples [first, last) of the order
  };
  struct out_lease {
    int32_t worker;
    size_t stream;
    int64_t k;
    int64_t samples; ///< leased: the batch's, less those skipped
  };
  /// Epochs [first, end) of a stream share one part.
  struct segment {
    int32_t first, end;
    part p;
  };
  /// sharded: epochs from `first_epoch` on (up to the next run) have
  /// these members, ascending.
  struct member_run {
    int32_t first_epoch;
    std::vector<int32_t> members;
  };
  struct cached_order {
    uint64_t seed = 0;
    int32_t epoch = -1;
    uint64_t used = 0;
    std::vector<uint32_t> order;
  };

  bool per_worker() const { return partition_ != data_partition::shared; }
  part part_of(int32_t worker, int32_t epoch) const;
  std::vector<segment> segments(const stream& s) const;
  int64_t stream_total(const stream& s) const;
  batch_ref locate(const stream& s, int64_t k) const;
  bool cap_reached() const;
  bool exhausted(const stream& s) const;
  const std::vector<int32_t>& members_of(int32_t epoch) const;
  void decide_through(int32_t epoch);
  uint64_t seed_of(const stream& s) const;
  int64_t number_of(const stream& s, int64_t k) const;
  /// Counts batch k of `s` done: `samples` of it (-1: all of them).
  void count_done(stream& s, int64_t k, int32_t worker, int64_t samples = -1);
  bool is_skipped(uint32_t sample) const;
  const std::vector<uint32_t>& order(uint64_t seed, int32_t epoch);
  stream* stream_of(int32_t worker);
  /// Appends `s`, indexed by its worker, which joins known_.
  void add_stream(stream s);
  void reset();
  caf::error restore_streams(int64_t position,
                             const std::vector<int64_t>& done_after,
                             const std::string& saved,
                             const std::vector<int64_t>& again);
  caf::error load(const std::string& saved);

  size_t samples_;
  int batch_;
  uint64_t seed_;
  int epochs_;
  int64_t max_batches_;
  data_partition partition_;
  size_t shuffle_block_;
  std::vector<size_t> read_parts_;
  bool in_order_;
  bool open_ = false;
  int64_t per_epoch_;
  int64_t handed_ = 0; ///< new batches handed out, all streams
  int64_t next_id_ = 1;
  int64_t acked_ = 0;
  std::vector<stream> streams_;            ///< shared: exactly one
  std::map<int32_t, size_t> stream_index_; ///< worker -> stream
  std::vector<int32_t> known_;             ///< workers with a stream, ascending
  std::vector<member_run> runs_;           ///< sharded
  int32_t decided_through_ = -1;           ///< sharded: members fixed up to it
  std::map<int64_t, out_lease> out_;
  std::map<int32_t, std::map<int32_t, int64_t>> worker_done_;
  std::vector<cached_order> cache_;
  uint64_t uses_ = 0;
  std::vector<std::pair<int64_t, int64_t>> skipped_;
};

} // namespace troupe

// The worker actor: a model replica on a compute backend (or the user's
// step function), training leased batches against the shards.
//
// Loop (async, sync, ssp): pull every shard in parallel and lease a batch
// (sync: pull, then lease) -> forward/backward -> push the gradient slices
// to every shard and start the next step at once; when every shard has
// applied its slice, ack the lease and report to the chief. sync pulls
// wait for the version after the worker's last push; ssp pulls wait while
// the worker is too far ahead (the shards decide both). easgd: the worker
// trains locally with its own optimizer and every `tau` steps pulls the
// center, moves toward it and pushes the elastic difference.
//
// What a step computes, and what besides its gradient it pulls and
// pushes, is its kind's (step_kind.hpp): troupe's dense models, a click
// model (whose batch's embedding rows are pulled from the shards that
// hold them, and their gradients pushed back; a step is settled when the
// dense and the row pushes are all applied), EASGD, or an external model
// (the user's step function).
//
// The worker ends normally when the feeder says done, or when told to
// finish (its node leaves the run): then it starts no new step and ends
// once its pushed steps are settled, leaving a prefetched lease unacked.
// Any failure (an error reply, a timeout, an exception from the backend)
// ends it with that error, and the chief restarts it.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "actors/protocol/chief_protocol.hpp"
#include "actors/worker/step_kind.hpp"
#include "models/external_step.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

struct worker_options {
  int32_t id = 0;
  run_config cfg;
  std::shared_ptr<const train_test> data;
  feeder_actor feeder;
  /// Pulls and pushes go to these: the shards of this node, and stubs on
  /// the data plane for those of other nodes.
  std::vector<shard_data_actor> shards;
  std::vector<flat_range> ranges; ///< each shard's part of the flat vector
  chief_actor chief;
  /// model.type "external": the step that computes the gradient (the
  /// user's), and the tensors of the flat vector it computes it for.
  std::shared_ptr<external_step> external;
  std::shared_ptr<const param_layout> layout;
  /// Called before each step with (worker, clock); tests throw from it to
  /// make a worker fail.
  std::function<void(int32_t, int64_t)> fault_hook;
};

/// Steps whose pushes may still be unapplied when a new step starts. So a
/// shard holds at most this many pushes of a worker, one more in async
/// mode with prefetch, which starts the next step while the current one
/// computes (counting that one too would end the prefetch: the step before
/// is usually still being applied then).
constexpr int max_unsettled = 2;

struct worker_state {
  static inline const char* name = "worker";
  worker_options opts;
  std::unique_ptr<step_kind> kind; ///< what a step computes
  std::vector<int64_t> versions;   ///< per shard, of the last pull
  /// Flat gradient buffers, shared with the shards while they apply them.
  std::vector<std::shared_ptr<std::vector<float>>> grad_pool;
  std::shared_ptr<std::vector<float>> grads; ///< this step's buffer
  lease_grant lease;
  /// Batches leased with `lease` that no step has taken yet, in order
  /// (async: cluster.lease_ahead_ms).
  std::deque<lease_grant> leased_ahead;
  /// Leases whose steps are settled, not yet acked: sent together while
  /// batches leased ahead remain, at once otherwise (see settle).
  std::vector<int64_t> acks_due;
  int64_t clock = 0; ///< steps done by this worker
  /// sync: the version the next pull of each shard waits for (empty: 0).
  /// Per shard: after a replica took a lost shard over, that shard may be
  /// an update behind the others (its last update had not reached the
  /// replica), and stays so.
  std::vector<int64_t> min_versions;
  /// The shard map's generation: a chief that adds or drains a shard
  /// first says the shards are moving (a pull that fails or ends then was
  /// asked of the old map: it waits in `parked`), then sends the new map,
  /// and every parked step pulls from it.
  uint64_t placement = 0;
  bool shards_moving = false;
  std::vector<std::function<void()>> parked;
  bool initialised = false;   ///< its kind started from the shards' values
  int unsettled = 0;          ///< pushed steps whose pushes are not all applied
  bool step_deferred = false; ///< a step waits for unsettled to drop
  bool feeder_done = false;   ///< quit once nothing is unsettled
  bool draining = false;      ///< told to finish: no new step, then quit
  bool halted = false;        ///< after a non-finite loss
  worker_report report;       ///< settled steps not yet reported
  double last_report = 0;
  double step_start = 0;
  double step_interval = 0; ///< seconds from one step's start to the next's
  batch_loss loss;
  /// A kind that computes apart (step_kind::computes_apart): the actor
  /// on a thread of its own that runs each step's computation, what it
  /// runs and gives back, whether it runs one now, and the next step,
  /// its rows in, waiting for it.
  struct compute_slot {
    step_kind::compute_job job;
    caf::expected<batch_loss> result{caf::sec::none};
  };
  caf::actor computer;
  std::shared_ptr<compute_slot> computing_slot;
  bool computing = false;
  std::function<void()> waiting_compute;
};

worker_actor::behavior_type
worker_impl(worker_actor::stateful_pointer<worker_state> self,
            worker_options opts);

} // namespace troupe

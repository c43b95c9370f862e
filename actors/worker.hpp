// The worker actor: a model replica on a compute backend, training leased
// batches against the shards.
//
// Loop (async, sync, ssp): pull every shard in parallel and lease a batch
// (sync: pull, then lease) -> forward/backward -> push the gradient slices
// to every shard and start the next step at once; when every shard has
// applied its slice, ack the lease and report to the chief. sync pulls wait
// for the version after the worker's last push; ssp pulls wait while the
// worker is too far ahead (the shards decide both). easgd: the worker trains locally with its own
// optimizer and every `tau` steps pulls the center, moves toward it and
// pushes the elastic difference.
//
// An external model (model.type "external") keeps no replica: the pulled
// blocks go as they are to the user's step function (external_step), and
// the gradient it writes is pushed like any other.
//
// A click model (model.type "click") also pulls the rows of its batch
// from the shards that hold them once the lease is in (each distinct row
// once, from its own shard only), trains the MLP on the pooled rows, and
// pushes each shard the gradients of the rows it sent; a step is settled
// when the dense and the row pushes are all applied.
//
// The worker ends normally when the feeder says done, or when told to finish
// (its node leaves the run): then it starts no new step and ends once its
// pushed steps are settled, leaving a prefetched lease unacked. Any failure (an error
// reply, a timeout, an exception from the backend) ends it with that error,
// and the chief restarts it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "actors/protocol/chief_protocol.hpp"
#include "models/click_batch.hpp"
#include "models/external_step.hpp"
#include "models/model.hpp"
#include "models/trainer.hpp"
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
  std::unique_ptr<compute_backend> backend;
  std::unique_ptr<model> replica; ///< troupe's own models
  pulled_params pulled;           ///< external: this step's values
  std::unique_ptr<local_trainer> local; ///< easgd: local optimizer
  /// click: the batch's rows, planned per shard, and the gradient of the
  /// MLP's inputs, which flows back into them.
  std::unique_ptr<click_batch> clicks;
  std::vector<float> input_grad;
  /// click logs read where they lie: the leased batch's samples, read
  /// from their parts (samples 0..n-1 in the lease's order).
  click_data click_rows;
  std::vector<uint32_t> click_order;
  /// The step's reading of its samples so far (worker_report).
  double read_seconds = 0;
  int64_t read_bytes = 0;
  // The leased batch, gathered into the backend's host memory (pinned on
  // a GPU: one DMA to the device).
  backend_buffer x;                     ///< batch inputs
  backend_buffer y;                     ///< batch labels
  std::vector<float> targets;           ///< batch float targets, if any
  std::vector<int64_t> versions;        ///< per shard, of the last pull
  std::vector<float> host;              ///< easgd: the pulled center
  /// Flat gradient buffers, shared with the shards while they apply them.
  std::vector<std::shared_ptr<std::vector<float>>> grad_pool;
  std::shared_ptr<std::vector<float>> grads; ///< this step's buffer
  lease_grant lease;
  int64_t clock = 0;     ///< steps done by this worker
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
  bool initialised = false;
  int unsettled = 0;         ///< pushed steps whose pushes are not all applied
  bool step_deferred = false; ///< a step waits for unsettled to drop
  bool feeder_done = false;  ///< quit once nothing is unsettled
  bool draining = false;     ///< told to finish: no new step, then quit
  bool halted = false;       ///< after a non-finite loss
  worker_report report;      ///< settled steps not yet reported
  double last_report = 0;
  double step_start = 0;
  batch_loss loss;
};

worker_actor::behavior_type
worker_impl(worker_actor::stateful_pointer<worker_state> self,
            worker_options opts);

} // namespace troupe

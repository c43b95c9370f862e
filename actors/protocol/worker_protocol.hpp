// A worker's interface (actors/worker/worker.hpp), and the report of its steps
// that it sends the chief.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/protocol/ids.hpp"
#include "actors/protocol/shard_protocol.hpp"
#include "caf/all.hpp"

namespace troupe {

/// What a worker reports to the chief: a few settled steps at a time (every
/// 8 steps or 50 ms, and before it ends), so that the chief is not woken
/// for every batch.
struct worker_report {
  int32_t worker = 0;
  int32_t epoch = 0; ///< of the last step
  int32_t steps = 0; ///< steps covered
  int32_t samples = 0;
  int32_t hits = 0;
  double loss_sum = 0;
  double step_seconds = 0; ///< wall time of the steps, summed
  int64_t clock = 0;       ///< the worker's own step count
  /// The most updates any shard applied between a pull of these steps and
  /// their push (0: the push met the version it was computed on).
  int64_t staleness = 0;
  /// The steps' staleness (each step's most over the shards), summed:
  /// over `steps`, the mean.
  int64_t staleness_sum = 0;
  /// Reading the steps' samples from the dataset (a streamed part's
  /// blocks, a mapped file's pages): wall time the steps waited on it,
  /// and the bytes read (from the file: compressed ones for gzip).
  double read_seconds = 0;
  int64_t read_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("worker_report"), x.worker, x.epoch, x.steps,
           x.samples, x.hits, x.loss_sum, x.step_seconds, x.clock, x.staleness,
           x.staleness_sum, x.read_seconds, x.read_bytes);
}

/// A worker (actors/worker/worker.hpp).
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

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_worker, troupe::type_ids::worker)
  CAF_ADD_TYPE_ID(troupe_worker, (troupe::worker_report))
  CAF_ADD_TYPE_ID(troupe_worker, (troupe::worker_actor))
CAF_END_TYPE_ID_BLOCK(troupe_worker)
// clang-format on

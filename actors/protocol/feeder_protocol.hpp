// The data feeder's interface (actors/feeder.hpp): leases of batches for
// the workers, and the chief's pause, restore and counters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/protocol/ids.hpp"
#include "actors/protocol/shard_data_messages.hpp"
#include "caf/all.hpp"
#include "runtime/rules/batch_plan.hpp"

namespace troupe {

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
  /// The batches after `grant`, when the worker asked for several: as
  /// many of them as the feeder could grant at once, in the order it
  /// would have granted them one at a time.
  std::vector<lease_grant> more;
};

/// The most batches a worker leases at once (cluster.lease_ahead_ms).
constexpr int32_t max_leases_ahead = 8;

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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, lease_grant& x) {
  return f(caf::meta::type_name("lease_grant"), x.id, x.epoch, x.index, x.batch,
           x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, lease_reply& x) {
  return f(caf::meta::type_name("lease_reply"), x.status, x.held, x.grant,
           x.more);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_epochs& x) {
  return f(caf::meta::type_name("worker_epochs"), x.worker, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feeder_stats& x) {
  return f(caf::meta::type_name("feeder_stats"), x.acked, x.position, x.total,
           x.epoch_samples, x.workers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feeder_position& x) {
  return f(caf::meta::type_name("feeder_position"), x.step, x.plan);
}

/// The data feeder (actors/feeder.hpp).
using feeder_actor = caf::typed_actor<
  // The next batch for worker W, and up to N - 1 after it (N from 1 to
  // max_leases_ahead), or wait (paused, all out), or done: (W, N).
  caf::replies_to<lease_atom, int32_t, int32_t>::with<lease_reply>,
  // Marks leases done (an unknown or repeated ack changes nothing).
  caf::reacts_to<ack_atom, std::vector<int64_t>>,
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
  // plan numbers after it done too, and the others given first
  // (batch_plan::restore's done_after and again); replies with the
  // position.
  caf::replies_to<restore_atom, int64_t, std::string, std::vector<int64_t>,
                  std::vector<int64_t>>::with<int64_t>,
  // Gives workers their own streams (replicated, sharded; nothing in
  // shared mode); replies with the batches in the plan now.
  caf::replies_to<join_atom, std::vector<int32_t>>::with<int64_t>,
  // Counters: batches done, position, samples done per epoch and worker.
  caf::replies_to<stats_atom>::with<feeder_stats>,
  // A plan that follows a growing set (batch_plan::follow): N > 0, the set
  // now holds N samples (batch_plan::extend); -1: it grows no more
  // (batch_plan::close); 0: nothing changes. Replies with the counters.
  caf::replies_to<follow_atom, int64_t>::with<feeder_stats>>;

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_feeder, troupe::type_ids::feeder)
  CAF_ADD_TYPE_ID(troupe_feeder, (troupe::lease_reply))
  CAF_ADD_TYPE_ID(troupe_feeder, (troupe::feeder_stats))
  CAF_ADD_TYPE_ID(troupe_feeder, (troupe::feeder_position))
  CAF_ADD_TYPE_ID(troupe_feeder, (troupe::feeder_actor))
CAF_END_TYPE_ID_BLOCK(troupe_feeder)
// clang-format on

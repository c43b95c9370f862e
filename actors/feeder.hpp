// The data feeder actor: a thin shell around runtime/rules/batch_plan.
//
// In replicated and sharded mode each worker leases from its own stream:
// a worker whose stream is through is answered done while others train.
// States: leasing -> (pause) paused -> (resume) leasing; finish or a
// complete plan -> done. Leasing hands out batches; paused grants only
// requeued batches and replies to the pause request once every lease is
// acked (the chief checkpoints at that quiet point); done answers "done".
// Acks and requeues are taken in every state.
//
// A lease that cannot be granted now (paused, or every batch out while
// stragglers finish) is held, not refused: the feeder answers it as soon
// as a batch can be had (resume, requeue) or the plan is over. A held
// request is answered "wait" once it has waited `hold`, well within the
// requester's timeout, and the worker asks again: a waiting cluster sends
// one small message per worker every `hold`, and pulls nothing.
#pragma once

#include <optional>
#include <vector>

#include "actors/protocol/feeder_protocol.hpp"
#include "runtime/rules/batch_plan.hpp"

namespace troupe {

struct feeder_options {
  size_t samples = 0;
  int batch = 1;
  uint64_t seed = 1;
  int epochs = 1;
  int64_t max_batches = 0; ///< 0: no limit besides epochs
  data_partition partition = data_partition::shared;
  size_t shuffle_block = 1; ///< epoch_order's block
  bool in_order = false;    ///< training.order "stream": no shuffle
  /// data.follow: the set grows, the plan stays open (batch_plan::follow).
  bool follow = false;
  /// A set read part by part (batch_plan): its parts' sample counts.
  std::vector<size_t> read_parts;
  /// How long a lease request is held before "wait" (the worker asks
  /// again); keep it well below the workers' request timeout.
  caf::timespan hold = std::chrono::seconds(10);
};

struct feeder_state {
  static inline const char* name = "feeder";
  std::optional<batch_plan> plan;
  bool paused = false;
  bool finished = false;
  /// Pauses waiting for the leases out to be acked. Several may wait: the
  /// user's pause, then a checkpoint that came due while workers trained
  /// the batches they leased ahead; each gets the position once quiet.
  std::vector<caf::typed_response_promise<feeder_position>> pause_replies;
  struct held_lease {
    caf::typed_response_promise<lease_reply> promise;
    int32_t worker;
    caf::actor_clock::time_point
      since; /// on the actor clock (a test drives it)
  };
  std::vector<held_lease> held; ///< in arrival order
  caf::timespan hold{};
  bool expiry_pending = false; ///< an expire message is on its way
};

/// The feeder as it runs: its interface, and its own timer, which answers
/// leases held for their bound with "wait". Others hold a feeder_actor.
using feeder_self_actor = feeder_actor::extend<caf::reacts_to<expire_atom>>;

feeder_self_actor::behavior_type
feeder_impl(feeder_self_actor::stateful_pointer<feeder_state> self,
            feeder_options opts);

} // namespace troupe

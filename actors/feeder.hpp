// The data feeder actor: a thin shell around runtime/batch_plan.
//
// States: leasing -> (pause) paused -> (resume) leasing; finish or a
// complete plan -> done. Leasing hands out batches; paused answers "wait"
// and replies to the pause request once every lease is acked (the chief
// checkpoints at that quiet point); done answers "done". Acks and requeues
// are taken in every state.
#pragma once

#include <optional>

#include "actors/protocol.hpp"
#include "runtime/batch_plan.hpp"

namespace troupe {

struct feeder_options {
  size_t samples = 0;
  int batch = 1;
  uint64_t seed = 1;
  int epochs = 1;
  int64_t max_batches = 0; ///< 0: no limit besides epochs
};

struct feeder_state {
  static inline const char* name = "feeder";
  std::optional<batch_plan> plan;
  bool paused = false;
  bool finished = false;
  std::optional<caf::typed_response_promise<int64_t>> pause_reply;
};

feeder_actor::behavior_type
feeder_impl(feeder_actor::stateful_pointer<feeder_state> self,
            feeder_options opts);

} // namespace troupe

#include "actors/feeder.hpp"

#include "runtime/errc.hpp"

namespace troupe {

namespace {

using self_ptr = feeder_actor::stateful_pointer<feeder_state>;

/// Replies to a pending pause once nothing is out.
void settle_pause(self_ptr self) {
  auto& st = self->state;
  if (st.pause_reply && st.plan->outstanding() == 0
      && st.plan->queued() == 0) {
    st.pause_reply->deliver(st.plan->position());
    st.pause_reply.reset();
  }
}

} // namespace

feeder_actor::behavior_type
feeder_impl(feeder_actor::stateful_pointer<feeder_state> self,
            feeder_options opts) {
  self->state.plan.emplace(opts.samples, opts.batch, opts.seed, opts.epochs,
                           opts.max_batches);
  return {
    [=](lease_atom, int32_t worker) -> lease_reply {
      auto& st = self->state;
      lease_reply r;
      if (st.finished || st.plan->complete()) {
        r.status = lease_reply::done;
      } else {
        if (auto g = st.plan->lease(worker, !st.paused)) {
          r.status = lease_reply::granted;
          r.grant = std::move(*g);
        }
      }
      return r;
    },
    [=](ack_atom, int64_t lease) {
      self->state.plan->ack(lease);
      settle_pause(self);
    },
    [=](requeue_atom, int32_t worker) -> int32_t {
      auto n = self->state.plan->requeue(worker);
      settle_pause(self);
      return n;
    },
    [=](pause_atom) -> caf::result<int64_t> {
      auto& st = self->state;
      st.paused = true;
      if (st.plan->outstanding() == 0 && st.plan->queued() == 0)
        return st.plan->position();
      if (st.pause_reply) // the chief never overlaps its checkpoints
        return make_error(errc::invalid_argument,
                          "the feeder is already pausing");
      st.pause_reply = self->make_response_promise<int64_t>();
      return *st.pause_reply;
    },
    [=](resume_atom) { self->state.paused = false; },
    [=](finish_atom) { self->state.finished = true; },
    [=](stats_atom) -> feeder_stats {
      auto& plan = *self->state.plan;
      return feeder_stats{plan.acked(), plan.position(), plan.epoch_samples()};
    },
    [=](restore_atom, int64_t position) -> int64_t {
      auto& st = self->state;
      st.plan->restore(position);
      // Nothing is outstanding now: a pending pause has settled.
      if (st.pause_reply) {
        st.pause_reply->deliver(st.plan->position());
        st.pause_reply.reset();
      }
      return st.plan->position();
    },
  };
}

} // namespace troupe

#include "actors/feeder.hpp"

#include <algorithm>
#include <utility>

#include "actors/held_requests.hpp"

namespace troupe {

namespace {

using self_ptr = feeder_self_actor::stateful_pointer<feeder_state>;

/// The answer to `worker`'s lease now, or nothing if it must wait.
std::optional<lease_reply> try_lease(self_ptr self, int32_t worker) {
  auto& st = self->state;
  lease_reply r;
  st.plan->join(worker);
  if (st.finished || st.plan->done_for(worker)) {
    r.status = lease_reply::done;
    return r;
  }
  auto g = st.plan->lease(worker, !st.paused);
  if (!g && st.plan->done_for(worker)) { // the last batches were skipped
    r.status = lease_reply::done;
    return r;
  }
  if (!g)
    return std::nullopt;
  r.status = lease_reply::granted;
  r.grant = std::move(*g);
  return r;
}

/// Up to `count` more batches for `worker` into `out`, as many as the
/// plan grants now. A held request gets one batch: it waited for that.
void lease_more(self_ptr self, int32_t worker, int32_t count,
                std::vector<lease_grant>& out) {
  auto& st = self->state;
  for (int32_t i = 0; i < count; ++i) {
    auto g = st.plan->lease(worker, !st.paused);
    if (!g)
      return;
    out.push_back(std::move(*g));
  }
}

/// Answers the held leases that can be answered now, oldest first.
void serve_held(self_ptr self) {
  take_if(self->state.held, [&](feeder_state::held_lease& h) {
    auto r = try_lease(self, h.worker);
    if (!r)
      return false;
    r->held = true;
    h.promise.deliver(std::move(*r));
    return true;
  });
}

/// Answers the held leases of `worker` (all workers: -1) with "wait". A
/// held request of a worker that is gone must not be granted: the batch
/// would be out with nobody to train it.
void release_held(self_ptr self, int32_t worker) {
  take_if(self->state.held, [&](feeder_state::held_lease& h) {
    if (worker >= 0 && h.worker != worker)
      return false;
    h.promise.deliver(lease_reply{});
    return true;
  });
}

feeder_stats stats_of(const batch_plan& plan) {
  return feeder_stats{plan.acked(), plan.position(), plan.total(),
                      plan.epoch_samples(), plan.worker_samples()};
}

feeder_position position_of(const batch_plan& plan) {
  return feeder_position{plan.position(), plan.save()};
}

/// Answers every pause waiting with the position now.
void deliver_pauses(self_ptr self) {
  auto& st = self->state;
  auto position = position_of(*st.plan);
  for (auto& reply : std::exchange(st.pause_replies, {}))
    reply.deliver(position);
}

/// Replies to the pending pauses once nothing is out.
void settle_pause(self_ptr self) {
  auto& st = self->state;
  if (!st.pause_replies.empty() && st.plan->quiet())
    deliver_pauses(self);
}

} // namespace

feeder_self_actor::behavior_type
feeder_impl(feeder_self_actor::stateful_pointer<feeder_state> self,
            feeder_options opts) {
  self->state.plan.emplace(opts.samples, opts.batch, opts.seed, opts.epochs,
                           opts.max_batches, opts.partition, opts.shuffle_block,
                           opts.read_parts, opts.in_order);
  if (opts.follow)
    self->state.plan->follow();
  self->state.hold = opts.hold;
  return {
    [=](lease_atom, int32_t worker, int32_t count) -> caf::result<lease_reply> {
      if (auto r = try_lease(self, worker)) {
        // The plan may have ended in this lease (its last batches held
        // only skipped samples): the workers waiting are done too.
        if (r->status == lease_reply::done)
          serve_held(self);
        else
          lease_more(self, worker, std::min(count, max_leases_ahead) - 1,
                     r->more);
        return std::move(*r);
      }
      auto& st = self->state;
      auto promise = self->make_response_promise<lease_reply>();
      st.held.push_back({promise, worker, self->clock().now()});
      schedule_expiry(self, st.held, st.hold, st.expiry_pending);
      return promise;
    },
    [=](ack_atom, const std::vector<int64_t>& leases) {
      for (auto lease : leases)
        self->state.plan->ack(lease);
      settle_pause(self);
      serve_held(self); // the last ack completes the plan: done
    },
    [=](skip_atom, int64_t first, int64_t count) -> int32_t {
      self->state.plan->skip(first, count);
      return static_cast<int32_t>(self->state.plan->skipped().size());
    },
    [=](requeue_atom, int32_t worker) -> int32_t {
      // The chief requeues a lost worker before it starts it again, so a
      // lease still held for that id is the lost one's.
      release_held(self, worker);
      auto n = self->state.plan->requeue(worker);
      serve_held(self);
      settle_pause(self);
      return n;
    },
    [=](expire_atom) {
      auto& st = self->state;
      expire_held(self, st.held, st.hold, st.expiry_pending,
                  lease_reply{}); // "wait"
    },
    [=](pause_atom) -> caf::result<feeder_position> {
      auto& st = self->state;
      st.paused = true;
      if (st.plan->quiet())
        return position_of(*st.plan);
      st.pause_replies.push_back(
        self->make_response_promise<feeder_position>());
      return st.pause_replies.back();
    },
    [=](resume_atom) {
      self->state.paused = false;
      serve_held(self);
    },
    [=](finish_atom) {
      self->state.finished = true;
      serve_held(self);
    },
    [=](stats_atom) -> feeder_stats { return stats_of(*self->state.plan); },
    [=](follow_atom, int64_t samples) -> feeder_stats {
      auto& plan = *self->state.plan;
      if (samples > 0)
        plan.extend(static_cast<size_t>(samples));
      else if (samples < 0)
        plan.close();
      serve_held(self); // new batches, or (closed) the tail and then done
      return stats_of(plan);
    },
    [=](join_atom, const std::vector<int32_t>& workers) -> int64_t {
      for (auto w : workers)
        self->state.plan->join(w);
      return self->state.plan->total();
    },
    [=](restore_atom, int64_t position, const std::string& saved,
        const std::vector<int64_t>& done,
        const std::vector<int64_t>& again) -> caf::result<int64_t> {
      auto& st = self->state;
      if (auto err = st.plan->restore(position, done, saved, again))
        return err;
      // Nothing is outstanding now: the pending pauses have settled.
      deliver_pauses(self);
      // The chief restores with every worker stopped: whatever is held
      // belongs to workers that are gone.
      release_held(self, -1);
      return st.plan->position();
    },
  };
}

} // namespace troupe

#include "actors/shard.hpp"

#include <algorithm>

#include "actors/held_requests.hpp"
#include "runtime/errc.hpp"

namespace troupe {

namespace {

using self_ptr = shard_actor::stateful_pointer<shard_state>;

float_block answer(self_ptr self, int32_t worker) {
  auto& st = self->state;
  if (st.block->opts().mode == cluster_config::mode::ssp && worker >= 0) {
    ++st.ssp_pulls;
    st.ssp_max_lead = std::max(st.ssp_max_lead, st.block->clock(worker)
                                                  - st.block->min_clock());
  }
  auto values = st.block->values();
  st.pulled_bytes += static_cast<int64_t>(values->size() * sizeof(float));
  return float_block{st.id, st.block->version(), std::move(values)};
}

/// Answers every parked pull that has become ready.
void serve_parked(self_ptr self) {
  take_if(self->state.parked, [&](shard_state::parked_pull& p) {
    if (!self->state.block->pull_ready(p.worker, p.min_version))
      return false;
    p.promise.deliver(answer(self, p.worker));
    return true;
  });
}

} // namespace

shard_actor::behavior_type
shard_impl(shard_actor::stateful_pointer<shard_state> self,
           shard_options opts) {
  self->state.id = opts.id;
  self->state.hold = opts.hold;
  self->state.block = std::make_unique<param_block>(opts.block,
                                                    std::move(opts.initial));
  return {
    [=](join_atom, int32_t worker) -> int64_t {
      self->state.block->add_worker(worker);
      serve_parked(self); // a new slowest clock can release ssp pulls
      return self->state.block->version();
    },
    [=](leave_atom, int32_t worker) {
      self->state.block->remove_worker(worker);
      serve_parked(self);
    },
    [=](pull_atom, int32_t worker,
        int64_t min_version) -> caf::result<float_block> {
      if (worker < 0 || self->state.block->pull_ready(worker, min_version))
        return answer(self, worker);
      auto promise = self->make_response_promise<float_block>();
      auto& st = self->state;
      st.parked.push_back({promise, worker, min_version, self->clock().now()});
      schedule_expiry(self, st.parked, st.hold, st.expiry_pending);
      return promise;
    },
    [=](push_atom, const gradient_push& g) -> caf::result<push_ack> {
      auto& b = *self->state.block;
      self->state.pushed_bytes += static_cast<int64_t>(g.size * sizeof(float));
      auto r = b.push(g.worker, g.tag, g.data(), g.size, g.batch);

      if (!r)
        return std::move(r.error());
      serve_parked(self);
      return push_ack{b.version(), *r == param_block::outcome::stale
                                     || *r == param_block::outcome::duplicate};
    },
    [=](snapshot_atom) -> shard_state_msg {
      auto& b = *self->state.block;
      shard_state_msg s;
      s.shard = self->state.id;
      s.version = b.version();
      s.values = *b.values();
      for (auto& [name, v] : b.slots()) {
        s.slot_names.push_back(name);
        s.slots.push_back(std::move(v));
      }
      return s;
    },
    [=](restore_atom, shard_state_msg& s) -> caf::result<int64_t> {
      std::vector<std::pair<std::string, std::vector<float>>> slots;
      for (size_t i = 0; i < s.slots.size() && i < s.slot_names.size(); ++i)
        slots.emplace_back(s.slot_names[i], std::move(s.slots[i]));
      if (auto err = self->state.block->restore(std::move(s.values), slots,
                                                s.version))
        return err;
      serve_parked(self);
      return self->state.block->version();
    },
    [=](stats_atom) -> shard_stats {
      auto& b = *self->state.block;
      return shard_stats{self->state.id,      b.version(),
                         b.stats().accepted, b.stats().stale,
                         b.stats().refused,  self->state.ssp_pulls,
                         self->state.ssp_max_lead,
                         self->state.pulled_bytes,
                         self->state.pushed_bytes};
    },
    [=](adopt_atom, int64_t since) -> shard_history {
      auto& st = self->state;
      auto& b = *st.block;
      b.forget_workers();
      // Pulls parked for the old chief's workers: nobody waits for them.
      take_if(st.parked, [&](shard_state::parked_pull& p) {
        p.promise.deliver(float_block::ask_again_for(st.id));
        return true;
      });
      shard_history h;
      h.shard = st.id;
      h.version = b.version();
      h.since = since;
      if (auto batches = b.applied_since(since)) {
        h.complete = true;
        h.batches = std::move(*batches);
      }
      return h;
    },
    [=](forget_atom, int64_t version) {
      self->state.block->forget_through(version);
    },
    [=](tune_atom, const std::string& key,
        double value) -> caf::result<bool> {
      auto& b = *self->state.block;
      caf::error err;
      if (key == "lr")
        err = b.set_learning_rate(value);
      else if (key == "aggregate")
        err = b.set_aggregate(static_cast<int>(value));
      else
        err = make_error(errc::invalid_argument,
                         "unknown shard setting \"" + key
                           + "\" (lr, aggregate)");
      if (err)
        return err;
      serve_parked(self);
      return true;
    },
    [=](expire_atom) {
      auto& st = self->state;
      expire_held(self, st.parked, st.hold, st.expiry_pending,
                  float_block::ask_again_for(st.id));
    },
  };
}

} // namespace troupe

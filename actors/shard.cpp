#include "actors/shard.hpp"

#include <algorithm>

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
  return float_block{st.id, st.block->version(), st.block->values()};
}

/// Answers every parked pull that has become ready.
void serve_parked(self_ptr self) {
  auto& parked = self->state.parked;
  for (size_t i = 0; i < parked.size();) {
    auto& p = parked[i];
    if (self->state.block->pull_ready(p.worker, p.min_version)) {
      p.promise.deliver(answer(self, p.worker));
      parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

/// Schedules the next expiry check for the oldest parked pull.
void schedule_expiry(self_ptr self) {
  auto& st = self->state;
  if (st.expiry_pending || st.parked.empty())
    return;
  st.expiry_pending = true;
  auto due = st.parked.front().since + st.hold - caf::make_timestamp();
  self->delayed_send(self, std::max(due, caf::timespan{0}), expire_atom_v);
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
      self->state.parked.push_back(
        {promise, worker, min_version, caf::make_timestamp()});
      schedule_expiry(self);
      return promise;
    },
    [=](push_atom, const gradient_push& g) -> caf::result<push_ack> {
      auto& b = *self->state.block;
      auto r = b.push(g.worker, g.tag, g.data(), g.size);

      if (!r)
        return std::move(r.error());
      serve_parked(self);
      return push_ack{b.version(), *r == param_block::outcome::stale};
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
                         self->state.ssp_max_lead};
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
      st.expiry_pending = false;
      auto now = caf::make_timestamp();
      size_t kept = 0;
      for (size_t i = 0; i < st.parked.size(); ++i) {
        if (now - st.parked[i].since >= st.hold)
          st.parked[i].promise.deliver(float_block::ask_again_for(st.id));
        else
          st.parked[kept++] = std::move(st.parked[i]);
      }
      st.parked.resize(kept);
      schedule_expiry(self);
    },
  };
}

} // namespace troupe

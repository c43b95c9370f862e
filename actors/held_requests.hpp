// Requests an actor holds instead of refusing them: the feeder's leases
// that it cannot grant yet, a shard's pulls that are not ready. Each is
// answered as soon as it can be, or once it has waited its hold time
// (with "ask again"); these are the two operations the holders share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

#include "actors/protocol/ids.hpp"

namespace troupe {

/// Asks `self` for an expire_atom message when the oldest entry of `held`
/// (kept in arrival order, each with a `since` time on the actor clock,
/// which CAF's test coordinator drives in deterministic tests) will have
/// waited `hold`. At most one such message is on its way: `pending` says so,
/// and the expire handler clears it and calls this again.
template <class Self, class Held>
void schedule_expiry(Self* self, const Held& held, caf::timespan hold,
                     bool& pending) {
  if (pending || held.empty())
    return;
  pending = true;
  auto due = held.front().since + hold - self->clock().now();
  self->delayed_send(self, std::max(due, caf::timespan{0}), expire_atom_v);
}

/// Hands every entry of `held` for which `take` returns true out of the
/// list (the entry is `take`'s to answer); the others keep their order.
template <class Held, class Take>
void take_if(Held& held, Take take) {
  size_t kept = 0;
  for (size_t i = 0; i < held.size(); ++i)
    if (!take(held[i]))
      held[kept++] = std::move(held[i]);
  held.resize(kept);
}

/// The expire_atom handler's work: answers every entry that has waited
/// `hold` with `ask_again` (the holder's "ask again" reply), then
/// schedules the next check.
template <class Self, class Held, class Reply>
void expire_held(Self* self, Held& held, caf::timespan hold, bool& pending,
                 const Reply& ask_again) {
  pending = false;
  auto now = self->clock().now();
  take_if(held, [&](auto& h) {
    if (now - h.since < hold)
      return false;
    h.promise.deliver(ask_again);
    return true;
  });
  schedule_expiry(self, held, hold, pending);
}

} // namespace troupe

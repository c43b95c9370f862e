// Replicated shards (cluster.shard_replicas): where each shard's replica
// lives, starting it and asking its primary to keep it in step, the
// primary's news of it, and a lost replica replaced. A lost primary's
// replica taking over is a recovery (chief_recovery.cpp).
#include <algorithm>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

namespace {

/// Replicas a shard's primary may give up before the chief stops giving it
/// new ones: a replica that cannot follow its primary (a bug, or a node
/// out of memory) would otherwise be copied again and again.
constexpr int max_replica_failures = 3;

/// How long after a replica failed to start the chief tries again.
constexpr auto replica_retry = std::chrono::seconds(1);

/// The live node for shard i's replica: one meant for shards, not the
/// primary's, holding the fewest replicas; of those the next after the
/// primary's in the cluster file's order, so that a fresh run's replicas
/// form a ring (shard on ps0, replica on ps1; ps1's on ps2; ...). Empty:
/// none.
std::string replica_home(chief_self self, size_t i) {
  auto& st = self->state;
  std::map<std::string, int> replicas;
  for (size_t k = 0; k < st.shards.count(); ++k)
    if (k != i
        && (st.shards.replicas()[k].handle || st.shards.replicas()[k].placing))
      ++replicas[st.shards.replicas()[k].node];
  std::vector<std::string> order; // file order, then nodes that joined
  for (auto& n : st.opts.cfg.cluster.nodes)
    order.push_back(n.name);
  auto at = std::find(order.begin(), order.end(), st.shards.node_of(i));
  auto from = at == order.end() ? 0 : at - order.begin();
  std::string best;
  long best_distance = 0;
  for (long k = 0; k < static_cast<long>(order.size()); ++k) {
    auto& name = order[static_cast<size_t>(k)];
    auto it = st.members.nodes().find(name);
    if (it == st.members.nodes().end() || !it->second.up || !it->second.agent
        || it->second.planned_shards == 0 || it->second.data_port == 0
        || name == st.shards.node_of(i))
      continue;
    auto n = static_cast<long>(order.size());
    long distance = ((k - from) % n + n) % n;
    if (best.empty() || replicas[name] < replicas[best]
        || (replicas[name] == replicas[best] && distance < best_distance)) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

/// Asks shard i's primary to keep its replica in step.
void ask_primary(chief_self self, size_t i) {
  auto& st = self->state;
  auto& node = st.members.node(st.shards.replicas()[i].node);
  auto address = node.host + ":" + std::to_string(node.data_port);
  st.shards.replicas()[i].asked = now_seconds();
  st.shards.replicas()[i].primary_answered = false;
  auto ask = ++st.shards.replicas()[i].asks;
  ask_shard(self, i, replicate_atom_v, shard_data_actor{}, address)
    .then(
      [=](bool) {
        auto& replicas = self->state.shards.replicas();
        if (i < replicas.size() && replicas[i].asks == ask)
          replicas[i].primary_answered = true;
      },
      [=](caf::error& err) {
        say(self, fmt("shard %zu could not start its replica: %s", i,
                      describe(err).c_str()));
      });
}

} // namespace

bool replicated(chief_self self) {
  return self->state.opts.cfg.cluster.shard_replicas > 0;
}

void place_replicas(chief_self self) {
  auto& st = self->state;
  if (!replicated(self) || st.ended())
    return;
  auto n = st.shards.count();
  st.shards.replicas().resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!st.shards.handles()[i] || st.shards.replicas()[i].handle
        || st.shards.replicas()[i].placing
        || st.shards.replicas()[i].failures >= max_replica_failures)
      continue;
    auto node = replica_home(self, i);
    if (node.empty()) {
      if (st.shards.replica_homeless(i))
        say(self, fmt("shard %zu has no replica: no other live node holds "
                      "shards (one is placed when such a node registers)",
                      i));
      continue;
    }
    st.shards.replica_housed(i);
    st.shards.replicas()[i].placing = true;
    st.shards.replicas()[i].node = node;
    shard_spawn sp;
    sp.id = static_cast<int32_t>(i);
    sp.replica = true; // its aggregate, as all else, comes with the copy
    sp.state.shard = sp.id;
    sp.buffers = buffer_bounds(self, i);
    // The primary's copy replaces these; the replica's block is sized by
    // them.
    sp.state.values.assign(st.shards.ranges[i].end - st.shards.ranges[i].begin,
                           0.f);
    auto layout = st.shards.layout;
    answer_from<shard_actor>(
      self, node, place_on(self, node, std::move(sp)),
      [=](shard_actor& h) {
        auto& s = self->state;
        if (s.shards.layout != layout) { // the shards moved meanwhile
          self->send_exit(h, caf::exit_reason::user_shutdown);
          return;
        }
        s.shards.replicas()[i].placing = false;
        if (s.ended()) {
          self->send_exit(h, caf::exit_reason::user_shutdown);
          return;
        }
        self->monitor(h);
        s.shards.replica_started(i, h);
        if (s.shards.handles()[i])
          ask_primary(self, i);
      },
      [=](caf::error& err) {
        if (self->state.shards.layout != layout)
          return;
        self->state.shards.replicas()[i].placing = false;
        say(self, fmt("cannot start the replica of shard %zu on node %s: "
                      "%s; trying again in %.1f s",
                      i, node.c_str(), describe(err).c_str(),
                      std::chrono::duration<double>(replica_retry).count()));
        // Placed anew (maybe elsewhere) unless something else has
        // placed it by then: a node registering, a replica lost.
        self->delayed_send(self, replica_retry, replicate_atom_v);
      });
  }
}

void on_replica_news(chief_self self, int32_t shard, int64_t version,
                     const std::string& text) {
  auto& st = self->state;
  auto i = static_cast<size_t>(shard);
  if (i >= st.shards.replicas().size() || !st.shards.replicas()[i].handle)
    return;
  // Before the primary's answer to the latest ask, its news are of an
  // earlier replica (shard_placement.hpp).
  if (!st.shards.replicas()[i].primary_answered)
    return;
  auto& node = st.shards.replicas()[i].node;
  if (version >= 0) {
    st.shards.replicas()[i].in_step = true;
    say(self, fmt("replica of shard %zu on node %s is in step at version "
                  "%lld, %.2f s after it was asked for (%s)",
                  i, node.c_str(), static_cast<long long>(version),
                  now_seconds() - st.shards.replicas()[i].asked, text.c_str()));
    return;
  }
  // The primary gave it up: it is started anew once it is down.
  st.shards.replicas()[i].in_step = false;
  say(self, fmt("shard %zu gave up its replica on node %s: %s", i, node.c_str(),
                text.c_str()));
  self->send_exit(st.shards.replicas()[i].handle,
                  caf::exit_reason::user_shutdown);
}

void on_replica_down(chief_self self, size_t i, const caf::error& reason) {
  auto& st = self->state;
  auto node = st.shards.replicas()[i].node;
  st.shards.replica_gone(i);
  if (reason == caf::exit_reason::remote_link_unreachable)
    node_lost(self, node, describe(reason));
  say(self, fmt("replica of shard %zu on node %s stopped (%s)", i, node.c_str(),
                describe(reason).c_str()));
  // Stopped on a live node outside a recovery (whose adoption of the live
  // shards stops every replica): its primary gave it up. Past a few of
  // those the shard runs without one (a lost node is no failure of the
  // replica's).
  if (reason == caf::exit_reason::user_shutdown && st.members.is_up(node)
      && !st.recovery.recovering()
      && ++st.shards.replicas()[i].failures == max_replica_failures)
    say(self, fmt("shard %zu gave up %d replicas: it runs without one", i,
                  max_replica_failures));
  // A recovery under way places the replicas once the shards hold the run.
  if (!st.recovery.recovering())
    place_replicas(self);
}

} // namespace troupe::chief_ops

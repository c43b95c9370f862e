// Where the chief puts workers and shards: on their node, or (it is down)
// on the least-loaded one (runtime/rules/placement), or waiting for it; joining
// worker ids on the shards and adding workers to a running cluster.
#include <algorithm>
#include <map>

#include "actors/chief/chief_ops.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/rules/placement.hpp"

namespace troupe::chief_ops {

/// A node's process is gone (its agent's link broke, or a request to it
/// failed): nothing more is placed there until it registers again.
void node_lost(chief_self self, const std::string& name,
               const std::string& why) {
  auto& members = self->state.members;
  if (!members.mark_down(name))
    return;
  say(self, fmt("node %s (%s) is down: %s", name.c_str(),
                members.node(name).address().c_str(), why.c_str()));
  // After the handler that saw the loss has settled the chief's state.
  self->send(self, forget_atom_v, name);
}

/// Per shard, where a worker on `node` reaches it on the data plane:
/// "host:port" of its node's data server, or empty for a shard in the
/// worker's own process. Every node that can hold a shard (those of the
/// cluster file) runs a data server.
std::vector<std::string> data_links(chief_self self, const std::string& node) {
  auto& st = self->state;
  std::vector<std::string> out;
  for (auto& home : st.shards.nodes()) {
    auto it = st.members.nodes().find(home);
    if (home == node || it == st.members.nodes().end()
        || it->second.data_port == 0)
      out.emplace_back();
    else
      out.push_back(it->second.host + ":"
                    + std::to_string(it->second.data_port));
  }
  return out;
}

/// Starts worker `id` through the agent of its node, or of another node
/// when its own is down (on_node_loss "move"), or leaves it waiting for
/// its node to come back ("wait").
void place_worker(chief_self self, int32_t id) {
  auto& st = self->state;
  if (st.ended() || st.recovery.recovering())
    return;
  auto& w = st.members.worker(id);
  if (w.handle || w.placing) // running, or being placed
    return;
  // Its own node first (back there after a move), else where it ran.
  auto home = st.members.nodes().find(w.home);
  auto last = st.members.nodes().find(w.node);
  std::string node;
  if (home != st.members.nodes().end() && home->second.up)
    node = w.home;
  else if (last != st.members.nodes().end() && last->second.up)
    node = w.node;
  else if (st.opts.cfg.cluster.on_node_loss
           == cluster_config::node_loss::wait) {
    w.state = worker_phase::waiting;
    say(self,
        fmt("worker %d waits for node %s to come back", id, w.node.c_str()));
    return;
  } else
    node = self->state.members.least_loaded_node();
  if (node.empty())
    return fail_run(self,
                    make_error(errc::node_unreachable,
                               fmt("no node is up to run worker %d", id)));
  if (node != w.node) {
    say(self,
        fmt("worker %d moves from node %s to node %s%s", id, w.node.c_str(),
            node.c_str(), node == w.home ? " (its own, back)" : ""));
    w.node = node;
  }
  w.state = worker_phase::starting;
  w.placing = true;
  worker_spawn ws;
  ws.id = id;
  ws.feeder = st.shards.feeder;
  ws.shards = st.shards.handles();
  ws.bounds = self->state.shards.bounds();
  ws.chief = caf::actor_cast<caf::strong_actor_ptr>(self);
  ws.data_links = data_links(self, node);
  if (st.opts.cfg.model.type == model_config::kind::external) {
    auto& layout = st.eval.layout;
    bool buffers = layout.has_buffers();
    for (auto& t : layout.tensors()) {
      ws.tensor_names.push_back(t.name);
      ws.tensor_dims.push_back(t.dims);
      if (buffers)
        ws.buffer_dtypes.push_back(t.buffer ? t.dtype : std::string{});
    }
  }
  auto gen = st.recovery.generation();
  answer_from<worker_actor>(
    self, node, place_on(self, node, std::move(ws)),
    [=](worker_actor& h) {
      auto& s = self->state;
      s.members.worker(id).placing = false;
      if (s.ended() || s.recovery.generation() != gen) {
        self->send_exit(h, caf::exit_reason::user_shutdown);
        return;
      }
      self->monitor(h);
      s.members.worker_started(id, h);
      auto& e = s.members.worker(id);
      if (s.members.node(node)
            .leaving) { // it started as its node began to leave
        e.state = worker_phase::leaving;
        self->send(h, finish_atom_v);
      }
    },
    [=](caf::error& err) {
      self->state.members.worker(id).placing = false;
      node_lost(self, node, "placing worker failed: " + describe(err));
      place_worker(self, id);
    });
}

/// Joins worker ids on every shard; `then` runs once all have answered.
void join_now(chief_self self, std::vector<int32_t> ids,
              std::function<void()> then) {
  auto& st = self->state;
  auto shards = st.shards.handles();
  ask_all<int64_t>(
    ids.size() * shards.size(),
    [=](size_t k) {
      return self->request(shards[k % shards.size()], timeout_of(self),
                           join_atom_v, ids[k / shards.size()]);
    },
    [then = std::move(then)](auto&) { then(); },
    [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void join_on_feeder(chief_self self, std::vector<int32_t> ids,
                    std::function<void()> then) {
  auto& st = self->state;
  self->request(st.shards.feeder, timeout_of(self), join_atom_v, std::move(ids))
    .then(
      [=](int64_t total) {
        self->state.progress.total_steps = total;
        then();
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// join_now, or after the shard recovery under way (which joins and
/// starts every worker it knows, these included).
void join_on_shards(chief_self self, std::vector<int32_t> ids,
                    std::function<void()> then) {
  if (self->state.recovery.recovering())
    return self->state.recovery.when_over(
      [=] { join_on_shards(self, ids, then); });
  join_now(self, std::move(ids), std::move(then));
}

/// sync: the pushes per update, replicas_to_aggregate, or with 0 ("all
/// workers") the workers there are now.
int aggregate_now(chief_self self) {
  auto configured = self->state.opts.cfg.cluster.replicas_to_aggregate;
  return configured > 0 ? configured
                        : std::max(1, self->state.members.live_workers());
}

/// sync with replicas_to_aggregate 0: the count follows the workers.
void retune_aggregate(chief_self self) {
  auto& c = self->state.opts.cfg.cluster;
  if (c.consistency != cluster_config::mode::sync
      || c.replicas_to_aggregate != 0)
    return;
  auto n = aggregate_now(self);
  say(self, fmt("sync: replicas to aggregate is now %d", n));
  for (auto& s : self->state.shards.handles())
    if (s)
      self
        ->request(s, timeout_of(self), tune_atom_v, std::string{"aggregate"},
                  static_cast<double>(n))
        .then([](bool) {}, [](caf::error&) {});
}

/// Appends `n` fresh worker ids on `node` to `ids`.
void new_worker_ids(chief_self self, const std::string& node, int n,
                    std::vector<int32_t>& ids) {
  auto& st = self->state;
  for (int k = 0; k < n; ++k) {
    ids.push_back(st.members.add_worker(node));
  }
}

std::vector<int32_t> add_workers(chief_self self, const std::string& node,
                                 int n) {
  std::vector<int32_t> ids;
  new_worker_ids(self, node, n, ids);
  say(self,
      fmt("adding %d worker%s on node %s", n, n == 1 ? "" : "s", node.c_str()));
  join_on_feeder(self, ids, [=] {
    join_on_shards(self, ids, [=] {
      retune_aggregate(self);
      for (auto id : ids)
        place_worker(self, id);
    });
  });
  return ids;
}

std::vector<uint64_t> buffer_bounds(chief_self self, size_t i) {
  auto& st = self->state;
  std::vector<uint64_t> out;
  for (auto& r : st.eval.layout.buffers_within(st.shards.ranges[i])) {
    out.push_back(r.begin);
    out.push_back(r.end);
  }
  return out;
}

/// Starts shard `i` on `node` through its agent with `state`.
void place_shard(chief_self self, size_t i, const std::string& node,
                 shard_state_msg state, std::function<void()> then) {
  shard_spawn sp;
  sp.id = static_cast<int32_t>(i);
  sp.aggregate = aggregate_now(self);
  sp.state = std::move(state);
  sp.buffers = buffer_bounds(self, i);
  place_on(self, node, std::move(sp))
    .then(
      [=](shard_actor& h) {
        auto& s = self->state;
        self->monitor(h);
        s.shards.started(i, h, node);
        then();
      },
      [=](caf::error& err) {
        fail_run(self, make_error(errc::actor_down,
                                  fmt("cannot start shard %zu on node %s: %s",
                                      i, node.c_str(), describe(err).c_str())));
      });
}

/// The node for a shard whose node is gone: the up node meant for shards
/// that holds the fewest, else the chief's own.
std::string shard_home(chief_self self, size_t i) {
  auto& st = self->state;
  if (st.members.is_up(st.shards.node_of(i)))
    return st.shards.node_of(i);
  auto load = st.shards.live_per_node();
  std::vector<node_slot> slots;
  for (auto& [name, n] : st.members.nodes())
    slots.push_back({name, n.up, n.planned_shards > 0, load[name]});
  auto best = least_loaded(slots, fallback::meant_only);
  return best.empty() ? st.own_node() : best;
}

} // namespace troupe::chief_ops

// Nodes joining the chief: registrations (bounded, identity checked, a
// lost chief's run named), a stop request, and a node leaving the run.
#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

/// Why a registration's own fields are out of bounds, or "": whatever a
/// peer sends is bounded before anything is allocated for it.
std::string check_registration(const std::string& name, const std::string& host,
                               int32_t join_workers,
                               const std::string& identity,
                               const std::string& served_run) {
  if (name.size() > max_node_name)
    return "a node name of " + std::to_string(name.size())
           + " characters (at most " + std::to_string(max_node_name) + ")";
  for (char c : name)
    if (c <= ' ' || c > '~')
      return "a node name with a space or a control character";
  if (host.empty() || host.size() > 255)
    return "a host of " + std::to_string(host.size()) + " characters";
  if (join_workers > max_join_workers)
    return "a join with " + std::to_string(join_workers) + " workers (at most "
           + std::to_string(max_join_workers) + " at once)";
  if (join_workers < -1)
    return "a join with " + std::to_string(join_workers) + " workers";
  if (identity.size() > max_identity_bytes)
    return "a config identity of " + std::to_string(identity.size()) + " bytes";
  if (served_run.size() > max_run_id)
    return "a run id of " + std::to_string(served_run.size()) + " characters";
  return {};
}

namespace {

/// A node back from a lost link still runs the shards and replicas it had:
/// meanwhile their replicas may have taken over elsewhere, or this chief
/// given them up. It keeps those the run still has there, and any shard
/// a recovery waits for; the others stop (a stale copy of a shard would
/// make the next takeover find one shard on two nodes).
void keep_current_shards(chief_self self, const std::string& name,
                         const node_agent_actor& agent) {
  auto& shards = self->state.shards;
  kept_shards kept;
  for (size_t i = 0; i < shards.count(); ++i) {
    if (!shards.handles()[i])
      kept.awaited.push_back(static_cast<int32_t>(i));
    else if (shards.node_of(i) == name)
      kept.handles.push_back(shards.handles()[i]);
    if (shards.has_replica(i) && shards.replicas()[i].node == name)
      kept.handles.push_back(shards.replicas()[i].handle);
  }
  self->request(agent, timeout_of(self), keep_atom_v, std::move(kept))
    .then(
      [=](const std::string& stopped) {
        if (!stopped.empty())
          say(self, "node " + name
                      + " came back with what the run no longer "
                        "has there; stopped: "
                      + stopped);
      },
      [=](const caf::error& err) {
        say(self, "node " + name
                    + ": could not stop what the run no longer "
                      "has there: "
                    + describe(err));
      });
}

} // namespace

caf::result<std::string, std::string> on_register(chief_self self,
                                                  node_registration r) {
  auto& name = r.name;
  const auto& identity = r.identity;
  const auto& served_run = r.served_run;
  const auto join_workers = r.workers;
  auto& st = self->state;
  if (st.ended() || st.stopping())
    return make_error(errc::invalid_argument, "the run is ending");
  if (!st.opts.cfg.cluster.distributed())
    return make_error(errc::invalid_argument,
                      "this chief runs an embedded cluster; it takes no nodes");
  if (auto why = check_registration(name, r.host, join_workers, identity,
                                    served_run);
      !why.empty())
    return make_error(errc::invalid_argument, "refused: " + why);
  if (join_workers > 0
      && st.members.workers().size() + join_workers > max_workers)
    return make_error(errc::invalid_argument,
                      "refused: the cluster would have more than "
                        + std::to_string(max_workers) + " workers");
  if (join_workers < 0) {
    auto it = st.members.nodes().find(name);
    if (it == st.members.nodes().end() || it->second.joined)
      return make_error(errc::invalid_config,
                        "unknown node \"" + name
                          + "\" (the cluster file's "
                            "nodes are: "
                          + st.opts.cfg.cluster.node_names() + ")");
    if (name == st.opts.cfg.cluster.chief_node)
      return make_error(errc::invalid_config,
                        "node \"" + name + "\" is the chief's own node");
    if (it->second.up) {
      // The same process asking again: a node back from a lost chief
      // that stopped waiting for the answer to its last try (a chief
      // just thawed answers late, or into a connection it no longer
      // routes) asks anew, and is registered already.
      if (r.agent && it->second.agent
          && it->second.agent.address() == r.agent.address())
        return {name, st.run_id};
      return make_error(errc::invalid_argument,
                        "node \"" + name + "\" is already up");
    }
  }
  // A node started from another run's config, or another version of this
  // one, would train something else: refused, naming what differs.
  auto who = name.empty() ? std::string{"the joining node"} : "node " + name;
  if (auto diff = identity_difference(st.identity, "chief",
                                      parse_identity(identity), who);
      !diff.empty()) {
    say(self, "refused " + who + ": its config differs: " + diff);
    return make_error(errc::invalid_config,
                      "the chief (run " + st.run_id + ") refused " + who
                        + ": its config differs from the chief's: " + diff);
  }
  if (join_workers >= 0) {
    if (name.empty())
      name = "joined-" + std::to_string(st.members.nodes().size());
    if (st.members.is_up(name))
      return make_error(errc::invalid_argument,
                        "a node named \"" + name + "\" is already up");
    auto& e = st.members.add_node(name);
    e.joined = true;
    e.planned_workers = join_workers;
  }
  // A node that served a run whose chief was lost: before the shards
  // start, this chief takes that run over (adopt_run), keeping its live
  // shards; also when this chief resumed the same run from its newest
  // checkpoint (the default), which the live shards are newer than.
  if (!st.nodes_ready() && !served_run.empty()
      && st.takeover.adopted_run.empty()) {
    st.takeover.adopted_run = st.run_id = served_run;
    say(self, "node " + name + " served run " + served_run
                + ", whose chief was lost: this chief takes it over");
  }
  auto& e = st.members.register_agent(name, r.agent);
  e.heard_at = now_seconds();
  e.usage.reset(); // a new process: what the last one said is void
  e.host = r.host;
  e.port = r.port;
  e.data_port = r.data_port;
  self->monitor(r.agent);
  follow_tell_agent(self, r.agent);
  if (st.nodes_ready() && !served_run.empty() && served_run == st.run_id)
    keep_current_shards(self, name, r.agent);
  say(self,
      fmt("node %s (%s) is up%s", name.c_str(), e.address().c_str(),
          join_workers >= 0 ? fmt(", joining with %d worker%s", join_workers,
                                  join_workers == 1 ? "" : "s")
                                .c_str()
                            : ""));
  if (!st.nodes_ready()) {
    start_when_nodes_ready(self);
    return {name, st.run_id};
  }
  // A shard recovery waits for this node's shards.
  if (st.recovery.waiting_for_shard_nodes()
      && lost_shard_nodes_down(self).empty())
    restore_after_loss(self);
  // A node back after a crash: its waiting workers start there again,
  // and those that moved away come back once their steps in flight end
  // (they hand back their leases as a leaving node's do).
  for (auto& [id, w] : st.members.workers()) {
    if (w.state == worker_phase::waiting && w.node == name)
      place_worker(self, id);
    else if (w.home == name && w.node != name && st.training()
             && w.state == worker_phase::running && w.handle) {
      say(self, fmt("worker %d goes back from node %s to its own node %s "
                    "once its step in flight ends",
                    id, w.node.c_str(), name.c_str()));
      w.state = worker_phase::leaving;
      self->send(w.handle, finish_atom_v);
    }
  }
  if (join_workers > 0 && st.training())
    add_workers(self, name, join_workers);
  // A shard that had nowhere to keep its replica may have now.
  if (st.training() && !st.recovery.recovering())
    place_replicas(self);
  return {name, st.run_id};
}

/// SIGINT or SIGTERM on the chief's process: the shell's "stop"; before
/// training began, the run ends without training.
void on_stop_request(chief_self self, const std::string& who) {
  auto& st = self->state;
  if (st.ended() || st.stopping())
    return;
  if (!st.training())
    return fail_run(self,
                    make_error(errc::stopped,
                               "stopped by " + who + " before training began"));
  stop_run(self, who);
}

/// A member node leaves the run (SIGINT/SIGTERM there): nothing more is
/// placed on it, its workers finish their steps in flight, their leases
/// go back and they start again elsewhere (on_node_loss "move") or wait
/// for the node ("wait"). A node that holds shards cannot leave: its
/// shards would have nowhere to go without losing steps.
caf::result<bool> on_leave(chief_self self, const std::string& name) {
  auto& st = self->state;
  auto it = st.members.nodes().find(name);
  if (it == st.members.nodes().end() || !it->second.up)
    return make_error(errc::invalid_argument, "node "
                                              " + name + "
                                              " is not up in this run");
  if (name == st.own_node())
    return make_error(errc::invalid_argument,
                      "the chief's own node cannot leave; stop the run");
  if (st.ended() || st.stopping()) // the run releases every node soon
    return true;
  std::string held;
  for (size_t i = 0; i < st.shards.nodes().size(); ++i)
    if (st.shards.node_of(i) == name)
      held += (held.empty() ? "" : ", ") + std::to_string(i);
  if (!held.empty())
    return make_error(errc::invalid_argument,
                      "node " + name + " holds shard(s) " + held
                        + " and cannot leave a running run; stop the run "
                          "instead (or end the node: its shards are then "
                          "restored from the newest checkpoint)");
  auto& node = it->second;
  node.up = false; // nothing more is placed there
  node.leaving = self->make_response_promise<bool>();
  int finishing = 0;
  for (auto& [id, w] : st.members.workers())
    if (w.node == name
        && (w.state == worker_phase::running
            || w.state == worker_phase::starting)
        && (w.handle || w.placing)) {
      w.state = worker_phase::leaving;
      ++finishing;
      if (w.handle) // one being placed is told when it is up
        self->send(w.handle, finish_atom_v);
    }
  say(self, fmt("node %s leaves the run: %d worker%s finish their steps in "
                "flight and hand back their leases",
                name.c_str(), finishing, finishing == 1 ? "" : "s"));
  auto promise = *node.leaving;
  finish_leave_if_done(self, name);
  return promise;
}

} // namespace troupe::chief_ops

// What the chief does when something is lost: a failed worker restarted
// under the restart intensity, a leaving node's workers placed again, a
// lost shard restored with every other from the newest checkpoint.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <set>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

/// Worker `id` met a training file that changed during the run
/// (errc::data_changed, naming it), and data.on_file_change is "skip": the
/// feeder leaves the file's samples out from now on, and the worker
/// starts again, its leases requeued without them (not a failure of its
/// own: no restart is counted). A file the chief cannot name stops the
/// run.
void skip_changed_file(chief_self self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  auto why = describe(reason);
  // Streamed click logs name their parts now (a followed folder's new
  // ones too); other sets, the files they were opened with.
  auto files = st.opts.data->train.files;
  if (auto& parts = st.opts.data->train.click_parts) {
    files.clear();
    for (auto& p : parts->parts())
      files.push_back({p.path, p.first, p.count});
  }
  std::optional<dataset::file_part> hit;
  for (auto& f : files)
    if (why.find(f.path + ": ") != std::string::npos)
      hit = f;
  if (!hit)
    return fail_run(self, reason);
  auto& w = st.members.worker(id);
  w.last_error = why;
  w.state = worker_phase::starting;
  if (st.members.skip_file(hit->path))
    say(self, fmt("skipping %s (data.on_file_change \"skip\"): %s; its "
                  "%lld samples are left out from now on",
                  hit->path.c_str(), why.c_str(),
                  static_cast<long long>(hit->count)));
  auto feeder = st.shards.feeder;
  self->request(feeder, timeout_of(self), skip_atom_v, hit->first, hit->count)
    .then(
      [=](int32_t) {
        self->request(feeder, timeout_of(self), requeue_atom_v, id)
          .then([=](int32_t) { place_worker(self, id); },
                [=](caf::error& err) { fail_run(self, std::move(err)); });
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// Restarts worker `id` after a failure: counted against the restart
/// intensity, its leases back to the feeder, started again.
void restart_worker(chief_self self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  auto& w = st.members.worker(id);
  auto why = describe(reason);
  // A dataset file that changed under the run would fail it again: the
  // run stops, or trains on without it.
  if (reason == errc::data_changed)
    return st.opts.cfg.data.skip_changed_files
             ? skip_changed_file(self, id, reason)
             : fail_run(self, reason);
  // A step that returned what its contract refuses would fail alike
  // after every restart.
  if (reason == errc::bad_step) {
    w.last_error = why;
    return fail_run(self, reason);
  }
  if (!st.members.restarts().allow(now_seconds()))
    return fail_run(
      self, make_error(errc::restart_limit,
                       fmt("worker %d failed and the restart limit is "
                           "reached (%d restarts within %.0f s): %s",
                           id, st.members.restarts().max_restarts(),
                           st.members.restarts().window(), why.c_str())));
  ++w.restarts;
  w.last_error = why;
  w.state = worker_phase::starting;
  say(self, fmt("worker %d failed (%s); restarting it (%d of at most %d "
                "within %.0f s)",
                id, why.c_str(), st.members.restarts().recent(),
                st.members.restarts().max_restarts(),
                st.members.restarts().window()));
  self->request(st.shards.feeder, timeout_of(self), requeue_atom_v, id)
    .then([=](int32_t) { place_worker(self, id); },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// A worker that lost its data-plane connection to a shard node, or whose
/// shard went away under a request (errc::actor_down from the shard's
/// node), waits this long before it counts as failed: when a shard or its
/// node died, the chief hears of it within the connection timeout and
/// restores the shards, which starts every worker again without counting
/// a restart.
caf::timespan shard_loss_grace(chief_self self) {
  return std::chrono::milliseconds(
    self->state.opts.cfg.cluster.connection_timeout_ms);
}

/// The worker `id` of a node that leaves the run is down: once every
/// worker there is, the node is answered and may go.
void finish_leave_if_done(chief_self self, const std::string& name) {
  auto& st = self->state;
  auto it = st.members.nodes().find(name);
  if (it == st.members.nodes().end() || !it->second.leaving)
    return;
  for (auto& [id, w] : st.members.workers())
    if (w.node == name && w.state == worker_phase::leaving)
      return;
  say(self, fmt("node %s has left the run", name.c_str()));
  it->second.leaving->deliver(true);
  it->second.leaving.reset();
}

/// A worker of a leaving node has finished its steps in flight: the lease
/// it still held goes back to the feeder, and it starts again where the
/// placement puts it (another node, or waiting for this one to return).
void replace_leaving_worker(chief_self self, int32_t id) {
  auto& st = self->state;
  if (st.recovery.recovering()) // the recovery rewinds the feeder and starts it
    return;
  self->request(st.shards.feeder, timeout_of(self), requeue_atom_v, id)
    .then([=](int32_t) { place_worker(self, id); },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void on_worker_down(chief_self self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  auto& w = st.members.worker(id);
  w.handle = worker_actor{};
  bool was_leaving = w.state == worker_phase::leaving;
  if (was_leaving) {
    w.state = worker_phase::starting;
    finish_leave_if_done(self, w.node);
  }
  if (st.recovery.stopped(id)) { // stopped for a shard recovery
    if (st.recovery.all_stopped())
      after_workers_stopped(self);
    return;
  }
  if (was_leaving) // however it ended, its node sent it away
    return replace_leaving_worker(self, id);
  if ((reason == errc::node_unreachable || reason == errc::actor_down)
      && !st.recovery.recovering()) {
    w.state = worker_phase::starting;
    say(self,
        fmt("worker %d lost a shard (%s); waiting %.1f s for the "
            "chief to see it",
            id, describe(reason).c_str(),
            std::chrono::duration<double>(shard_loss_grace(self)).count()));
    self->delayed_send(self, shard_loss_grace(self), place_atom_v, id,
                       st.recovery.generation(), reason);
    return;
  }
  if (!reason || reason == caf::exit_reason::user_shutdown) {
    w.state = worker_phase::finished;
    // It will push no more: ssp stops waiting for its clock.
    for (auto& s : st.shards.handles())
      self->send(s, leave_atom_v, id);
    // A worker ends normally only once the feeder has nothing left, so
    // workers still waiting for their node have nothing left to train.
    release_waiting_if_idle(self);
    return;
  }
  if (reason == caf::exit_reason::remote_link_unreachable)
    node_lost(self, w.node, describe(reason));
  if (st.recovery.recovering()) // the recovery starts it again with the others
    return;
  restart_worker(self, id, reason);
}

/// One shard's slice of a checkpoint.
shard_state_msg slice_of(chief_self self, const checkpoint& ck, size_t i,
                         int64_t version) {
  auto r = self->state.shards.ranges[i];
  shard_state_msg s;
  s.shard = static_cast<int32_t>(i);
  s.version = version;
  s.values = slice_of(ck.params, r);
  for (auto& [name, v] : ck.slots) {
    s.slot_names.push_back(name);
    s.slots.push_back(slice_of(v, r));
  }
  return s;
}

/// The shard version a checkpoint records; troupe-train's files have
/// none, and there the step is the optimizer's step.
caf::expected<int64_t> version_of(const checkpoint& ck,
                                  const std::string& path) {
  auto it = ck.metadata.find("shard_version");
  if (it == ck.metadata.end())
    return ck.step;
  char* end = nullptr;
  errno = 0;
  auto v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0 || v < 0)
    return make_error(errc::bad_format,
                      path
                        + ": metadata \"shard_version\" is not a "
                          "non-negative integer: \""
                        + it->second + "\"");
  return v;
}

/// The nodes of lost shards that are down, as "a, b" (empty: none).
std::string lost_shard_nodes_down(chief_self self) {
  auto& st = self->state;
  std::set<std::string> down;
  for (size_t i = 0; i < st.shards.count(); ++i)
    if (!st.shards.handles()[i] && !st.members.is_up(st.shards.node_of(i)))
      down.insert(st.shards.node_of(i));
  std::string out;
  for (auto& n : down)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// The shards hold the run again: every worker not finished is joined on
/// them and started, the feeder leases again, and what waited for the
/// recovery runs.
void resume_after_recovery(chief_self self) {
  auto& st = self->state;
  auto ids = st.members.live_ids();
  join_now(self, ids, [=] {
    auto& s = self->state;
    s.eval.last_eval_step = -1;
    if (!s.progress.user_paused())
      self->send(s.shards.feeder, resume_atom_v);
    s.recovery.end();
    for (auto id : ids)
      place_worker(self, id);
    for (auto& f : s.recovery.take_waiting())
      f();
    place_replicas(self); // for the shards that lost theirs
  });
}

/// Restores all shards (the lost ones started anew) from checkpoint `ck`
/// at shard version `version` and rewinds the feeder to its position.
void restore_from_checkpoint(chief_self self, std::shared_ptr<checkpoint> ck,
                             int64_t version, const std::string& path) {
  auto& st = self->state;
  auto position = ck->step;
  auto plan = feeder_position_of(*ck).plan;
  // The dense states, then the tables, then the feeder.
  auto all_restored = [=] {
    restore_tables(self, *ck, [=](caf::error tables_err) {
      if (tables_err)
        return fail_run(self, std::move(tables_err));
      follow_cover(self, position, [=] {
        self
          ->request(self->state.shards.feeder, timeout_of(self), restore_atom_v,
                    position, plan, std::vector<int64_t>{},
                    std::vector<int64_t>{})
          .then(
            [=](int64_t) {
              auto& s = self->state;
              auto lost = std::max<int64_t>(0, s.progress.steps() - position);
              s.recovery.lose_steps(lost);
              s.progress.set_steps(position);
              say(self, fmt("shards restored from %s at step %lld; %lld steps "
                            "lost, to be trained again",
                            path.c_str(), static_cast<long long>(position),
                            static_cast<long long>(lost)));
              resume_after_recovery(self);
            },
            [=](caf::error& err) { fail_run(self, std::move(err)); });
      });
    });
  };
  auto one_done = countdown(st.shards.count(), all_restored);
  for (size_t i = 0; i < st.shards.count(); ++i) {
    auto state = slice_of(self, *ck, i, version);
    if (st.shards.handles()[i]) {
      ask_shard(self, i, restore_atom_v, std::move(state))
        .then([=](int64_t) { one_done(); },
              [=](caf::error& err) { fail_run(self, std::move(err)); });
    } else {
      auto node = shard_home(self, i);
      say(self, fmt("starting shard %zu on node %s", i, node.c_str()));
      place_shard(self, i, node, std::move(state), one_done);
    }
  }
}

void restore_after_loss(chief_self self) {
  auto& st = self->state;
  if (auto down = lost_shard_nodes_down(self);
      !down.empty() && !st.recovery.shard_wait_over()) {
    if (st.recovery.wait_for_shard_nodes()) {
      say(
        self,
        fmt("waiting up to %.1f s for node %s to come back with its "
            "shards",
            std::chrono::duration<double>(shard_node_wait(st.opts.cfg)).count(),
            down.c_str()));
      self->delayed_send(self, shard_node_wait(st.opts.cfg), restore_atom_v,
                         st.recovery.generation());
    }
    return;
  }
  st.recovery.end_shard_wait();
  // Only this run's own checkpoints: a folder may hold another run's,
  // newer ones included.
  auto found = load_newest(st.opts.cfg.training.checkpoint.dir, stamp_of(self),
                           checkpoint_pick::this_run, st.eval.layout);
  if (!found)
    return fail_run(self, found.error());
  if (!*found)
    return fail_run(self, make_error(errc::actor_down,
                                     "a shard was lost and there is no "
                                     "checkpoint to restore it from"));
  auto path = (*found)->path;
  auto ck = caf::expected<checkpoint>{std::move((*found)->ckpt)};
  auto version = version_of(*ck, path);
  if (!version)
    return fail_run(self, version.error());
  auto shared = std::make_shared<checkpoint>(std::move(*ck));
  auto since = *version;
  // The shards that lived on (all of them, when only links broke) may
  // hold every step since the checkpoint: then nothing is lost.
  adopt_live_shards(self, since, [=](live_found& live) {
    if (live.verdict.keep_live)
      return keep_live_shards(self, live, feeder_position_of(*shared),
                              [=] { resume_after_recovery(self); });
    say(self,
        fmt("cannot keep the live shards (%s)", live.verdict.why_not.c_str()));
    stop_live_shards_left(self, live);
    restore_from_checkpoint(self, shared, since, path);
  });
}

/// The replicas took the lost shards over in step: every lease of the
/// stopped workers goes back to the feeder (a batch some shards applied
/// is a duplicate there when it comes again), and the run goes on.
void go_on_after_takeover(chief_self self) {
  auto& st = self->state;
  auto ids = st.members.live_ids();
  auto all_back = countdown(ids.size(), [=] {
    self->state.recovery.count_takeover();
    say(self, "the replicas hold every step the shards acknowledged: 0 "
              "steps lost");
    resume_after_recovery(self);
  });
  for (auto id : ids)
    self->request(st.shards.feeder, timeout_of(self), requeue_atom_v, id)
      .then([=](int32_t) { all_back(); },
            [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void after_workers_stopped(chief_self self) {
  auto& st = self->state;
  std::vector<size_t> lost, promotable;
  for (size_t i = 0; i < st.shards.count(); ++i)
    if (!st.shards.handles()[i]) {
      lost.push_back(i);
      if (replicated(self) && st.shards.has_replica(i))
        promotable.push_back(i);
    }
  if (promotable.empty())
    return restore_after_loss(self);
  auto in_step = std::make_shared<bool>(promotable.size() == lost.size());
  auto all_done = countdown(promotable.size(), [=] {
    if (*in_step) {
      // A shard whose loss was seen after these promotions began (the
      // workers had stopped already, so they began at the first loss):
      // its replica's turn now.
      auto& handles = self->state.shards.handles();
      if (std::any_of(handles.begin(), handles.end(),
                      [](const shard_actor& h) { return !h; }))
        return after_workers_stopped(self);
      return go_on_after_takeover(self);
    }
    if (self->state.opts.cfg.training.checkpoint.dir.empty())
      return fail_run(self,
                      make_error(errc::actor_down,
                                 "a lost shard had no replica in step and "
                                 "the run has no checkpoint dir to restore "
                                 "it from"));
    restore_after_loss(self);
  });
  for (auto i : promotable) {
    auto h = st.shards.replicas()[i].handle;
    auto node = st.shards.replicas()[i].node;
    bool was_in_step = st.shards.replicas()[i].in_step;
    if (!was_in_step)
      *in_step = false;
    auto* n = st.members.find_node(node);
    if (n == nullptr || !n->up || !n->agent) {
      *in_step = false;
      all_done();
      continue;
    }
    answer_from<int64_t>(
      self, node,
      self->request(n->agent, timeout_of(self), promote_atom_v,
                    static_cast<int32_t>(i)),
      [=](int64_t version) {
        auto& s = self->state;
        s.shards.replica_took_over(i, h);
        s.shards.started(i, h, node);
        say(self, fmt("shard %zu: its replica on node %s took over at "
                      "version %lld%s",
                      i, node.c_str(), static_cast<long long>(version),
                      was_in_step ? ""
                                  : " (its copy was not complete: the "
                                    "shards are restored from the "
                                    "newest checkpoint)"));
        all_done();
      },
      [=](caf::error& err) {
        *in_step = false;
        say(self, fmt("the replica of shard %zu on node %s could not take "
                      "over: %s",
                      i, node.c_str(), describe(err).c_str()));
        all_done();
      });
  }
}

/// A shard went down: stop every worker, then after_workers_stopped.
void on_shard_down(chief_self self, size_t i, const caf::error& reason) {
  auto& st = self->state;
  auto why = describe(reason);
  auto node = st.shards.node_of(i);
  st.shards.lost(i);
  if (reason == caf::exit_reason::remote_link_unreachable)
    node_lost(self, node, why);
  bool has_replica = replicated(self) && st.shards.has_replica(i);
  if (!has_replica && st.opts.cfg.training.checkpoint.dir.empty())
    return fail_run(self, make_error(errc::actor_down,
                                     fmt("shard %zu on node %s stopped (%s) "
                                         "and the run has no replica of it "
                                         "and no checkpoint dir to restore "
                                         "it from",
                                         i, node.c_str(), why.c_str())));
  if (has_replica)
    say(self, fmt("shard %zu on node %s stopped (%s); its replica on node "
                  "%s takes over",
                  i, node.c_str(), why.c_str(),
                  st.shards.replicas()[i].node.c_str()));
  else
    say(self, fmt("shard %zu on node %s stopped (%s); recovering the shards", i,
                  node.c_str(), why.c_str()));
  if (st.recovery.recovering()) // the recovery under way restarts it too
    return;
  st.recovery.begin_recovery();
  for (auto& [id, w] : st.members.workers())
    if (w.handle) {
      st.recovery.stopping(id);
      self->send_exit(w.handle, caf::exit_reason::user_shutdown);
    }
  if (st.recovery.all_stopped())
    after_workers_stopped(self);
}

} // namespace troupe::chief_ops

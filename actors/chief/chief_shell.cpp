// The chief's side of troupe-shell: typed requests in (actors/
// shell_protocol.hpp), typed answers out. Parsing the command text and
// rendering the answers is troupe-shell's job (apps/shell/shell_*). Rates are
// examples per second of compute time; a worker's step counts all its
// incarnations' steps, and its staleness is the most updates a shard
// applied between one of its pulls and the matching push, over its last
// report.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "actors/chief/chief_ops.hpp"
#include "actors/fan_out.hpp"
#include "actors/timing.hpp"
#include "runtime/params/optimizer.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

caf::error refused(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

namespace {

/// Refuses a steering request while the nodes are still registering.
caf::error unless_started(chief_self self) {
  if (!self->state.nodes_ready())
    return refused("the cluster is still starting (waiting for: "
                   + missing_nodes(self) + ")");
  return {};
}

run_view run_of(chief_self self) {
  auto& st = self->state;
  auto& c = st.opts.cfg;
  run_view r;
  r.name = c.name;
  r.run_id = st.run_id;
  r.config_digest = st.digest;
  r.mode = to_string(c.cluster.consistency);
  r.phase = to_string(st.phase);
  r.own_node = st.own_node();
  r.optimizer = to_string(c.training.optimizer.type);
  r.steps = st.progress.steps();
  r.samples = st.progress.samples();
  r.epoch = static_cast<double>(st.progress.steps())
            / static_cast<double>(st.progress.per_epoch);
  r.seconds = st.training() ? st.progress.training_seconds(now_seconds()) : 0;
  r.examples_per_sec = r.seconds > 0
                         ? static_cast<double>(st.progress.samples())
                             / r.seconds
                         : 0.0;
  // A regression has no accuracy (its R^2 is in the progress lines).
  r.test_accuracy = is_regression(st.opts.cfg.model.loss)
                      ? -1
                      : st.eval.last_accuracy;
  r.total_steps = st.progress.total_steps;
  auto opt = c.training.optimizer;
  opt.learning_rate = st.progress.base_lr > 0 ? st.progress.base_lr
                                              : opt.learning_rate;
  r.learning_rate = learning_rate_at(opt, st.progress.steps());
  // sync: the shards scale it for an update of k pushes (sync_lr); its
  // steps are batches, k to an update.
  if (c.cluster.consistency == cluster_config::mode::sync) {
    auto k = c.cluster.replicas_to_aggregate > 0
               ? c.cluster.replicas_to_aggregate
               : std::max(1, st.members.live_workers());
    r.learning_rate *= sync_rate_scale(
      c.cluster.sync_lr, k, st.progress.steps() / k, c.cluster.sync_warmup);
  }
  r.loss = st.progress.recent_loss();
  if (r.examples_per_sec > 0)
    r.eta_seconds = static_cast<double>(
                      std::max<int64_t>(0, r.total_steps - st.progress.steps()))
                    * c.training.batch_size / r.examples_per_sec;
  r.paused = st.progress.user_paused();
  r.recovering = st.recovery.recovering();
  r.stopping = st.stopping();
  r.restarts = st.members.total_restarts();
  r.shard_recoveries = st.recovery.recoveries();
  r.lost_steps = st.recovery.lost_steps();
  r.taken_over = !st.takeover.adopted_run.empty();
  r.taken_from_step = st.takeover.adopted_from_step;
  r.taken_lost_steps = st.takeover.adoption_lost_steps;
  r.last_checkpoint = st.checkpoints.last;
  if (st.checkpoints.last_step >= 0) {
    r.checkpoint_step = st.checkpoints.last_step;
    r.checkpoint_age = now_seconds() - st.checkpoints.last_written;
    r.checkpoint_took = st.checkpoints.last_took;
  }
  if (auto& ex = st.exports; !ex.last.kind.empty()) { // this chief's last
    r.export_sequence = ex.last.sequence;
    r.export_step = ex.last.step;
    r.export_kind = ex.last.kind;
    r.export_age = now_seconds() - ex.last_written;
    r.export_rows = static_cast<int64_t>(ex.last.rows);
    r.export_evicted = static_cast<int64_t>(ex.last.evicted);
    r.export_bytes = static_cast<int64_t>(ex.last.bytes);
  }
  if (auto& f = st.follow; st.opts.cfg.data.follow) {
    r.stream_parts = static_cast<int64_t>(f.taken.size());
    r.stream_waiting = std::max<int64_t>(
      0, static_cast<int64_t>(st.opts.data->train.click_parts->part_count())
           - r.stream_parts);
    r.progressive_samples = f.step_samples;
    if (f.step_samples > 0)
      r.progressive_loss = f.step_loss_sum
                           / static_cast<double>(f.step_samples);
    if (f.scored_samples > 0)
      r.parts_loss = f.loss_sum / static_cast<double>(f.scored_samples);
    if (!f.last.name.empty()) {
      r.last_part = f.last.name;
      r.last_part_loss = f.last.loss;
      r.last_part_auc = f.last.auc;
    }
  }
  return r;
}

std::vector<node_view> nodes_of(chief_self self) {
  auto& st = self->state;
  std::vector<node_view> out;
  for (auto& [name, n] : st.members.nodes()) {
    node_view v;
    v.name = name;
    v.address = n.address();
    v.up = n.up;
    v.chief = name == st.own_node();
    v.joined = n.joined;
    for (size_t i = 0; i < st.shards.nodes().size(); ++i)
      if (st.shards.node_of(i) == name)
        v.shards.push_back(static_cast<int32_t>(i));
    for (auto& [id, w] : st.members.workers())
      if (w.node == name && w.state != worker_phase::finished)
        v.workers.push_back(id);
    out.push_back(std::move(v));
  }
  return out;
}

worker_view worker_view_of(chief_self self, int32_t id, const worker_entry& w) {
  worker_view v;
  v.id = id;
  v.node = w.node;
  v.state = self->state.recovery.recovering()
                && w.state != worker_phase::finished
              ? "restoring"
              : to_string(w.state);
  v.step = w.steps;
  v.clock = w.clock;
  v.samples = w.samples;
  v.staleness = w.staleness;
  v.mean_staleness = w.mean_staleness();
  v.window_steps = w.window.steps;
  v.examples_per_sec = w.seconds > 0
                         ? static_cast<double>(w.samples) / w.seconds
                         : 0.0;
  v.loss = w.last_loss;
  v.compute_seconds = w.seconds;
  v.read_seconds = w.read_seconds;
  v.read_bytes = w.read_bytes;
  v.restarts = w.restarts;
  v.last_error = w.last_error;
  return v;
}

shard_view shard_view_of(chief_self self, size_t i, const shard_stats* s) {
  auto& st = self->state;
  shard_view v;
  v.id = static_cast<int32_t>(i);
  v.node = st.shards.node_of(i);
  v.state = s ? "running" : (st.recovery.recovering() ? "restoring" : "down");
  v.begin = st.shards.ranges[i].begin;
  v.end = st.shards.ranges[i].end;
  if (s) {
    v.answered = true;
    v.version = s->version;
    v.accepted = s->accepted;
    v.stale = s->stale;
    v.refused = s->refused;
    v.pulled_bytes = s->pulled_bytes;
    v.pushed_bytes = s->pushed_bytes;
    if (has_tables(self)) {
      v.rows = s->rows;
      v.row_bytes = s->row_bytes;
      v.rows_pulled = s->rows_pulled;
      v.rows_pushed = s->rows_pushed;
      auto setups = embedding_tables(st.opts.cfg);
      for (size_t t = 0; t < s->tables.size() && t < setups.size(); ++t) {
        auto& c = s->tables[t];
        v.tables.push_back(table_view{setups[t].table.name, c.rows, c.row_bytes,
                                      c.rows_pulled, c.rows_pushed, c.rows_made,
                                      c.rows_rejected, c.rows_evicted,
                                      c.filter_used, c.filter_counters});
      }
    }
    if (st.opts.cfg.cluster.consistency == cluster_config::mode::ssp) {
      v.ssp_pulls = s->ssp_pulls;
      v.ssp_max_lead = s->ssp_max_lead;
    }
  }
  if (replicated(self)) {
    auto& replicas = st.shards.replicas();
    bool has = i < replicas.size()
               && (replicas[i].handle || replicas[i].placing);
    v.replica_node = has ? replicas[i].node : std::string{};
    v.replica = !has                  ? "none"
                : !replicas[i].handle ? "starting"
                : s && s->replica == static_cast<int8_t>(replica_state::in_step)
                  ? "in step"
                  : "copying";
    if (s) {
      v.replica_lag = s->replica_lag;
      v.replica_version = s->replica_version;
      v.replica_rows = s->replica_rows;
    }
  }
  return v;
}

/// How long the view's questions to the shards and the feeder may take:
/// one that does not answer in time shows as down. Short, because the
/// page asks for a view twice a second and the whole view waits for the
/// slowest (a frozen node's shard answers nothing until its links time
/// out, 3 s by default).
constexpr auto shell_patience = std::chrono::seconds(2);
/// And each node's agent, for its process's usage: one that does not
/// answer in time shows what it last said, its heard age growing.
constexpr auto agent_patience = std::chrono::seconds(1);
/// The agents to ask for their process's usage, by the view's node index
/// (the chief's own process answers for itself where no agent runs in
/// it).
std::vector<std::pair<size_t, node_agent_actor>>
agents_to_ask(chief_self self, std::vector<node_view>& nodes) {
  std::vector<std::pair<size_t, node_agent_actor>> agents;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = self->state.members.nodes().find(nodes[i].name);
    if (it != self->state.members.nodes().end() && it->second.up
        && it->second.agent)
      agents.emplace_back(i, it->second.agent);
    else if (nodes[i].chief)
      take_usage(nodes[i], own_process_usage());
  }
  return agents;
}

/// Each agent's node shows what its agent said now, or last.
void take_agent_replies(
  chief_self self, std::vector<node_view>& nodes,
  const std::vector<std::pair<size_t, node_agent_actor>>& agents,
  std::vector<caf::expected<process_usage>>& replies) {
  auto& members = self->state.members;
  const double now = now_seconds();
  for (size_t k = 0; k < replies.size(); ++k) {
    auto& node = nodes[agents[k].first];
    auto* entry = members.find_node(node.name);
    if (entry == nullptr)
      continue;
    if (replies[k]) {
      entry->usage = std::move(*replies[k]);
      entry->heard_at = now;
    }
    if (entry->usage)
      take_usage(node, *entry->usage);
  }
  for (auto& node : nodes) {
    auto* entry = members.find_node(node.name);
    if (node.chief)
      node.heard_age = 0; // the chief's own process
    else if (entry != nullptr && entry->heard_at >= 0)
      node.heard_age = now - entry->heard_at;
  }
}

/// Each worker shows its node's process: found by name, not by a scan of
/// the nodes per worker (10,000 of each would take 10^8).
void take_worker_processes(cluster_view& view) {
  std::unordered_map<std::string, const node_view*> by_name;
  for (auto& node : view.nodes)
    by_name.emplace(node.name, &node);
  for (auto& w : view.workers)
    if (auto it = by_name.find(w.node); it != by_name.end()) {
      w.pid = it->second->pid;
      w.host = it->second->host;
      w.program = it->second->program;
    }
}

} // namespace

caf::result<cluster_view> shell_status(chief_self self) {
  auto& st = self->state;
  auto promise = self->make_response_promise<cluster_view>();
  auto view = std::make_shared<cluster_view>();
  view->run = run_of(self);
  view->nodes = nodes_of(self);
  for (auto& [id, w] : st.members.workers())
    view->workers.push_back(worker_view_of(self, id, w));
  // Only the live shards are asked; the feeder and each node's agent at
  // the same time, so the view waits for the slowest of them, not for
  // their sum. At normal priority: CAF 0.17.6 loses the answer to a
  // request sent with message_priority::high to another process (tried:
  // the receiver answers, the asker times out), so the view cannot jump
  // a busy shard's queue.
  std::vector<size_t> live;
  for (size_t i = 0; i < st.shards.count(); ++i)
    if (st.shards.handles()[i])
      live.push_back(i);
  auto shard_replies =
    std::make_shared<std::vector<caf::expected<shard_stats>>>();
  auto done = countdown(3, [=]() mutable {
    auto n = self->state.shards.count();
    std::vector<const shard_stats*> by_shard(n, nullptr);
    for (size_t k = 0; k < shard_replies->size(); ++k)
      if ((*shard_replies)[k] && live[k] < n) // n falls if a shard drained
        by_shard[live[k]] = &*(*shard_replies)[k];
    for (size_t i = 0; i < n && i < self->state.shards.ranges.size(); ++i)
      view->shards.push_back(shard_view_of(self, i, by_shard[i]));
    take_worker_processes(*view);
    promise.deliver(std::move(*view));
  });
  ask_all_settled<shard_stats>(
    live.size(),
    [=](size_t k) {
      return self->request(self->state.shards.handles()[live[k]],
                           shell_patience, stats_atom_v);
    },
    [=](auto& replies) mutable {
      *shard_replies = std::move(replies);
      done();
    });
  if (auto feeder = st.shards.feeder)
    self->request(feeder, shell_patience, stats_atom_v)
      .then(
        [=](feeder_stats& fs) mutable {
          view->feeder = {true, fs.acked, fs.position,
                          std::move(fs.epoch_samples)};
          done();
        },
        [=](caf::error&) mutable { done(); });
  else
    done();
  auto agents = agents_to_ask(self, view->nodes);
  ask_all_settled<process_usage>(
    agents.size(),
    [=](size_t k) {
      return self->request(agents[k].second, agent_patience, stats_atom_v);
    },
    [=](auto& replies) mutable {
      take_agent_replies(self, view->nodes, agents, replies);
      done();
    });
  return promise;
}

caf::result<std::vector<int32_t>, std::string>
shell_add_workers(chief_self self, int32_t n, std::string node) {
  auto& st = self->state;
  if (auto err = unless_started(self))
    return err;
  if (n < 1 || n > max_join_workers)
    return refused("add-worker: N must be 1.."
                   + std::to_string(max_join_workers) + ", got "
                   + std::to_string(n));
  if (node.size() > max_node_name)
    return refused("add-worker: a node name of " + std::to_string(node.size())
                   + " characters (at most " + std::to_string(max_node_name)
                   + ")");
  if (!node.empty()) {
    auto it = st.members.nodes().find(node);
    if (it == st.members.nodes().end() || !it->second.up)
      return refused("add-worker: no node \"" + node + "\" is up");
  } else {
    node = self->state.members.least_loaded_node();
  }
  if (st.stopping() || st.ended())
    return refused("add-worker: the run is ending");
  auto ids = add_workers(self, node, n);
  return {std::move(ids), std::move(node)};
}

caf::result<bool> shell_kill(chief_self self, const actor_ref& target) {
  auto& st = self->state;
  if (auto err = unless_started(self))
    return err;
  auto index = target.index;
  switch (target.role) {
    case actor_role::worker: {
      auto it = st.members.workers().find(index);
      if (it == st.members.workers().end() || !it->second.handle)
        return refused("no running worker " + std::to_string(index));
      self->send_exit(it->second.handle, caf::exit_reason::kill);
      break;
    }
    case actor_role::shard:
      if (index < 0 || static_cast<size_t>(index) >= st.shards.count()
          || !st.shards.handles()[static_cast<size_t>(index)])
        return refused("no running shard " + std::to_string(index));
      self->send_exit(st.shards.handles()[static_cast<size_t>(index)],
                      caf::exit_reason::kill);
      break;
    default: return refused("usage: kill worker:N | shard:N");
  }
  say(self, "shell: kill " + to_string(target));
  return true;
}

caf::result<std::string> shell_checkpoint(chief_self self) {
  if (auto err = unless_started(self))
    return err;
  if (self->state.opts.cfg.training.checkpoint.dir.empty())
    return refused("checkpoint: the run has no /training/checkpoint/dir");
  auto promise = self->make_response_promise<std::string>();
  checkpoint_now(self, [=]() mutable {
    promise.deliver(self->state.checkpoints.last);
  });
  return promise;
}

caf::result<std::string> shell_export(chief_self self) {
  if (auto err = unless_started(self))
    return err;
  if (self->state.opts.cfg.training.exports.dir.empty())
    return refused("export: the run has no /training/export/dir");
  auto promise = self->make_response_promise<std::string>();
  auto before = self->state.exports.sequence;
  export_now(self, [=]() mutable {
    auto& ex = self->state.exports;
    if (ex.sequence == before) { // lost to a recovery, or failed (logged)
      promise.deliver(make_error(errc::io_error, "export: not written; the "
                                                 "chief's log says why"));
      return;
    }
    auto& e = ex.last;
    promise.deliver(fmt("export %lld (%s) at step %lld: %llu rows, %llu "
                        "evicted keys, %llu bytes, in %s",
                        static_cast<long long>(e.sequence), e.kind.c_str(),
                        static_cast<long long>(e.step),
                        static_cast<unsigned long long>(e.rows),
                        static_cast<unsigned long long>(e.evicted),
                        static_cast<unsigned long long>(e.bytes),
                        self->state.opts.cfg.training.exports.dir.c_str()));
  });
  return promise;
}

caf::result<double> shell_tune(chief_self self, tune_key key, double value) {
  auto& st = self->state;
  if (auto err = unless_started(self))
    return err;
  if (key != tune_key::lr)
    return refused("tune: unknown setting "
                   + std::to_string(static_cast<int>(key)));
  if (st.recovery.recovering())
    return refused("set: a shard is being restored; try again shortly");
  if (!(value > 0) || !std::isfinite(value))
    return refused("set lr: expected a number > 0, got "
                   + std::to_string(value));
  auto promise = self->make_response_promise<double>();
  auto shards = st.shards.handles();
  ask_all<bool>(
    shards.size(),
    [=](size_t i) {
      return self->request(shards[i], timeout_of(self), tune_atom_v,
                           std::string{to_string(key)}, value);
    },
    [=](auto&) mutable {
      self->state.progress.base_lr = value;
      say(self, fmt("shell: learning rate set to %g", value));
      promise.deliver(value);
    },
    [=](caf::error& err) mutable { promise.deliver(err); });
  return promise;
}

caf::result<bool> shell_pause(chief_self self, bool paused) {
  if (auto err = unless_started(self))
    return err;
  set_user_pause(self, paused);
  return self->state.progress.user_paused();
}

caf::result<bool> shell_stop(chief_self self) {
  if (!self->state.training())
    return refused("stop: the run has not started training yet");
  stop_run(self, "the shell");
  return true;
}

} // namespace troupe::chief_ops

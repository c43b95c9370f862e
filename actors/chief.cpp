#include "actors/chief.hpp"

#include <random>

#include "runtime/checkpoint_dir.hpp"
#include "actors/chief_state.hpp"
#include "actors/data_link.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sys/stat.h>

#include "actors/fan_out.hpp"
#include "actors/feeder.hpp"
#include "actors/node_agent.hpp"
#include "actors/remote.hpp"
#include "actors/shard.hpp"
#include "actors/timing.hpp"
#include "actors/worker.hpp"
#include "models/model.hpp"
#include "models/trainer.hpp"
#include "runtime/checkpoint.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/errc.hpp"
#include "runtime/metrics_log.hpp"
#include "runtime/placement.hpp"
#include "runtime/restart_limit.hpp"

namespace troupe {

namespace chief_ops {

caf::timespan timeout_of(chief_self self) {
  return request_timeout(self->state.opts.cfg);
}

void say(chief_self self, const std::string& line, bool tagged) {
  if (self->state.opts.log != nullptr)
    *self->state.opts.log << (tagged && self->state.opts.insecure_links
                                ? "[INSECURE links] "
                                : "")
                          << line << std::endl;
}

run_stamp stamp_of(chief_self self) {
  return {self->state.run_id, self->state.identity};
}

std::string new_run_id() {
  std::random_device rd;
  uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

std::string fmt(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

double epoch_of(chief_self self, int64_t steps) {
  return static_cast<double>(steps)
         / static_cast<double>(self->state.per_epoch);
}

/// Stops every actor of the run, then the chief.
void shut_down(chief_self self) {
  auto& st = self->state;
  for (auto& [id, w] : st.workers)
    if (w.handle)
      self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  for (auto& s : st.shards)
    if (s)
      self->send_exit(s, caf::exit_reason::user_shutdown);
  if (st.feeder)
    self->send_exit(st.feeder, caf::exit_reason::user_shutdown);
  self->quit();
}

/// Tells every node agent that the run is over, with `reason` (none: it
/// succeeded), so that each stops what it started and its process exits
/// with the run's outcome; then runs `then`. A node that does not answer
/// within two seconds is not waited for.
void release_nodes(chief_self self, const caf::error& reason,
                   std::function<void()> then) {
  auto& st = self->state;
  std::vector<node_agent_actor> agents;
  for (auto& [name, n] : st.nodes)
    if (n.up && n.agent)
      agents.push_back(n.agent);
  ask_all_settled<bool>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i], std::chrono::seconds(2), finish_atom_v,
                           reason);
    },
    [then = std::move(then)](auto&) { then(); });
}

void fail_run(chief_self self, caf::error err) {
  auto& st = self->state;
  if (st.ended())
    return;
  st.enter(run_phase::ended);
  say(self, "error: " + describe(err));
  release_nodes(self, err, [=]() mutable {
    self->state.reply.deliver(std::move(err));
    shut_down(self);
  });
}

/// Requests `make(i)` from every shard; `done` gets the replies in shard
/// order once all are in. An error fails the run, unless the shards were
/// replaced meanwhile (a recovery) and `lost` is given: then `lost` runs.
template <class Reply, class Make>
void ask_all_shards(chief_self self, Make make,
                    std::function<void(std::vector<Reply>&)> done,
                    std::function<void()> lost = nullptr) {
  auto gen = self->state.generation;
  ask_all<Reply>(self->state.shards.size(), std::move(make), std::move(done),
                 [=](caf::error& err) {
                   auto& st = self->state;
                   if (lost && (st.recovering || st.generation != gen))
                     return lost();
                   fail_run(self, std::move(err));
                 });
}

/// Pulls every shard (as worker -1) into one host vector.
void pull_params(chief_self self,
                 std::function<void(std::vector<float>&, int64_t)> done,
                 std::function<void()> lost = nullptr) {
  ask_all_shards<float_block>(
    self,
    [=](size_t i) {
      return self->request(self->state.shards[i], timeout_of(self),
                           pull_atom_v, int32_t{-1}, int64_t{0});
    },
    [=](std::vector<float_block>& blocks) {
      std::vector<const std::vector<float>*> parts;
      for (auto& b : blocks)
        parts.push_back(b.values.get());
      auto all = gather_parts(self->state.ranges, parts);
      if (!all)
        return fail_run(self, all.error());
      done(*all, blocks.empty() ? 0 : blocks[0].version);
    },
    std::move(lost));
}

/// Runs `f` now, or after the shard recovery in progress.
void when_recovered(chief_self self, std::function<void()> f) {
  if (self->state.recovering)
    self->state.after_recovery.push_back(std::move(f));
  else
    f();
}

/// Evaluates the current parameters on the test set, then runs `then`.
/// One evaluation at a time: a request during one waits for it and then
/// evaluates again unless no step has been trained since it began (every
/// push of a reported step is applied before its report is sent, so an
/// evaluation begun at step N sees all N steps).
void evaluate_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  if (st.evaluating) {
    st.eval_waiters.push_back(std::move(then));
    return;
  }
  if (st.recovering) {
    st.after_recovery.push_back([=] { evaluate_now(self, then); });
    return;
  }
  if (st.last_eval_step == st.steps)
    return then();
  st.evaluating = true;
  st.last_eval_step = st.steps;
  auto retry = [=] { // a shard was lost meanwhile: again after recovery
    auto& s = self->state;
    s.evaluating = false;
    s.last_eval_step = -1;
    auto waiters = std::move(s.eval_waiters);
    s.eval_waiters.clear();
    waiters.insert(waiters.begin(), then);
    for (auto& f : waiters)
      when_recovered(self, [=] { evaluate_now(self, f); });
  };
  pull_params(
    self,
    [=](std::vector<float>& params, int64_t) {
      auto& s = self->state;
      s.evaluator->set_params(params.data());
      auto r = evaluate(*s.evaluator, s.opts.data->test,
                        std::max(s.opts.cfg.training.batch_size, 256));
      s.last_accuracy = r.accuracy;
      s.last_loss = r.loss;
      double t = now_seconds() - s.t0;
      auto at = s.last_eval_step;
      say(self, fmt("step %lld, epoch %.2f: test accuracy = %.4f, test loss = "
                    "%.4f (%lld examples, %.1f s)",
                    static_cast<long long>(at), epoch_of(self, at),
                    r.accuracy, r.loss, static_cast<long long>(r.count), t));
      s.metrics.evaluation(t, at, epoch_of(self, at), r.accuracy, r.loss);
      s.evaluating = false;
      then();
      auto waiters = std::move(self->state.eval_waiters);
      self->state.eval_waiters.clear();
      for (auto& f : waiters)
        evaluate_now(self, std::move(f));
    },
    retry);
}

/// Writes the shards' states as one checkpoint file at feeder position
/// `position`; returns the error of the write.
caf::error write_shards(chief_self self, int64_t position,
                        std::vector<shard_state_msg>& parts) {
  auto& s = self->state;
  checkpoint ckpt;
  ckpt.step = position;
  ckpt.layout = s.evaluator->layout();
  // The values, then each optimizer slot, gathered from the shards' parts
  // (every shard has the same slots: one optimizer for the run).
  auto gather = [&](auto part_of) -> caf::expected<std::vector<float>> {
    std::vector<const std::vector<float>*> pieces;
    for (auto& p : parts)
      pieces.push_back(part_of(p));
    return gather_parts(s.ranges, pieces);
  };
  auto values = gather([](auto& p) { return &p.values; });
  if (!values)
    return values.error();
  ckpt.params = std::move(*values);
  for (size_t n = 0; n < parts[0].slot_names.size(); ++n) {
    auto slot = gather([n](auto& p) {
      return n < p.slots.size() ? &p.slots[n] : nullptr;
    });
    if (!slot)
      return slot.error();
    ckpt.slots.emplace_back(parts[0].slot_names[n], std::move(*slot));
  }
  ckpt.metadata["optimizer"] = to_string(s.opts.cfg.training.optimizer.type);
  ckpt.metadata["model"] = s.evaluator->summary();
  ckpt.metadata["mode"] = to_string(s.opts.cfg.cluster.consistency);
  ckpt.metadata["shard_version"] = std::to_string(parts[0].version);
  stamp_checkpoint(ckpt, stamp_of(self));
  auto& dir = s.opts.cfg.training.checkpoint.dir;
  std::error_code ec; // a failure shows in the write's own error
  std::filesystem::create_directories(dir, ec);
  auto path = dir + "/ckpt-" + std::to_string(position) + ".safetensors";
  if (auto err = write_checkpoint(path, ckpt))
    return err;
  s.last_checkpoint = path;
  say(self, fmt("step %lld: checkpoint %s", static_cast<long long>(position),
                path.c_str()));
  prune_checkpoints(dir, stamp_of(self), s.opts.cfg.training.checkpoint.keep);
  return {};
}

/// Pauses the feeder until every lease is acked, snapshots every shard at
/// that one step, writes the file, resumes.
void checkpoint_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  if (st.checkpointing || st.recovering) { // one at a time
    auto again = [=] { checkpoint_now(self, then); };
    if (st.checkpointing)
      st.checkpoint_waiters.push_back(again);
    else
      st.after_recovery.push_back(again);
    return;
  }
  st.checkpointing = true;
  auto finished = [=] {
    auto& s = self->state;
    s.checkpointing = false;
    auto waiters = std::move(s.checkpoint_waiters);
    s.checkpoint_waiters.clear();
    for (auto& f : waiters)
      f();
  };
  // A shard lost meanwhile: the recovery resumes the feeder; this
  // checkpoint is taken again afterwards.
  auto lost = [=] {
    finished();
    when_recovered(self, [=] { checkpoint_now(self, then); });
  };
  auto gen = st.generation;
  self->request(st.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](int64_t position) {
        if (self->state.generation != gen || self->state.recovering)
          return lost();
        ask_all_shards<shard_state_msg>(
          self,
          [=](size_t i) {
            return self->request(self->state.shards[i], timeout_of(self),
                                 snapshot_atom_v);
          },
          [=](std::vector<shard_state_msg>& parts) {
            if (auto err = write_shards(self, position, parts))
              return fail_run(self, std::move(err));
            if (!self->state.user_paused)
              self->send(self->state.feeder, resume_atom_v);
            finished();
            then();
          },
          lost);
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void print_summary(chief_self self, const cluster_summary& r) {
  auto& c = self->state.opts.cfg;
  std::string per_epoch;
  for (auto n : r.epoch_samples)
    per_epoch += " " + std::to_string(n);
  say(self, "samples trained per epoch:" + per_epoch);
  say(self, fmt("pushes accepted %lld, stale %lld, refused %lld",
                static_cast<long long>(r.pushes_accepted),
                static_cast<long long>(r.pushes_stale),
                static_cast<long long>(r.pushes_refused)));
  if (self->state.recoveries > 0)
    say(self, fmt("shard recoveries: %d, steps lost and retrained: %lld",
                  self->state.recoveries,
                  static_cast<long long>(self->state.lost_steps)));
  // The table comes last: scripts read its row from the final line.
  say(self, fmt("%-24s %-6s %7s %6s %8s %7s %8s %11s %9s %8s", "run", "mode",
                "workers", "shards", "steps", "epochs", "seconds",
                "examples/s", "test acc", "restarts"),
      false);
  say(self, fmt("%-24s %-6s %7zu %6d %8lld %7.2f %8.1f %11.1f %9.4f %8d",
                c.name.c_str(), to_string(c.cluster.consistency),
                self->state.workers.size(), c.cluster.shards,
                static_cast<long long>(r.steps), r.epochs, r.seconds,
                r.examples_per_sec, r.test_accuracy, r.restarts),
      false);
}

void finish_run(chief_self self) {
  auto& st = self->state;
  if (st.stopping())
    return;
  st.enter(run_phase::finishing);
  double seconds = now_seconds() - st.t0;
  auto after_checkpoint = [=] {
    evaluate_now(self, [=] {
      auto& s = self->state;
      cluster_summary r;
      r.steps = s.steps;
      r.epochs = epoch_of(self, s.steps);
      r.seconds = seconds;
      r.examples_per_sec = static_cast<double>(s.samples) / seconds;
      r.test_accuracy = s.last_accuracy;
      r.test_loss = s.last_loss;
      r.restarts = s.restarts->total();
      pull_params(self, [=](std::vector<float>& params, int64_t version) {
        auto final_params = std::make_shared<std::vector<float>>(
          std::move(params));
        ask_all_shards<shard_stats>(
          self,
          [=](size_t i) {
            return self->request(self->state.shards[i], timeout_of(self),
                                 stats_atom_v);
          },
          [=](std::vector<shard_stats>& stats) {
            auto summary = r;
            summary.version = version;
            for (auto& x : stats) {
              summary.pushes_accepted += x.accepted;
              summary.pushes_stale += x.stale;
              summary.pushes_refused += x.refused;
            }
            auto shard_stats_copy = std::make_shared<std::vector<shard_stats>>(
              std::move(stats));
            self
              ->request(self->state.feeder, timeout_of(self), stats_atom_v)
              .then(
                [=](feeder_stats& fs) {
                  auto done = summary;
                  // The feeder's count is the authority: a worker that died
                  // may have settled steps it had not reported yet.
                  done.steps = fs.acked;
                  done.epochs = epoch_of(self, fs.acked);
                  done.epoch_samples = std::move(fs.epoch_samples);
                  print_summary(self, done);
                  if (self->state.opts.on_finish)
                    self->state.opts.on_finish(*final_params,
                                               *shard_stats_copy);
                  self->state.enter(run_phase::ended);
                  release_nodes(self, caf::error{}, [=] {
                    self->state.reply.deliver(done);
                    shut_down(self);
                  });
                },
                [=](caf::error& err) { fail_run(self, std::move(err)); });
          });
      });
    });
  };
  if (!st.opts.cfg.training.checkpoint.dir.empty())
    checkpoint_now(self, after_checkpoint);
  else
    after_checkpoint();
}

void restore_after_loss(chief_self self);

/// A node's process is gone (its agent's link broke, or a request to it
/// failed): nothing more is placed there until it registers again.
void node_lost(chief_self self, const std::string& name,
               const std::string& why) {
  auto it = self->state.nodes.find(name);
  if (it == self->state.nodes.end() || !it->second.up)
    return;
  it->second.up = false;
  it->second.agent = node_agent_actor{};
  say(self, fmt("node %s (%s) is down: %s", name.c_str(),
                it->second.address().c_str(), why.c_str()));
}

std::string least_loaded_node(chief_self self) {
  auto& st = self->state;
  std::map<std::string, int> load;
  for (auto& [id, w] : st.workers)
    if (w.state != worker_phase::finished)
      ++load[w.node];
  std::vector<node_slot> slots;
  for (auto& [name, n] : st.nodes)
    slots.push_back({name, n.up, n.planned_workers > 0 || n.joined,
                     load[name]});
  return least_loaded(slots, fallback::any_node);
}

/// Per shard, where a worker on `node` reaches it on the data plane:
/// "host:port" of its node's data server, or empty for a shard in the
/// worker's own process. Every node that can hold a shard (those of the
/// cluster file) runs a data server.
std::vector<std::string> data_links(chief_self self, const std::string& node) {
  auto& st = self->state;
  std::vector<std::string> out;
  for (auto& home : st.shard_node) {
    auto it = st.nodes.find(home);
    if (home == node || it == st.nodes.end() || it->second.data_port == 0)
      out.emplace_back();
    else
      out.push_back(it->second.host + ":"
                    + std::to_string(it->second.data_port));
  }
  return out;
}

std::vector<uint64_t> shard_bounds(chief_self self) {
  std::vector<uint64_t> b;
  for (auto& r : self->state.ranges)
    b.push_back(r.begin);
  b.push_back(self->state.ranges.empty() ? 0 : self->state.ranges.back().end);
  return b;
}

/// Starts worker `id` through the agent of its node, or of another node
/// when its own is down (on_node_loss "move"), or leaves it waiting for
/// its node to come back ("wait").
void place_worker(chief_self self, int32_t id) {
  auto& st = self->state;
  if (st.ended() || st.recovering)
    return;
  auto& w = st.workers[id];
  if (w.handle || w.placing) // running, or being placed
    return;
  auto home = st.nodes.find(w.node);
  std::string node;
  if (home != st.nodes.end() && home->second.up)
    node = w.node;
  else if (st.opts.cfg.cluster.on_node_loss
           == cluster_config::node_loss::wait) {
    w.state = worker_phase::waiting;
    say(self, fmt("worker %d waits for node %s to come back", id,
                  w.node.c_str()));
    return;
  } else
    node = least_loaded_node(self);
  if (node.empty())
    return fail_run(self, make_error(errc::node_unreachable,
                                     fmt("no node is up to run worker %d",
                                         id)));
  if (node != w.node) {
    say(self, fmt("worker %d moves from node %s to node %s", id,
                  w.node.c_str(), node.c_str()));
    w.node = node;
  }
  w.state = worker_phase::starting;
  w.placing = true;
  worker_spawn ws;
  ws.id = id;
  ws.feeder = st.feeder;
  ws.shards = st.shards;
  ws.bounds = shard_bounds(self);
  ws.chief = caf::actor_cast<caf::strong_actor_ptr>(self);
  ws.data_links = data_links(self, node);
  auto gen = st.generation;
  self->request(st.nodes[node].agent, timeout_of(self), place_atom_v,
                std::move(ws))
    .then(
      [=](worker_actor& h) {
        auto& s = self->state;
        s.workers[id].placing = false;
        if (s.ended() || s.generation != gen) {
          self->send_exit(h, caf::exit_reason::user_shutdown);
          return;
        }
        self->monitor(h);
        auto& e = s.workers[id];
        e.handle = h;
        e.state = worker_phase::running;
        s.worker_of[h.address()] = id;
        if (s.nodes[node].leaving) { // it started as its node began to leave
          e.state = worker_phase::leaving;
          self->send(h, finish_atom_v);
        }
      },
      [=](caf::error& err) {
        self->state.workers[id].placing = false;
        node_lost(self, node, "placing worker failed: " + describe(err));
        place_worker(self, id);
      });
}

/// Joins worker ids on every shard; `then` runs once all have answered.
void join_now(chief_self self, std::vector<int32_t> ids,
              std::function<void()> then) {
  auto& st = self->state;
  auto shards = st.shards;
  ask_all<int64_t>(
    ids.size() * shards.size(),
    [=](size_t k) {
      return self->request(shards[k % shards.size()], timeout_of(self),
                           join_atom_v, ids[k / shards.size()]);
    },
    [then = std::move(then)](auto&) { then(); },
    [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// join_now, or after the shard recovery under way (which joins and
/// starts every worker it knows, these included).
void join_on_shards(chief_self self, std::vector<int32_t> ids,
                    std::function<void()> then) {
  if (self->state.recovering)
    return self->state.after_recovery.push_back(
      [=] { join_on_shards(self, ids, then); });
  join_now(self, std::move(ids), std::move(then));
}

int live_workers(chief_self self) {
  int n = 0;
  for (auto& [id, w] : self->state.workers)
    n += w.state != worker_phase::finished;
  return n;
}

/// sync: the pushes per update, replicas_to_aggregate, or with 0 ("all
/// workers") the workers there are now.
int aggregate_now(chief_self self) {
  auto configured = self->state.opts.cfg.cluster.replicas_to_aggregate;
  return configured > 0 ? configured : std::max(1, live_workers(self));
}

/// sync with replicas_to_aggregate 0: the count follows the workers.
void retune_aggregate(chief_self self) {
  auto& c = self->state.opts.cfg.cluster;
  if (c.consistency != cluster_config::mode::sync
      || c.replicas_to_aggregate != 0)
    return;
  auto n = aggregate_now(self);
  say(self, fmt("sync: replicas to aggregate is now %d", n));
  for (auto& s : self->state.shards)
    if (s)
      self->request(s, timeout_of(self), tune_atom_v, std::string{"aggregate"},
                    static_cast<double>(n))
        .then([](bool) {}, [](caf::error&) {});
}

/// Appends `n` fresh worker ids on `node` to `ids`.
void new_worker_ids(chief_self self, const std::string& node, int n,
                    std::vector<int32_t>& ids) {
  auto& st = self->state;
  for (int k = 0; k < n; ++k) {
    auto id = st.next_worker++;
    st.workers[id].node = node;
    ids.push_back(id);
  }
}

std::vector<int32_t> add_workers(chief_self self, const std::string& node,
                                 int n) {
  std::vector<int32_t> ids;
  new_worker_ids(self, node, n, ids);
  say(self, fmt("adding %d worker%s on node %s", n, n == 1 ? "" : "s",
                node.c_str()));
  join_on_shards(self, ids, [=] {
    retune_aggregate(self);
    for (auto id : ids)
      place_worker(self, id);
  });
  return ids;
}

void set_user_pause(chief_self self, bool paused) {
  auto& st = self->state;
  if (st.user_paused == paused)
    return;
  st.user_paused = paused;
  say(self, paused ? "paused by the shell" : "resumed by the shell");
  if (paused)
    self->request(st.feeder, timeout_of(self), pause_atom_v)
      .then([](int64_t) {}, [](caf::error&) {});
  else if (!st.checkpointing && !st.recovering)
    self->send(st.feeder, resume_atom_v);
}

/// When no worker runs or is being started, the ones waiting for their
/// node are let go (nothing is left for them, or the run was stopped),
/// and with no worker left the run finishes.
void release_waiting_if_idle(chief_self self) {
  auto& st = self->state;
  for (auto& [id, w] : st.workers)
    if (w.state == worker_phase::running || w.state == worker_phase::starting
        || w.state == worker_phase::leaving)
      return;
  for (auto& [id, w] : st.workers)
    if (w.state == worker_phase::waiting) {
      say(self, fmt("worker %d: nothing left to train; it no longer waits "
                    "for node %s",
                    id, w.node.c_str()));
      w.state = worker_phase::finished;
      for (auto& s : st.shards)
        if (s)
          self->send(s, leave_atom_v, id);
    }
  finish_run(self);
}

void stop_run(chief_self self, const std::string& who) {
  auto& st = self->state;
  say(self, "stop requested by " + who + "; finishing after the steps in "
            "flight");
  self->send(st.feeder, finish_atom_v);
  if (st.user_paused)
    set_user_pause(self, false);
  // Workers waiting for a node will not come back to end on their own.
  release_waiting_if_idle(self);
}

/// Restarts worker `id` after a failure: counted against the restart
/// intensity, its leases back to the feeder, started again.
void restart_worker(chief_self self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  auto& w = st.workers[id];
  auto why = describe(reason);
  if (!st.restarts->allow(now_seconds()))
    return fail_run(self,
                    make_error(errc::restart_limit,
                               fmt("worker %d failed and the restart limit is "
                                   "reached (%d restarts within %.0f s): %s",
                                   id, st.restarts->max_restarts(),
                                   st.restarts->window(), why.c_str())));
  ++w.restarts;
  w.state = worker_phase::starting;
  say(self, fmt("worker %d failed (%s); restarting it (%d of at most %d "
                "within %.0f s)",
                id, why.c_str(), st.restarts->total(),
                st.restarts->max_restarts(), st.restarts->window()));
  self->request(st.feeder, timeout_of(self), requeue_atom_v, id)
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
  auto it = st.nodes.find(name);
  if (it == st.nodes.end() || !it->second.leaving)
    return;
  for (auto& [id, w] : st.workers)
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
  if (st.recovering) // the recovery rewinds the feeder and starts it
    return;
  self->request(st.feeder, timeout_of(self), requeue_atom_v, id)
    .then([=](int32_t) { place_worker(self, id); },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void on_worker_down(chief_self self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  auto& w = st.workers[id];
  w.handle = worker_actor{};
  bool was_leaving = w.state == worker_phase::leaving;
  if (was_leaving) {
    w.state = worker_phase::starting;
    finish_leave_if_done(self, w.node);
  }
  if (st.recycling.erase(id) > 0) { // stopped for a shard recovery
    if (st.recycling.empty())
      restore_after_loss(self);
    return;
  }
  if (was_leaving) // however it ended, its node sent it away
    return replace_leaving_worker(self, id);
  if ((reason == errc::node_unreachable || reason == errc::actor_down)
      && !st.recovering) {
    w.state = worker_phase::starting;
    say(self, fmt("worker %d lost a shard (%s); waiting %.1f s for the "
                  "chief to see it",
                  id, describe(reason).c_str(),
                  std::chrono::duration<double>(shard_loss_grace(self))
                    .count()));
    self->delayed_send(self, shard_loss_grace(self), place_atom_v, id,
                       st.generation, reason);
    return;
  }
  if (!reason || reason == caf::exit_reason::user_shutdown) {
    w.state = worker_phase::finished;
    // It will push no more: ssp stops waiting for its clock.
    for (auto& s : st.shards)
      self->send(s, leave_atom_v, id);
    // A worker ends normally only once the feeder has nothing left, so
    // workers still waiting for their node have nothing left to train.
    release_waiting_if_idle(self);
    return;
  }
  if (reason == caf::exit_reason::remote_link_unreachable)
    node_lost(self, w.node, describe(reason));
  if (st.recovering) // the recovery starts it again with the others
    return;
  restart_worker(self, id, reason);
}

/// Starts shard `i` on `node` through its agent with `state`.
void place_shard(chief_self self, size_t i, const std::string& node,
                 shard_state_msg state, std::function<void()> then) {
  auto& st = self->state;
  shard_spawn sp;
  sp.id = static_cast<int32_t>(i);
  sp.aggregate = aggregate_now(self);
  sp.state = std::move(state);
  self->request(st.nodes[node].agent, timeout_of(self), place_atom_v,
                std::move(sp))
    .then(
      [=](shard_actor& h) {
        auto& s = self->state;
        self->monitor(h);
        s.shards[i] = h;
        s.shard_node[i] = node;
        s.shard_of[h.address()] = i;
        then();
      },
      [=](caf::error& err) {
        fail_run(self, make_error(errc::actor_down,
                                  fmt("cannot start shard %zu on node %s: %s",
                                      i, node.c_str(),
                                      describe(err).c_str())));
      });
}

/// The node for a shard whose node is gone: the up node meant for shards
/// that holds the fewest, else the chief's own.
std::string shard_home(chief_self self, size_t i) {
  auto& st = self->state;
  if (st.nodes[st.shard_node[i]].up)
    return st.shard_node[i];
  std::map<std::string, int> load;
  for (size_t k = 0; k < st.shards.size(); ++k)
    if (st.shards[k])
      ++load[st.shard_node[k]];
  std::vector<node_slot> slots;
  for (auto& [name, n] : st.nodes)
    slots.push_back({name, n.up, n.planned_shards > 0, load[name]});
  auto best = least_loaded(slots, fallback::meant_only);
  return best.empty() ? st.own_node() : best;
}

/// One shard's slice of a checkpoint.
shard_state_msg slice_of(chief_self self, const checkpoint& ck, size_t i,
                         int64_t version) {
  auto r = self->state.ranges[i];
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
                      path + ": metadata \"shard_version\" is not a "
                             "non-negative integer: \""
                        + it->second + "\"");
  return v;
}

/// Every worker is stopped: restore all shards (the lost ones started
/// anew) from the newest checkpoint, rewind the feeder to its position,
/// start the workers again.
void restore_after_loss(chief_self self) {
  auto& st = self->state;
  // Only this run's own checkpoints: a folder may hold another run's,
  // newer ones included.
  auto found = load_newest(st.opts.cfg.training.checkpoint.dir, stamp_of(self),
                           checkpoint_pick::this_run,
                           st.evaluator->layout());
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
  auto position = shared->step;
  auto left = std::make_shared<size_t>(st.shards.size());
  auto all_restored = [=] {
    auto& s = self->state;
    std::vector<int32_t> ids;
    for (auto& [id, w] : s.workers)
      if (w.state != worker_phase::finished)
        ids.push_back(id);
    join_now(self, ids, [=] {
      self->request(self->state.feeder, timeout_of(self), restore_atom_v,
                    position)
        .then(
          [=](int64_t) {
            auto& s2 = self->state;
            auto lost = std::max<int64_t>(0, s2.steps - position);
            s2.lost_steps += lost;
            s2.steps = position;
            s2.last_eval_step = -1;
            say(self, fmt("shards restored from %s at step %lld; %lld steps "
                          "lost, to be trained again",
                          path.c_str(), static_cast<long long>(position),
                          static_cast<long long>(lost)));
            if (!s2.user_paused)
              self->send(s2.feeder, resume_atom_v);
            s2.recovering = false;
            for (auto id : ids)
              place_worker(self, id);
            auto later = std::move(s2.after_recovery);
            s2.after_recovery.clear();
            for (auto& f : later)
              f();
          },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
    });
  };
  for (size_t i = 0; i < st.shards.size(); ++i) {
    auto state = slice_of(self, *shared, i, *version);
    auto one_done = [=] {
      if (--*left == 0)
        all_restored();
    };
    if (st.shards[i]) {
      self->request(st.shards[i], timeout_of(self), restore_atom_v,
                    std::move(state))
        .then([=](int64_t) { one_done(); },
              [=](caf::error& err) { fail_run(self, std::move(err)); });
    } else {
      auto node = shard_home(self, i);
      say(self, fmt("starting shard %zu on node %s", i, node.c_str()));
      place_shard(self, i, node, std::move(state), one_done);
    }
  }
}

/// A shard went down: stop every worker, then restore_after_loss.
void on_shard_down(chief_self self, size_t i, const caf::error& reason) {
  auto& st = self->state;
  auto why = describe(reason);
  auto node = st.shard_node[i];
  st.shard_of.erase(st.shards[i].address());
  st.shards[i] = shard_actor{};
  if (reason == caf::exit_reason::remote_link_unreachable)
    node_lost(self, node, why);
  if (st.opts.cfg.training.checkpoint.dir.empty())
    return fail_run(self, make_error(errc::actor_down,
                                     fmt("shard %zu on node %s stopped (%s) "
                                         "and the run has no checkpoint dir "
                                         "to restore it from",
                                         i, node.c_str(), why.c_str())));
  say(self, fmt("shard %zu on node %s stopped (%s); restoring the shards "
                "from the newest checkpoint",
                i, node.c_str(), why.c_str()));
  if (st.recovering) // the recovery under way restarts it too
    return;
  st.recovering = true;
  ++st.generation;
  ++st.recoveries;
  for (auto& [id, w] : st.workers)
    if (w.handle) {
      st.recycling.insert(id);
      self->send_exit(w.handle, caf::exit_reason::user_shutdown);
    }
  if (st.recycling.empty())
    restore_after_loss(self);
}

void on_report(chief_self self, const worker_report& r) {
  auto& st = self->state;
  if (st.ended())
    return;
  if (!std::isfinite(r.loss_sum))
    return fail_run(self, make_error(errc::non_finite,
                                     fmt("the loss turned %s at step %lld "
                                         "(worker %d); stopping the run",
                                         std::isnan(r.loss_sum) ? "NaN" : "Inf",
                                         static_cast<long long>(st.steps),
                                         r.worker)));
  // A report covers a few steps: log when a multiple of log_every_steps
  // is crossed.
  auto crossed = [&](int64_t before, int64_t after) {
    return st.schedule->log_due(before, after);
  };
  st.steps += r.steps;
  st.samples += r.samples;
  st.window_samples += r.samples;
  st.window_loss += r.loss_sum;
  auto& w = st.workers[r.worker];
  w.steps += r.steps;
  w.samples += r.samples;
  w.clock = r.clock;
  w.staleness = r.staleness;
  w.seconds += r.step_seconds;
  w.last_loss = r.samples > 0 ? r.loss_sum / r.samples : w.last_loss;
  w.window_steps += r.steps;
  w.window_samples += r.samples;
  w.window_loss += r.loss_sum;
  w.window_seconds += r.step_seconds;
  if (crossed(w.steps - r.steps, w.steps)) {
    say(self, fmt("worker %d: step %lld, loss = %.4f (%.1f examples/sec; "
                  "%.4f sec/batch)",
                  r.worker, static_cast<long long>(w.steps),
                  w.window_loss / static_cast<double>(w.window_samples),
                  static_cast<double>(w.window_samples) / w.window_seconds,
                  w.window_seconds / static_cast<double>(w.window_steps)));
    w.window_steps = w.window_samples = 0;
    w.window_loss = w.window_seconds = 0;
  }
  if (crossed(st.steps - r.steps, st.steps)) {
    double now = now_seconds();
    double rate = static_cast<double>(st.window_samples)
                  / (now - st.window_start);
    double loss = st.window_loss / static_cast<double>(st.window_samples);
    std::string acc = st.last_accuracy < 0
                        ? std::string{"-"}
                        : fmt("%.4f", st.last_accuracy);
    say(self, fmt("step %lld, epoch %.2f, loss = %.4f, %.1f examples/sec, "
                  "%d workers, test accuracy = %s",
                  static_cast<long long>(st.steps), epoch_of(self, st.steps),
                  loss, rate, live_workers(self),
                  acc.c_str()));
    st.metrics.progress(now - st.t0, st.steps, epoch_of(self, st.steps), loss,
                        rate);
    st.window_samples = 0;
    st.window_loss = 0;
    st.window_start = now;
  }
  if (st.stopping())
    return;
  if (!st.evaluating && st.schedule->take_eval(st.steps)) {
    evaluate_now(self, [=] {
      auto& s = self->state;
      auto target = s.opts.cfg.cluster.target_accuracy;
      if (target > 0 && s.last_accuracy >= target && !s.stopping()) {
        say(self, fmt("target accuracy %.4f reached; finishing", target));
        self->send(s.feeder, finish_atom_v);
      }
    });
  }
  if (!st.checkpointing && !st.opts.cfg.training.checkpoint.dir.empty()
      && st.schedule->take_checkpoint(st.steps))
    checkpoint_now(self, [] {});
}

/// Joins every worker id on every shard, then starts the workers where
/// the placement puts them.
void start_workers(chief_self self) {
  auto& st = self->state;
  std::vector<int32_t> ids;
  if (st.opts.cfg.cluster.distributed()) {
    for (auto& n : st.opts.cfg.cluster.nodes) // ids in file order
      new_worker_ids(self, n.name, n.workers, ids);
    for (auto& [name, n] : st.nodes) // joined before the start
      if (n.joined)
        new_worker_ids(self, name, n.planned_workers, ids);
  } else {
    new_worker_ids(self, st.own_node(), st.opts.cfg.cluster.workers, ids);
  }
  join_on_shards(self, ids, [=] {
    auto& s = self->state;
    s.enter(run_phase::training);
    s.t0 = now_seconds();
    s.window_start = s.t0;
    retune_aggregate(self);
    for (auto id : ids)
      place_worker(self, id);
  });
}

/// Shards (through the agents, resumed ones with their state), the
/// feeder's resumed position, then workers.
void start_shards(chief_self self) {
  auto& st = self->state;
  const auto& cfg = st.opts.cfg;
  std::vector<std::string> homes;
  if (cfg.cluster.distributed()) {
    for (auto& n : cfg.cluster.nodes)
      for (int k = 0; k < n.shards; ++k)
        homes.push_back(n.name);
  } else {
    homes.assign(st.ranges.size(), st.own_node());
  }
  st.shards.assign(st.ranges.size(), shard_actor{});
  st.shard_node = homes;
  auto left = std::make_shared<size_t>(st.ranges.size());
  for (size_t i = 0; i < st.ranges.size(); ++i) {
    // Resuming, a shard starts with its part of the checkpoint (values,
    // optimizer state, version); otherwise with the initial values.
    shard_state_msg s;
    if (st.resume_from) {
      s = slice_of(self, *st.resume_from, i, st.initial_version);
    } else {
      s.shard = static_cast<int32_t>(i);
      s.values = slice_of(st.initial, st.ranges[i]);
    }
    place_shard(self, i, homes[i], std::move(s), [=] {
      if (--*left > 0)
        return;
      auto& s2 = self->state;
      if (!s2.resume_from)
        return s2.opts.cfg.cluster.distributed()
                   && !s2.opts.cfg.training.checkpoint.dir.empty()
                 // A checkpoint to restore a lost shard from, before any
                 // step is trained.
                 ? checkpoint_now(self, [=] { start_workers(self); })
                 : start_workers(self);
      auto position = s2.resume_from->step;
      s2.resume_from = nullptr;
      s2.steps = position;
      s2.schedule->resume_at(position);
      self->request(s2.feeder, timeout_of(self), restore_atom_v, position)
        .then([=](int64_t) { start_workers(self); },
              [=](caf::error& err) { fail_run(self, std::move(err)); });
    });
  }
}

/// The nodes that have not registered yet, as "name (host:port)".
std::string missing_nodes(chief_self self) {
  std::string out;
  for (auto& [name, n] : self->state.nodes)
    if (!n.up && !n.joined)
      out += (out.empty() ? "" : ", ") + name + " (" + n.address() + ")";
  return out;
}

/// The most updates any live shard on the up nodes has applied (-1: no
/// shard lives on them), for `then`.
void newest_live_version(chief_self self, std::function<void(int64_t)> then) {
  std::vector<node_agent_actor> agents;
  for (auto& [name, n] : self->state.nodes)
    if (n.up && n.agent && name != self->state.own_node())
      agents.push_back(n.agent);
  ask_all_settled<std::vector<shard_stats>>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i], timeout_of(self), stats_atom_v);
    },
    [then = std::move(then)](auto& replies) {
      int64_t newest = -1;
      for (auto& r : replies)
        if (r)
          for (auto& x : *r)
            newest = std::max(newest, x.version);
      then(newest);
    });
}

/// The nodes named the run of a chief that was lost: this chief goes on
/// with it from its newest checkpoint (every shard and the feeder
/// restored to one step) and says how many steps that loses, from how far
/// the nodes' live shards had got.
void adopt_run(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  const auto& ckpt = st.opts.cfg.training.checkpoint;
  int64_t ckpt_version = 0;
  if (!ckpt.dir.empty()) {
    auto found = load_newest(ckpt.dir, stamp_of(self),
                             checkpoint_pick::this_run,
                             st.evaluator->layout());
    if (!found)
      return fail_run(self, found.error());
    if (*found) {
      auto version = version_of((*found)->ckpt, (*found)->path);
      if (!version)
        return fail_run(self, version.error());
      ckpt_version = st.initial_version = *version;
      st.adopted_from_step = (*found)->ckpt.step;
      say(self, fmt("taking over run %s from its checkpoint %s at step %lld",
                    st.run_id.c_str(), (*found)->path.c_str(),
                    static_cast<long long>(st.adopted_from_step)));
      st.resume_from = std::make_shared<checkpoint>(std::move((*found)->ckpt));
      st.fresh_dir_error = caf::error{};
    }
  }
  if (!st.resume_from) {
    if (st.fresh_dir_error)
      return fail_run(self, std::move(st.fresh_dir_error));
    say(self, fmt("taking over run %s: it has no checkpoint, so it starts "
                  "again from step 0",
                  st.run_id.c_str()));
    st.adopted_from_step = 0;
  }
  newest_live_version(self, [=](int64_t live) {
    auto& s = self->state;
    if (live < 0) {
      say(self, "the run's shards died with its chief: the steps since the "
                "checkpoint are lost (at most checkpoint.every_steps) and "
                "trained again");
    } else {
      // async and ssp apply one push per step; a sync update aggregates
      // a push of every replica.
      auto& c = s.opts.cfg.cluster;
      int64_t per_update = c.consistency == cluster_config::mode::sync
                             ? std::max(1, c.replicas_to_aggregate > 0
                                             ? c.replicas_to_aggregate
                                             : c.workers)
                             : 1;
      s.adoption_lost_steps = std::max<int64_t>(0, live - ckpt_version)
                              * per_update;
      s.lost_steps += s.adoption_lost_steps;
      say(self, fmt("the live shards were at update %lld, the checkpoint at "
                    "%lld: %lld steps lost, to be trained again",
                    static_cast<long long>(live),
                    static_cast<long long>(ckpt_version),
                    static_cast<long long>(s.adoption_lost_steps)));
    }
    then();
  });
}

/// Once every node of the file is up: the shards (after taking over the
/// run the nodes named, if they named one).
void start_when_nodes_ready(chief_self self) {
  auto& st = self->state;
  if (st.nodes_ready() || st.ended() || !missing_nodes(self).empty())
    return;
  st.enter(run_phase::starting);
  if (st.opts.cfg.cluster.distributed())
    say(self, fmt("all %zu nodes are up", st.nodes.size()));
  if (!st.adopted_run.empty())
    return adopt_run(self, [=] { start_shards(self); });
  if (st.fresh_dir_error)
    return fail_run(self, std::move(st.fresh_dir_error));
  start_shards(self);
}

/// Reads the newest checkpoint when resuming; sets up the nodes.
void start(chief_self self) {
  auto& st = self->state;
  const auto& cfg = st.opts.cfg;
  say(self, "identity: run " + st.run_id + ", config digest " + st.digest);
  const auto& train = st.opts.data->train;
  st.backend = make_cpu_backend(cfg.training.threads);
  auto m = make_model(cfg.model, train.height, train.width, train.channels,
                      train.classes, *st.backend);
  if (!m)
    return fail_run(self, m.error());
  st.evaluator = std::move(*m);
  auto split = st.evaluator->layout().split(
    static_cast<size_t>(cfg.cluster.shards));
  if (!split)
    return fail_run(self, split.error());
  st.ranges = *split;
  st.per_epoch = steps_per_epoch(train.count, cfg.training.batch_size);
  st.restarts = std::make_unique<restart_limit>(cfg.cluster.max_restarts,
                                                cfg.cluster.restart_window_s);
  if (!cfg.cluster.metrics_dir.empty())
    if (auto err = st.metrics.open(cfg.cluster.metrics_dir, cfg.name))
      return fail_run(self, std::move(err));
  // Resume: the newest checkpoint's parameters, optimizer state, shard
  // version and feeder position.
  if (cfg.training.checkpoint.resume) {
    auto found = load_newest(cfg.training.checkpoint.dir, stamp_of(self),
                             checkpoint_pick::compatible,
                             st.evaluator->layout());
    if (!found)
      return fail_run(self, found.error());
    if (*found) {
      auto path = (*found)->path;
      auto ck = caf::expected<checkpoint>{std::move((*found)->ckpt)};
      // The run goes on under its own id.
      if (auto it = ck->metadata.find("run_id");
          it != ck->metadata.end() && !it->second.empty())
        st.run_id = it->second;
      auto version = version_of(*ck, path);
      if (!version)
        return fail_run(self, version.error());
      st.initial_version = *version;
      say(self, fmt("resuming from %s at step %lld (run %s)", path.c_str(),
                    static_cast<long long>(ck->step), st.run_id.c_str()));
      st.resume_from = std::make_shared<checkpoint>(std::move(*ck));
    }
  }
  // Decided once the nodes are up: they may name a run that this chief
  // takes over (its files are then this run's own).
  if (!cfg.training.checkpoint.dir.empty() && !cfg.training.checkpoint.resume)
    st.fresh_dir_error = check_fresh_dir(cfg.training.checkpoint.dir,
                                         stamp_of(self));
  if (!st.resume_from)
    st.initial = st.evaluator->initial_params();
  feeder_options fo;
  fo.samples = static_cast<size_t>(train.count);
  fo.batch = cfg.training.batch_size;
  fo.seed = cfg.training.seed;
  fo.epochs = cfg.training.epochs;
  fo.max_batches = cfg.training.max_steps;
  fo.hold = hold_time(cfg);
  st.feeder = self->spawn<caf::monitored>(feeder_impl, fo);
  st.schedule = std::make_unique<run_schedule>(
    st.per_epoch, cfg.training.eval_every_steps,
    cfg.training.checkpoint.every_steps, cfg.training.log_every_steps);
  // This process's own agent; in a cluster the other nodes register.
  agent_options ao;
  ao.node = st.own_node();
  ao.cfg = cfg;
  ao.data = st.opts.data;
  ao.fault_hook = st.opts.fault_hook;
  ao.data_plane = st.opts.data_plane;
  auto local = self->spawn(node_agent_impl, std::move(ao));
  if (cfg.cluster.distributed()) {
    for (auto& n : cfg.cluster.nodes) {
      auto& e = st.nodes[n.name];
      e.host = n.host;
      e.port = n.port;
      e.planned_shards = n.shards;
      e.planned_workers = n.workers;
    }
    self->delayed_send(self,
                       std::chrono::duration_cast<caf::timespan>(
                         std::chrono::duration<double>(
                           cfg.cluster.node_timeout_s)),
                       deadline_atom_v);
  } else {
    auto& e = st.nodes[st.own_node()];
    e.planned_shards = cfg.cluster.shards;
    e.planned_workers = cfg.cluster.workers;
  }
  auto& me = st.nodes[st.own_node()];
  me.agent = local;
  me.up = true;
  me.data_port = st.opts.data_plane ? st.opts.data_plane->port() : 0;
  start_when_nodes_ready(self);
}

/// A node process announces itself (see chief_actor).
/// Why a registration's own fields are out of bounds, or "": whatever a
/// peer sends is bounded before anything is allocated for it.
std::string check_registration(const std::string& name,
                               const std::string& host,
                               int32_t join_workers,
                               const std::string& identity) {
  if (name.size() > max_node_name)
    return "a node name of " + std::to_string(name.size())
           + " characters (at most " + std::to_string(max_node_name) + ")";
  for (char c : name)
    if (c <= ' ' || c > '~')
      return "a node name with a space or a control character";
  if (host.empty() || host.size() > 255)
    return "a host of " + std::to_string(host.size()) + " characters";
  if (join_workers > max_join_workers)
    return "a join with " + std::to_string(join_workers)
           + " workers (at most " + std::to_string(max_join_workers)
           + " at once)";
  if (join_workers < -1)
    return "a join with " + std::to_string(join_workers) + " workers";
  if (identity.size() > max_identity_bytes)
    return "a config identity of " + std::to_string(identity.size())
           + " bytes";
  return {};
}

caf::result<std::string, std::string>
on_register(chief_self self, std::string name, const std::string& host,
            uint16_t port, node_agent_actor agent, int32_t join_workers,
            uint16_t data_port, const std::string& identity,
            const std::string& served_run) {
  auto& st = self->state;
  if (st.ended() || st.stopping())
    return make_error(errc::invalid_argument, "the run is ending");
  if (!st.opts.cfg.cluster.distributed())
    return make_error(errc::invalid_argument,
                      "this chief runs an embedded cluster; it takes no nodes");
  if (auto why = check_registration(name, host, join_workers, identity);
      why.empty() && served_run.size() > 64)
    return make_error(errc::invalid_argument,
                      "refused: a run id of " + std::to_string(served_run.size())
                        + " characters");
  else if (!why.empty())
    return make_error(errc::invalid_argument, "refused: " + why);
  if (join_workers > 0 && st.workers.size() + join_workers > max_workers)
    return make_error(errc::invalid_argument,
                      "refused: the cluster would have more than "
                        + std::to_string(max_workers) + " workers");
  if (join_workers < 0) {
    auto it = st.nodes.find(name);
    if (it == st.nodes.end() || it->second.joined)
      return make_error(errc::invalid_config,
                        "unknown node \"" + name + "\" (the cluster file's "
                        "nodes are: " + st.opts.cfg.cluster.node_names()
                          + ")");
    if (name == st.opts.cfg.cluster.chief_node)
      return make_error(errc::invalid_config,
                        "node \"" + name + "\" is the chief's own node");
    if (it->second.up)
      return make_error(errc::invalid_argument,
                        "node \"" + name + "\" is already up");
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
      name = "joined-" + std::to_string(st.nodes.size());
    if (st.nodes.count(name) > 0 && st.nodes[name].up)
      return make_error(errc::invalid_argument,
                        "a node named \"" + name + "\" is already up");
    auto& e = st.nodes[name];
    e.joined = true;
    e.planned_workers = join_workers;
  }
  // A node that served another run whose chief was lost: before the
  // shards start, this chief takes that run over (adopt_run).
  if (!st.nodes_ready() && !served_run.empty() && served_run != st.run_id
      && st.adopted_run.empty()) {
    st.adopted_run = st.run_id = served_run;
    say(self, "node " + name + " served run " + served_run
                + ", whose chief was lost: this chief takes it over");
  }
  auto& e = st.nodes[name];
  e.host = host;
  e.port = port;
  e.data_port = data_port;
  e.agent = agent;
  e.up = true;
  self->monitor(agent);
  st.agent_of[agent.address()] = name;
  say(self, fmt("node %s (%s) is up%s", name.c_str(), e.address().c_str(),
                join_workers >= 0
                  ? fmt(", joining with %d workers", join_workers).c_str()
                  : ""));
  if (!st.nodes_ready()) {
    start_when_nodes_ready(self);
    return {name, st.run_id};
  }
  // A node back after a crash: its waiting workers start there again.
  for (auto& [id, w] : st.workers)
    if (w.state == worker_phase::waiting && w.node == name)
      place_worker(self, id);
  if (join_workers > 0 && st.training())
    add_workers(self, name, join_workers);
  return {name, st.run_id};
}

/// SIGINT or SIGTERM on the chief's process: the shell's "stop"; before
/// training began, the run ends without training.
void on_stop_request(chief_self self, const std::string& who) {
  auto& st = self->state;
  if (st.ended() || st.stopping())
    return;
  if (!st.training())
    return fail_run(self, make_error(errc::stopped,
                                     "stopped by " + who
                                       + " before training began"));
  stop_run(self, who);
}

/// A member node leaves the run (SIGINT/SIGTERM there): nothing more is
/// placed on it, its workers finish their steps in flight, their leases
/// go back and they start again elsewhere (on_node_loss "move") or wait
/// for the node ("wait"). A node that holds shards cannot leave: its
/// shards would have nowhere to go without losing steps.
caf::result<bool> on_leave(chief_self self, const std::string& name) {
  auto& st = self->state;
  auto it = st.nodes.find(name);
  if (it == st.nodes.end() || !it->second.up)
    return make_error(errc::invalid_argument,
                      "node "" + name + "" is not up in this run");
  if (name == st.own_node())
    return make_error(errc::invalid_argument,
                      "the chief's own node cannot leave; stop the run");
  if (st.ended() || st.stopping()) // the run releases every node soon
    return true;
  std::string held;
  for (size_t i = 0; i < st.shard_node.size(); ++i)
    if (st.shard_node[i] == name)
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
  for (auto& [id, w] : st.workers)
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

} // namespace chief_ops

using namespace chief_ops;

chief_actor::behavior_type
chief_impl(chief_actor::stateful_pointer<chief_state> self,
           chief_options opts) {
  self->state.opts = std::move(opts);
  {
    auto& st = self->state;
    st.run_id = st.opts.run_id.empty() ? new_run_id() : st.opts.run_id;
    st.identity = training_identity(st.opts.cfg);
    st.digest = identity_digest(st.identity);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.ended())
      return;
    if (auto it = st.worker_of.find(dm.source); it != st.worker_of.end()) {
      auto id = it->second;
      st.worker_of.erase(it);
      return on_worker_down(self, id, dm.reason);
    }
    if (auto it = st.agent_of.find(dm.source); it != st.agent_of.end()) {
      auto name = it->second;
      st.agent_of.erase(it);
      return node_lost(self, name, describe(dm.reason));
    }
    if (auto it = st.shard_of.find(dm.source); it != st.shard_of.end())
      return on_shard_down(self, it->second, dm.reason);
    fail_run(self, make_error(errc::actor_down,
                              "the feeder stopped: " + describe(dm.reason)));
  });
  return {
    [=](run_atom) -> caf::result<cluster_summary> {
      self->state.reply = self->make_response_promise<cluster_summary>();
      start(self);
      return self->state.reply;
    },
    [=](report_atom, const worker_report& r) { on_report(self, r); },
    [=](register_atom) -> std::string { return self->state.opts.config_text; },
    [=](register_atom, std::string& name, std::string& host, uint16_t port,
        node_agent_actor& agent, int32_t join_workers, uint16_t data_port,
        const std::string& identity, const std::string& served_run) {
      return on_register(self, std::move(name), host, port, std::move(agent),
                         join_workers, data_port, identity, served_run);
    },
    [=](deadline_atom) {
      auto& st = self->state;
      if (st.nodes_ready() || st.ended())
        return;
      fail_run(self,
               make_error(errc::node_unreachable,
                          fmt("these nodes did not come up within %.0f s: %s",
                              st.opts.cfg.cluster.node_timeout_s,
                              missing_nodes(self).c_str())));
    },
    [=](stop_atom, const std::string& who) { on_stop_request(self, who); },
    [=](leave_atom, const std::string& node) -> caf::result<bool> {
      return on_leave(self, node);
    },
    [=](shell_atom, const std::string& line) {
      return shell_command(self, line);
    },
    [=](place_atom, int32_t id, int64_t generation, caf::error& reason) {
      // The grace after a lost data-plane connection is over: a recovery
      // since then has started the worker again; else it failed.
      auto& st = self->state;
      auto it = st.workers.find(id);
      if (st.ended() || st.recovering || st.generation != generation
          || it == st.workers.end() || it->second.handle
          || it->second.placing)
        return;
      restart_worker(self, id, reason);
    },
  };
}

caf::expected<cluster_summary>
run_cluster(caf::actor_system& sys, chief_options opts,
            const std::function<void(const chief_actor&)>& started) {
  auto cluster = opts.cfg.cluster;
  auto chief = sys.spawn(chief_impl, std::move(opts));
  if (started)
    started(chief);
  if (cluster.distributed()) {
    auto& me = *cluster.node(cluster.chief_node);
    auto port = publish_on(sys, chief, me.host, me.port);
    if (!port) {
      caf::anon_send_exit(chief, caf::exit_reason::user_shutdown);
      return port.error();
    }
  }
  caf::scoped_actor self{sys};
  caf::expected<cluster_summary> result{caf::sec::bad_function_call};
  // No timeout: a run may take hours, and the chief answers on every path
  // (each of its own requests has one).
  self->request(chief, caf::infinite, run_atom_v)
    .receive([&](cluster_summary& r) { result = r; },
             [&](caf::error& err) { result = std::move(err); });
  if (cluster.distributed())
    sys.middleman().unpublish(chief);
  return result;
}

} // namespace troupe

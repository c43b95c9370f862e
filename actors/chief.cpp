#include "actors/chief.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sys/stat.h>

#include "actors/feeder.hpp"
#include "actors/shard.hpp"
#include "actors/timing.hpp"
#include "actors/worker.hpp"
#include "models/model.hpp"
#include "models/trainer.hpp"
#include "runtime/checkpoint.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/errc.hpp"
#include "runtime/metrics_log.hpp"
#include "runtime/restart_limit.hpp"

namespace troupe {

struct chief_state {
  static inline const char* name = "chief";
  struct worker_progress {
    int64_t steps = 0, samples = 0;
    double loss_sum = 0, seconds = 0;
    int64_t window_steps = 0; ///< steps since the last log line
  };
  chief_options opts;
  std::unique_ptr<compute_backend> backend;
  std::unique_ptr<model> evaluator;
  std::vector<flat_range> ranges;
  std::vector<shard_actor> shards;
  feeder_actor feeder;
  std::map<int32_t, worker_actor> workers;
  std::map<caf::actor_addr, int32_t> worker_of;
  std::set<int32_t> finished;
  std::unique_ptr<restart_limit> restarts;
  caf::typed_response_promise<cluster_summary> reply;
  metrics_log metrics;
  double t0 = 0;
  int64_t steps = 0;         ///< batches trained (reports), resumed included
  int64_t per_epoch = 1;
  int64_t next_eval = 0, next_checkpoint = 0;
  // The progress window since the last log line.
  int64_t window_samples = 0, window_count = 0;
  double window_loss = 0, window_start = 0;
  std::map<int32_t, worker_progress> per_worker;
  double last_accuracy = -1, last_loss = 0;
  int64_t last_eval_step = -1; ///< steps when the last evaluation began
  std::vector<std::function<void()>> eval_waiters;
  std::vector<std::function<void()>> checkpoint_waiters;
  int64_t samples = 0;
  bool checkpointing = false, evaluating = false, stopping = false;
  bool ended = false;
};

namespace {

using self_ptr = chief_actor::stateful_pointer<chief_state>;

caf::timespan timeout_of(self_ptr self) {
  return request_timeout(self->state.opts.cfg);
}

void say(self_ptr self, const std::string& line) {
  if (self->state.opts.log != nullptr)
    *self->state.opts.log << line << std::endl;
}

std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

double epoch_of(self_ptr self, int64_t steps) {
  return static_cast<double>(steps)
         / static_cast<double>(self->state.per_epoch);
}

/// Stops every actor of the run, then the chief.
void shut_down(self_ptr self) {
  auto& st = self->state;
  for (auto& [id, w] : st.workers)
    self->send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& s : st.shards)
    self->send_exit(s, caf::exit_reason::user_shutdown);
  if (st.feeder)
    self->send_exit(st.feeder, caf::exit_reason::user_shutdown);
  self->quit();
}

void fail_run(self_ptr self, caf::error err) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = true;
  say(self, "error: " + describe(err));
  st.reply.deliver(std::move(err));
  shut_down(self);
}

/// Requests `make(i)` from every shard; `done` gets the replies in shard
/// order once all are in; any error fails the run.
template <class Reply, class Make>
void ask_all_shards(self_ptr self, Make make,
                    std::function<void(std::vector<Reply>&)> done) {
  auto n = self->state.shards.size();
  auto replies = std::make_shared<std::vector<Reply>>(n);
  auto left = std::make_shared<size_t>(n);
  for (size_t i = 0; i < n; ++i)
    make(i).then(
      [=](Reply& r) {
        (*replies)[i] = std::move(r);
        if (--*left == 0)
          done(*replies);
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// Pulls every shard (as worker -1) into one host vector.
void pull_params(self_ptr self,
                 std::function<void(std::vector<float>&, int64_t)> done) {
  ask_all_shards<float_block>(
    self,
    [=](size_t i) {
      return self->request(self->state.shards[i], timeout_of(self),
                           pull_atom_v, int32_t{-1}, int64_t{0});
    },
    [=](std::vector<float_block>& blocks) {
      auto& st = self->state;
      std::vector<float> all(st.evaluator->layout().total());
      for (size_t i = 0; i < blocks.size(); ++i)
        std::copy(blocks[i].values->begin(), blocks[i].values->end(),
                  all.begin() + static_cast<std::ptrdiff_t>(st.ranges[i].begin));
      done(all, blocks.empty() ? 0 : blocks[0].version);
    });
}

/// Evaluates the current parameters on the test set, then runs `then`.
/// One evaluation at a time: a request during one waits for it and then
/// evaluates again unless no step has been trained since it began (every
/// push of a reported step is applied before its report is sent, so an
/// evaluation begun at step N sees all N steps).
void evaluate_now(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (st.evaluating) {
    st.eval_waiters.push_back(std::move(then));
    return;
  }
  if (st.last_eval_step == st.steps)
    return then();
  st.evaluating = true;
  st.last_eval_step = st.steps;
  pull_params(self, [=](std::vector<float>& params, int64_t) {
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
  });
}

/// Pauses the feeder until every lease is acked, snapshots every shard at
/// that one step, writes the file, resumes.
void checkpoint_now(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (st.checkpointing) { // one at a time; e.g. the final one waits
    st.checkpoint_waiters.push_back(
      [=] { checkpoint_now(self, then); });
    return;
  }
  st.checkpointing = true;
  self->request(st.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](int64_t position) {
        ask_all_shards<shard_state_msg>(
          self,
          [=](size_t i) {
            return self->request(self->state.shards[i], timeout_of(self),
                                 snapshot_atom_v);
          },
          [=](std::vector<shard_state_msg>& parts) {
            auto& s = self->state;
            checkpoint ckpt;
            ckpt.step = position;
            ckpt.layout = s.evaluator->layout();
            ckpt.params.resize(ckpt.layout.total());
            for (size_t n = 0; n < parts[0].slot_names.size(); ++n)
              ckpt.slots.emplace_back(parts[0].slot_names[n],
                                      std::vector<float>(ckpt.layout.total()));
            for (size_t i = 0; i < parts.size(); ++i) {
              auto off = static_cast<std::ptrdiff_t>(s.ranges[i].begin);
              std::copy(parts[i].values.begin(), parts[i].values.end(),
                        ckpt.params.begin() + off);
              for (size_t n = 0; n < parts[i].slots.size(); ++n)
                std::copy(parts[i].slots[n].begin(), parts[i].slots[n].end(),
                          ckpt.slots[n].second.begin() + off);
            }
            ckpt.metadata["optimizer"]
              = to_string(s.opts.cfg.training.optimizer.type);
            ckpt.metadata["model"] = s.evaluator->summary();
            ckpt.metadata["mode"] = to_string(s.opts.cfg.cluster.consistency);
            ckpt.metadata["shard_version"] = std::to_string(parts[0].version);
            auto& dir = s.opts.cfg.training.checkpoint.dir;
            ::mkdir(dir.c_str(), 0755);
            auto path = dir + "/ckpt-" + std::to_string(position)
                        + ".safetensors";
            if (auto err = write_checkpoint(path, ckpt))
              return fail_run(self, std::move(err));
            say(self, fmt("step %lld: checkpoint %s",
                          static_cast<long long>(position), path.c_str()));
            self->send(s.feeder, resume_atom_v);
            s.checkpointing = false;
            then();
            auto waiters = std::move(self->state.checkpoint_waiters);
            self->state.checkpoint_waiters.clear();
            for (auto& f : waiters)
              f();
          });
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void print_summary(self_ptr self, const cluster_summary& r) {
  auto& c = self->state.opts.cfg;
  say(self, fmt("%-24s %-6s %7s %6s %8s %7s %8s %11s %9s %8s", "run", "mode",
                "workers", "shards", "steps", "epochs", "seconds",
                "examples/s", "test acc", "restarts"));
  say(self, fmt("%-24s %-6s %7d %6d %8lld %7.2f %8.1f %11.1f %9.4f %8d",
                c.name.c_str(), to_string(c.cluster.consistency),
                c.cluster.workers, c.cluster.shards,
                static_cast<long long>(r.steps), r.epochs, r.seconds,
                r.examples_per_sec, r.test_accuracy, r.restarts));
}

void finish_run(self_ptr self) {
  auto& st = self->state;
  if (st.stopping)
    return;
  st.stopping = true;
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
                  self->state.ended = true;
                  self->state.reply.deliver(done);
                  shut_down(self);
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

void spawn_worker(self_ptr self, int32_t id) {
  auto& st = self->state;
  worker_options w;
  w.id = id;
  w.cfg = st.opts.cfg;
  w.data = st.opts.data;
  w.feeder = st.feeder;
  w.shards = st.shards;
  w.ranges = st.ranges;
  w.chief = caf::actor_cast<chief_actor>(self);
  w.fault_hook = st.opts.fault_hook;
  auto h = self->spawn<caf::monitored>(worker_impl, std::move(w));
  st.workers[id] = h;
  st.worker_of[h.address()] = id;
}

void on_worker_down(self_ptr self, int32_t id, const caf::error& reason) {
  auto& st = self->state;
  if (!reason || reason == caf::exit_reason::user_shutdown) {
    st.finished.insert(id);
    // It will push no more: ssp stops waiting for its clock.
    for (auto& s : st.shards)
      self->send(s, leave_atom_v, id);
    if (st.finished.size() == st.workers.size())
      finish_run(self);
    return;
  }
  auto why = describe(reason);
  if (!st.restarts->allow(now_seconds()))
    return fail_run(self,
                    make_error(errc::restart_limit,
                               fmt("worker %d failed and the restart limit is "
                                   "reached (%d restarts within %.0f s): %s",
                                   id, st.restarts->max_restarts(),
                                   st.restarts->window(), why.c_str())));
  say(self, fmt("worker %d failed (%s); restarting it (%d of at most %d "
                "within %.0f s)",
                id, why.c_str(), st.restarts->total(),
                st.restarts->max_restarts(), st.restarts->window()));
  self->request(st.feeder, timeout_of(self), requeue_atom_v, id)
    .then([=](int32_t) { spawn_worker(self, id); },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

void on_report(self_ptr self, const worker_report& r) {
  auto& st = self->state;
  if (st.ended)
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
  auto every = st.opts.cfg.training.log_every_steps;
  auto crossed = [every](int64_t before, int64_t after) {
    return before / every != after / every;
  };
  st.steps += r.steps;
  st.samples += r.samples;
  st.window_samples += r.samples;
  st.window_loss += r.loss_sum;
  auto& w = st.per_worker[r.worker];
  w.steps += r.steps;
  w.samples += r.samples;
  w.loss_sum += r.loss_sum;
  w.seconds += r.step_seconds;
  w.window_steps += r.steps;
  if (crossed(w.steps - r.steps, w.steps)) {
    say(self, fmt("worker %d: step %lld, loss = %.4f (%.1f examples/sec; "
                  "%.4f sec/batch)",
                  r.worker, static_cast<long long>(w.steps),
                  w.loss_sum / static_cast<double>(w.samples),
                  static_cast<double>(w.samples) / w.seconds,
                  w.seconds / static_cast<double>(w.window_steps)));
    w = chief_state::worker_progress{w.steps, 0, 0, 0, 0};
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
                  "%zu workers, test accuracy = %s",
                  static_cast<long long>(st.steps), epoch_of(self, st.steps),
                  loss, rate, st.workers.size() - st.finished.size(),
                  acc.c_str()));
    st.metrics.progress(now - st.t0, st.steps, epoch_of(self, st.steps), loss,
                        rate);
    st.window_samples = 0;
    st.window_loss = 0;
    st.window_start = now;
  }
  if (st.stopping)
    return;
  if (st.steps >= st.next_eval && !st.evaluating) {
    auto eval_every = st.opts.cfg.training.eval_every_steps;
    auto interval = eval_every > 0 ? eval_every : st.per_epoch;
    while (st.next_eval <= st.steps)
      st.next_eval += interval;
    evaluate_now(self, [=] {
      auto& s = self->state;
      auto target = s.opts.cfg.cluster.target_accuracy;
      if (target > 0 && s.last_accuracy >= target && !s.stopping) {
        say(self, fmt("target accuracy %.4f reached; finishing", target));
        self->send(s.feeder, finish_atom_v);
      }
    });
  }
  auto ckpt_every = st.opts.cfg.training.checkpoint.every_steps;
  if (ckpt_every > 0 && st.steps >= st.next_checkpoint && !st.checkpointing
      && !st.opts.cfg.training.checkpoint.dir.empty()) {
    while (st.next_checkpoint <= st.steps)
      st.next_checkpoint += ckpt_every;
    checkpoint_now(self, [] {});
  }
}

/// Joins every worker id on every shard, then spawns the workers.
void start_workers(self_ptr self) {
  auto& st = self->state;
  auto total = static_cast<size_t>(st.opts.cfg.cluster.workers)
               * st.shards.size();
  auto left = std::make_shared<size_t>(total);
  for (int32_t id = 0; id < st.opts.cfg.cluster.workers; ++id)
    for (auto& s : st.shards)
      self->request(s, timeout_of(self), join_atom_v, id)
        .then(
          [=](int64_t) {
            if (--*left > 0)
              return;
            auto& s2 = self->state;
            s2.t0 = now_seconds();
            s2.window_start = s2.t0;
            for (int32_t w = 0; w < s2.opts.cfg.cluster.workers; ++w)
              spawn_worker(self, w);
          },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

/// Reads the newest checkpoint when resuming; restores shards and feeder.
void start(self_ptr self) {
  auto& st = self->state;
  const auto& cfg = st.opts.cfg;
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
  std::optional<checkpoint> resumed;
  int64_t resumed_version = 0;
  if (cfg.training.checkpoint.resume) {
    auto path = newest_checkpoint(cfg.training.checkpoint.dir);
    if (!path.empty()) {
      auto ck = read_checkpoint(path);
      if (!ck)
        return fail_run(self, ck.error());
      if (auto err = check_layout(*ck, st.evaluator->layout(), path))
        return fail_run(self, std::move(err));
      // The shards' version; files of troupe-train have none, and there the
      // step is the optimizer's step.
      resumed_version = ck->step;
      if (auto it = ck->metadata.find("shard_version");
          it != ck->metadata.end()) {
        char* end = nullptr;
        errno = 0;
        resumed_version = std::strtoll(it->second.c_str(), &end, 10);
        if (it->second.empty() || *end != '\0' || errno != 0
            || resumed_version < 0)
          return fail_run(self, make_error(errc::bad_format,
                                           path + ": metadata \"shard_version\""
                                             " is not a non-negative "
                                             "integer: \""
                                             + it->second + "\""));
      }
      say(self, fmt("resuming from %s at step %lld", path.c_str(),
                    static_cast<long long>(ck->step)));
      resumed = std::move(*ck);
    }
  }
  auto init = resumed ? resumed->params : st.evaluator->initial_params();
  for (size_t i = 0; i < st.ranges.size(); ++i) {
    auto r = st.ranges[i];
    shard_options so;
    so.id = static_cast<int32_t>(i);
    so.block.mode = cfg.cluster.consistency;
    so.block.optimizer = cfg.training.optimizer;
    so.block.aggregate = cfg.cluster.aggregate();
    so.block.staleness = cfg.cluster.staleness;
    so.block.elastic_rate = cfg.cluster.elastic_rate();
    so.initial.assign(init.begin() + static_cast<std::ptrdiff_t>(r.begin),
                      init.begin() + static_cast<std::ptrdiff_t>(r.end));
    st.shards.push_back(self->spawn<caf::monitored>(shard_impl, std::move(so)));
  }
  feeder_options fo;
  fo.samples = static_cast<size_t>(train.count);
  fo.batch = cfg.training.batch_size;
  fo.seed = cfg.training.seed;
  fo.epochs = cfg.training.epochs;
  fo.max_batches = cfg.training.max_steps;
  st.feeder = self->spawn<caf::monitored>(feeder_impl, fo);
  st.next_eval = cfg.training.eval_every_steps > 0
                   ? cfg.training.eval_every_steps
                   : st.per_epoch;
  st.next_checkpoint = cfg.training.checkpoint.every_steps;
  if (!resumed)
    return start_workers(self);
  int64_t position = resumed->step;
  int64_t version = resumed_version;
  st.steps = position;
  st.next_eval = position + (st.next_eval - position % st.next_eval);
  if (st.next_checkpoint > 0)
    st.next_checkpoint = position + cfg.training.checkpoint.every_steps;
  auto ck = std::make_shared<checkpoint>(std::move(*resumed));
  ask_all_shards<int64_t>(
    self,
    [=](size_t i) {
      auto r = self->state.ranges[i];
      auto b = static_cast<std::ptrdiff_t>(r.begin);
      auto e = static_cast<std::ptrdiff_t>(r.end);
      shard_state_msg s;
      s.shard = static_cast<int32_t>(i);
      s.version = version;
      s.values.assign(ck->params.begin() + b, ck->params.begin() + e);
      for (auto& [name, v] : ck->slots) {
        s.slot_names.push_back(name);
        s.slots.emplace_back(v.begin() + b, v.begin() + e);
      }
      return self->request(self->state.shards[i], timeout_of(self),
                           restore_atom_v, std::move(s));
    },
    [=](std::vector<int64_t>&) {
      self->request(self->state.feeder, timeout_of(self), restore_atom_v,
                    position)
        .then([=](int64_t) { start_workers(self); },
              [=](caf::error& err) { fail_run(self, std::move(err)); });
    });
}

} // namespace

chief_actor::behavior_type
chief_impl(chief_actor::stateful_pointer<chief_state> self,
           chief_options opts) {
  self->state.opts = std::move(opts);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.ended)
      return;
    auto it = st.worker_of.find(dm.source);
    if (it != st.worker_of.end()) {
      auto id = it->second;
      st.worker_of.erase(it);
      return on_worker_down(self, id, dm.reason);
    }
    fail_run(self, make_error(errc::actor_down,
                              "a shard or the feeder stopped: "
                                + describe(dm.reason)));
  });
  return {
    [=](run_atom) -> caf::result<cluster_summary> {
      self->state.reply = self->make_response_promise<cluster_summary>();
      start(self);
      return self->state.reply;
    },
    [=](report_atom, const worker_report& r) { on_report(self, r); },
  };
}

caf::expected<cluster_summary> run_cluster(caf::actor_system& sys,
                                           chief_options opts) {
  auto chief = sys.spawn(chief_impl, std::move(opts));
  caf::scoped_actor self{sys};
  caf::expected<cluster_summary> result{caf::sec::bad_function_call};
  // No timeout: a run may take hours, and the chief answers on every path
  // (each of its own requests has one).
  self->request(chief, caf::infinite, run_atom_v)
    .receive([&](cluster_summary& r) { result = r; },
             [&](caf::error& err) { result = std::move(err); });
  return result;
}

} // namespace troupe

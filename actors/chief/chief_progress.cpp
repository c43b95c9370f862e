// The run's progress: worker reports, evaluations and checkpoints as
// runtime/rules/run_schedule says, the user's pause and stop, and the end of a
// run (final checkpoint, evaluation, summary, nodes released).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "models/trainer.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe::chief_ops {

namespace {

/// Scores `params` with the user's evaluation function (an external
/// model); its error ends the run.
void evaluate_external(chief_self self, std::vector<float> params,
                       const std::function<void(eval_result, double)>& report) {
  auto& s = self->state;
  pulled_params whole;
  whole.layout = &s.eval.layout;
  whole.ranges.push_back(flat_range{0, params.size()});
  whole.blocks.push_back(
    std::make_shared<const std::vector<float>>(std::move(params)));
  auto r = s.eval.external(whole);
  if (!r) {
    auto err = make_error(errc::bad_step,
                          fmt("the evaluation at step %lld failed: %s",
                              static_cast<long long>(s.eval.last_eval_step),
                              describe(r.error()).c_str()));
    // The steps trained so far are kept: a run with a checkpoint folder
    // ends after a checkpoint of them (again, when the run's final one
    // was written already: the failure may come before it is).
    if (s.opts.cfg.training.checkpoint.dir.empty() || s.ended())
      return fail_run(self, std::move(err));
    return checkpoint_now(self, [=] { fail_run(self, err); });
  }
  report(*r, -1);
}

} // namespace

void run_when_evaluated(chief_self self) {
  auto later = std::move(self->state.eval.when_done);
  self->state.eval.when_done.clear();
  for (auto& f : later)
    f();
}

/// Evaluates the current parameters on the test set, then runs `then`.
/// One evaluation at a time: a request during one waits for it and then
/// evaluates again unless no step has been trained since it began (every
/// push of a reported step is applied before its report is sent, so an
/// evaluation begun at step N sees all N steps).
void evaluate_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  if (st.eval.evaluating) {
    st.eval.waiters.push_back(std::move(then));
    return;
  }
  if (st.recovery.recovering) {
    st.recovery.after.push_back([=] { evaluate_now(self, then); });
    return;
  }
  // An external model is scored by the user's evaluation function, when
  // the run was given one.
  if (st.eval.last_eval_step == st.progress.steps
      || (!st.eval.evaluator && !st.eval.external))
    return then();
  st.eval.evaluating = true;
  st.eval.last_eval_step = st.progress.steps;
  st.eval.began = now_seconds();
  auto retry = [=] { // a shard was lost meanwhile: again after recovery
    auto& s = self->state;
    s.eval.evaluating = false;
    s.eval.last_eval_step = -1;
    run_when_evaluated(self);
    auto waiters = std::move(s.eval.waiters);
    s.eval.waiters.clear();
    waiters.insert(waiters.begin(), then);
    for (auto& f : waiters)
      when_recovered(self, [=] { evaluate_now(self, f); });
  };
  // auc: a click model's ROC AUC; -1 for the others.
  auto report = [=](eval_result r, double auc) {
    auto& s = self->state;
    s.eval.last_accuracy = headline(r);
    s.eval.last_loss = r.loss;
    s.eval.last_auc = auc;
    // One clock: the training seconds, pauses left out, as the summary,
    // the metrics files and Prometheus count them; the evaluation's own
    // duration apart.
    const double now = now_seconds();
    double t = s.progress.training_seconds(now);
    auto at = s.eval.last_eval_step;
    auto set = s.opts.data->watched_name();
    auto scores = describe_scores(r, set);
    if (auc >= 0)
      scores += fmt(", %s AUC = %.4f", set, auc);
    auto examples = r.count > 0
                      ? fmt("%lld examples ", static_cast<long long>(r.count))
                      : std::string{};
    say(self, fmt("step %lld, epoch %.2f: %s (%sin %.1f s; %.1f s of "
                  "training)",
                  static_cast<long long>(at), epoch_of(self, at),
                  scores.c_str(), examples.c_str(), now - s.eval.began, t));
    s.progress.metrics.evaluation(t, at, epoch_of(self, at), headline(r),
                                  r.loss);
    s.eval.evaluating = false;
    then();
    run_when_evaluated(self);
    auto waiters = std::move(self->state.eval.waiters);
    self->state.eval.waiters.clear();
    for (auto& f : waiters)
      evaluate_now(self, std::move(f));
  };
  pull_params(
    self,
    [=](std::vector<float>& params, int64_t version) {
      auto& s = self->state;
      s.eval.last_eval_version = version;
      if (s.eval.external)
        return evaluate_external(self, std::move(params), report);
      s.eval.evaluator->set_params(params.data());
      if (has_tables(self))
        return evaluate_clicks(self, s.opts.data->watched(), report, retry);
      report(evaluate(*s.eval.evaluator, s.opts.data->watched(),
                      std::max(s.opts.cfg.training.batch_size, 256)),
             -1);
    },
    retry);
}

/// The dense checkpoint file of step `step`.
std::string checkpoint_path(chief_self self, int64_t step) {
  return self->state.opts.cfg.training.checkpoint.dir + "/ckpt-"
         + std::to_string(step) + ".safetensors";
}

/// Writes the shards' states as one checkpoint file at feeder position
/// `from`; returns the error of the write.
caf::error write_shards(chief_self self, const feeder_position& from,
                        std::vector<shard_state_msg>& parts) {
  auto& s = self->state;
  auto position = from.step;
  checkpoint ckpt;
  ckpt.step = position;
  ckpt.layout = s.eval.layout;
  // The values, then each optimizer slot, gathered from the shards' parts
  // (every shard has the same slots: one optimizer for the run).
  auto gather = [&](auto part_of) -> caf::expected<std::vector<float>> {
    std::vector<const std::vector<float>*> pieces;
    for (auto& p : parts)
      pieces.push_back(part_of(p));
    return gather_parts(s.shards.ranges, pieces);
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
  ckpt.metadata["model"] = s.eval.summary;
  ckpt.metadata["mode"] = to_string(s.opts.cfg.cluster.consistency);
  ckpt.metadata["shard_version"] = std::to_string(parts[0].version);
  if (!s.eval.parameters_digest.empty())
    ckpt.metadata["parameters_digest"] = s.eval.parameters_digest;
  if (!from.plan.empty()) // replicated, sharded: each worker's place
    ckpt.metadata["feeder_plan"] = from.plan;
  stamp_checkpoint(ckpt, stamp_of(self));
  auto& dir = s.opts.cfg.training.checkpoint.dir;
  std::error_code ec; // a failure shows in the write's own error
  std::filesystem::create_directories(dir, ec);
  auto path = checkpoint_path(self, position);
  if (has_tables(self)) { // written already, beside this file
    auto tables = tables_path_of(path);
    ckpt.metadata["tables"] = tables.substr(tables.rfind('/') + 1);
  }
  if (auto err = write_checkpoint(path, ckpt))
    return err;
  s.checkpoints.last = path;
  // How long training stood still for it, and what a table run wrote
  // beside the dense file: what an operator sizes checkpoint intervals by.
  std::string took = fmt("%.1f s", now_seconds() - s.checkpoints.began);
  if (has_tables(self)) {
    std::error_code size_ec;
    auto bytes = std::filesystem::file_size(tables_path_of(path), size_ec);
    auto size = static_cast<double>(bytes);
    if (!size_ec)
      took += size >= 1e9 ? fmt(", tables %.2f GB", size / 1e9)
                          : fmt(", tables %.1f MB", size / 1e6);
  }
  say(self, fmt("step %lld: checkpoint %s (%s)",
                static_cast<long long>(position), path.c_str(), took.c_str()));
  prune_checkpoints(dir, stamp_of(self), s.opts.cfg.training.checkpoint.keep);
  return {};
}

/// Writes the dense file of the checkpoint at `position` from the shards'
/// `parts`, lets the shards forget what it holds, resumes the feeder.
void write_checkpoint_files(chief_self self, const feeder_position& position,
                            std::vector<shard_state_msg>& parts,
                            std::function<void()> finished,
                            std::function<void()> then) {
  if (auto err = write_shards(self, position, parts))
    return fail_run(self, std::move(err));
  // The file holds these versions now: the shards' applied logs need
  // reach back no further (runtime/rules/takeover.hpp).
  for (size_t i = 0; i < parts.size(); ++i)
    self->send(self->state.shards.handles[i], forget_atom_v, parts[i].version);
  if (!self->state.progress.user_paused)
    self->send(self->state.shards.feeder, resume_atom_v);
  finished();
  then();
}

/// Pauses the feeder until every lease is acked, snapshots every shard at
/// that one step, writes the file, resumes.
void checkpoint_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  if (st.checkpoints.taking || st.recovery.recovering) { // one at a time
    auto again = [=] { checkpoint_now(self, then); };
    if (st.checkpoints.taking)
      st.checkpoints.waiters.push_back(again);
    else
      st.recovery.after.push_back(again);
    return;
  }
  st.checkpoints.taking = true;
  st.checkpoints.began = now_seconds();
  auto finished = [=] {
    auto& s = self->state;
    s.checkpoints.taking = false;
    auto waiters = std::move(s.checkpoints.waiters);
    s.checkpoints.waiters.clear();
    for (auto& f : waiters)
      f();
  };
  // A shard lost meanwhile: the recovery resumes the feeder; this
  // checkpoint is taken again afterwards.
  auto lost = [=] {
    finished();
    when_recovered(self, [=] { checkpoint_now(self, then); });
  };
  auto gen = st.recovery.generation;
  self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](feeder_position& position) {
        if (self->state.recovery.generation != gen || self->state.recovery.recovering)
          return lost();
        ask_all_shards<shard_state_msg>(
          self,
          [=](size_t i) {
            return self->request(self->state.shards.handles[i], timeout_of(self),
                                 snapshot_atom_v);
          },
          [=](std::vector<shard_state_msg>& gathered) {
            auto parts = std::make_shared<std::vector<shard_state_msg>>(
              std::move(gathered));
            if (!has_tables(self))
              return write_checkpoint_files(self, position, *parts, finished,
                                            then);
            // The tables first: the dense file names them, and a run
            // resumes from a dense file only.
            auto& dir = self->state.opts.cfg.training.checkpoint.dir;
            std::error_code ec; // a failure shows in the write's own error
            std::filesystem::create_directories(dir, ec);
            write_tables(self, tables_path_of(checkpoint_path(self, position.step)),
                         [=](caf::error err) {
                           if (err)
                             return fail_run(self, std::move(err));
                           write_checkpoint_files(self, position, *parts,
                                                  finished, then);
                         },
                         lost);
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
  // replicated, sharded: what each worker's own stream got (an epoch a
  // worker joined after shows 0).
  if (c.training.partition != data_partition::shared)
    for (auto& w : r.workers) {
      std::string line;
      for (auto n : w.samples)
        line += " " + std::to_string(n);
      say(self, fmt("worker %d samples per epoch (%s):", w.worker,
                    to_string(c.training.partition))
                  + line);
    }
  say(self, fmt("pushes accepted %lld, stale %lld, refused %lld",
                static_cast<long long>(r.pushes_accepted),
                static_cast<long long>(r.pushes_stale),
                static_cast<long long>(r.pushes_refused)));
  if (self->state.recovery.recoveries > 0)
    say(self,
        fmt("shard recoveries: %d (of which replicas took over: %d), "
            "steps lost and retrained: %lld",
            self->state.recovery.recoveries, self->state.recovery.takeovers,
            static_cast<long long>(self->state.recovery.lost_steps)));
  if (self->state.recovery.moves > 0)
    say(self,
        fmt("shards added or drained: %d, leasing paused %.3f s for "
            "them in all",
            self->state.recovery.moves, self->state.recovery.move_seconds));
  // The table comes last: scripts read its row from the final line.
  say(self,
      fmt("%-24s %-6s %7s %6s %8s %7s %8s %11s %9s %8s", "run", "mode",
          "workers", "shards", "steps", "epochs", "seconds", "examples/s",
          is_regression(self->state.opts.cfg.model.loss) ? "test r2"
                                                         : "test acc",
          "restarts"),
      false);
  // "-" where the run was not evaluated, as in the progress lines.
  std::string acc = r.test_accuracy == -1 ? std::string{"-"}
                                          : fmt("%.4f", r.test_accuracy);
  say(self, fmt("%-24s %-6s %7zu %6d %8lld %7.2f %8.1f %11.1f %9s %8d",
                c.name.c_str(), to_string(c.cluster.consistency),
                self->state.members.workers.size(), c.cluster.shards,
                static_cast<long long>(r.steps), r.epochs, r.seconds,
                r.examples_per_sec, acc.c_str(), r.restarts),
      false);
}

void finish_run(chief_self self) {
  auto& st = self->state;
  if (st.stopping())
    return;
  st.enter(run_phase::finishing);
  double seconds = st.progress.training_seconds(now_seconds());
  auto after_checkpoint = [=] {
    // The final parameters, pulled once: every worker has left (their
    // leaves reached the shards before this pull), so nothing changes
    // them now. An update applied since the last evaluation began, with
    // no step of its own (sync: the last one, short of pushes, applied as
    // the workers leave), makes the final evaluation score again.
    pull_params(self, [=](std::vector<float>& params, int64_t version) {
      if (version != self->state.eval.last_eval_version)
        self->state.eval.last_eval_step = -1;
      auto final_params = std::make_shared<std::vector<float>>(
        std::move(params));
      evaluate_now(self, [=] {
        auto& s = self->state;
        cluster_summary r;
        r.steps = s.progress.steps;
        r.epochs = epoch_of(self, s.progress.steps);
        r.seconds = seconds;
        r.examples_per_sec = static_cast<double>(s.progress.samples) / seconds;
        r.test_accuracy = s.eval.last_accuracy;
        r.test_loss = s.eval.last_loss;
        if (s.opts.data->validation.count > 0) {
          // The evaluator holds the final parameters (no step since): the
          // test set is scored once, now.
          auto t = evaluate(*s.eval.evaluator, s.opts.data->test,
                            std::max(s.opts.cfg.training.batch_size, 256));
          auto validated = is_regression(s.opts.cfg.model.loss)
                             ? fmt("validation r2 = %.4f, validation mse = %.4g",
                                   r.test_accuracy, r.test_loss)
                             : fmt("validation accuracy = %.4f, validation "
                                   "loss = %.4f",
                                   r.test_accuracy, r.test_loss);
          say(self, fmt("final: %s; %s (%lld examples)", validated.c_str(),
                        describe_scores(t, "test").c_str(),
                        static_cast<long long>(t.count)));
          r.test_accuracy = headline(t);
          r.test_loss = t.loss;
        }
        r.restarts = s.members.restarts->total();
        ask_all_shards<shard_stats>(
          self,
          [=](size_t i) {
            return self->request(self->state.shards.handles[i], timeout_of(self),
                                 stats_atom_v);
          },
          [=](std::vector<shard_stats>& stats) {
            auto summary = r;
            summary.version = version;
            // async, ssp: a version is the batches a shard applied, each
            // once; a lost step would show as a shard behind the others.
            std::string versions;
            for (auto& x : stats)
              versions += " " + std::to_string(x.version);
            say(self, "shard versions at the end:" + versions);
            for (auto& x : stats) {
              summary.pushes_accepted += x.accepted;
              summary.pushes_stale += x.stale;
              summary.pushes_refused += x.refused;
              if (has_tables(self))
                say(self, fmt("shard %d: %lld table rows in %.2f GiB, rows "
                              "pulled %lld, pushed %lld",
                              x.shard, static_cast<long long>(x.rows),
                              static_cast<double>(x.row_bytes)
                                / (1024.0 * 1024 * 1024),
                              static_cast<long long>(x.rows_pulled),
                              static_cast<long long>(x.rows_pushed)));
            }
            auto shard_stats_copy = std::make_shared<std::vector<shard_stats>>(
              std::move(stats));
            self
              ->request(self->state.shards.feeder, timeout_of(self), stats_atom_v)
              .then(
                [=](feeder_stats& fs) {
                  auto done = summary;
                  // The feeder's count is the authority: a worker that died
                  // may have settled steps it had not reported yet.
                  done.steps = fs.acked;
                  done.epochs = epoch_of(self, fs.acked);
                  done.epoch_samples = std::move(fs.epoch_samples);
                  done.workers = std::move(fs.workers);
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

void set_user_pause(chief_self self, bool paused) {
  auto& st = self->state;
  if (st.progress.user_paused == paused)
    return;
  st.progress.user_paused = paused;
  say(self, paused ? "paused by the shell" : "resumed by the shell");
  double now = now_seconds();
  if (paused) {
    st.progress.paused_since = now;
  } else if (st.progress.paused_since >= 0) {
    // The progress window's rate leaves the pause out too.
    st.progress.paused_seconds += now - st.progress.paused_since;
    st.progress.window_start += now - st.progress.paused_since;
    st.progress.paused_since = -1;
  }
  if (paused)
    self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
      .then([](feeder_position&) {}, [](caf::error&) {});
  else if (!st.checkpoints.taking && !st.recovery.recovering)
    self->send(st.shards.feeder, resume_atom_v);
}

/// When no worker runs or is being started, the ones waiting for their
/// node are let go (nothing is left for them, or the run was stopped),
/// and with no worker left the run finishes.
void release_waiting_if_idle(chief_self self) {
  auto& st = self->state;
  for (auto& [id, w] : st.members.workers)
    if (w.state == worker_phase::running || w.state == worker_phase::starting
        || w.state == worker_phase::leaving)
      return;
  for (auto& [id, w] : st.members.workers)
    if (w.state == worker_phase::waiting) {
      say(self, fmt("worker %d: nothing left to train; it no longer waits "
                    "for node %s",
                    id, w.node.c_str()));
      w.state = worker_phase::finished;
      for (auto& s : st.shards.handles)
        if (s)
          self->send(s, leave_atom_v, id);
    }
  finish_run(self);
}

void stop_run(chief_self self, const std::string& who) {
  auto& st = self->state;
  say(self, "stop requested by " + who + "; finishing after the steps in "
            "flight");
  self->send(st.shards.feeder, finish_atom_v);
  if (st.progress.user_paused)
    set_user_pause(self, false);
  // Workers waiting for a node will not come back to end on their own.
  release_waiting_if_idle(self);
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
                                         static_cast<long long>(st.progress.steps),
                                         r.worker)));
  // A report covers a few steps (a worker sends one per 8 steps or 50
  // ms): a line names the multiple of log_every_steps that a report
  // crosses, and the report's share of steps up to it counts in that
  // line's window, the rest in the next (a few steps at most, assumed
  // alike).
  auto& schedule = *st.progress.schedule;
  const int64_t run_before = st.progress.steps;
  st.progress.steps += r.steps;
  st.progress.samples += r.samples;
  if (r.samples > 0) {
    double mean = r.loss_sum / static_cast<double>(r.samples);
    st.progress.recent_loss = st.progress.recent_loss < 0
                                ? mean
                                : 0.9 * st.progress.recent_loss + 0.1 * mean;
  }
  auto share_up_to = [&](int64_t before, int64_t logged) {
    return logged == 0 || r.steps == 0 ? 1.0
                                       : static_cast<double>(logged - before)
                                           / static_cast<double>(r.steps);
  };
  auto& w = st.members.workers[r.worker];
  w.clock = r.clock;
  w.staleness = r.staleness;
  w.seconds += r.step_seconds;
  w.read_seconds += r.read_seconds;
  w.read_bytes += r.read_bytes;
  w.last_loss = r.samples > 0 ? r.loss_sum / r.samples : w.last_loss;
  const int64_t worker_before = w.steps;
  w.steps += r.steps;
  w.samples += r.samples;
  if (auto logged = schedule.log_step(worker_before, w.steps)) {
    const double in = share_up_to(worker_before, logged);
    const auto in_samples = std::llround(static_cast<double>(r.samples) * in);
    w.window_steps += logged - worker_before;
    w.window_samples += in_samples;
    w.window_loss += r.loss_sum * in;
    w.window_seconds += r.step_seconds * in;
    say(self, fmt("worker %d: step %lld, loss = %.4f (%.1f examples/sec; "
                  "%.4f sec/batch)",
                  r.worker, static_cast<long long>(logged),
                  w.window_loss / static_cast<double>(w.window_samples),
                  static_cast<double>(w.window_samples) / w.window_seconds,
                  w.window_seconds / static_cast<double>(w.window_steps)));
    st.progress.metrics.worker(
      r.worker, st.progress.training_seconds(now_seconds()), logged,
      w.window_loss / static_cast<double>(w.window_samples),
      static_cast<double>(w.window_samples) / w.window_seconds);
    w.window_steps = w.steps - logged;
    w.window_samples = r.samples - in_samples;
    w.window_loss = r.loss_sum * (1 - in);
    w.window_seconds = r.step_seconds * (1 - in);
  } else {
    w.window_steps += r.steps;
    w.window_samples += r.samples;
    w.window_loss += r.loss_sum;
    w.window_seconds += r.step_seconds;
  }
  if (auto logged = schedule.log_step(run_before, st.progress.steps)) {
    const double in = share_up_to(run_before, logged);
    const auto in_samples = std::llround(static_cast<double>(r.samples) * in);
    st.progress.window_samples += in_samples;
    st.progress.window_loss += r.loss_sum * in;
    double now = now_seconds();
    double rate = static_cast<double>(st.progress.window_samples)
                  / (now - st.progress.window_start);
    double loss = st.progress.window_loss
                  / static_cast<double>(st.progress.window_samples);
    std::string acc = st.eval.last_accuracy == -1
                        ? std::string{"-"}
                        : fmt("%.4f", st.eval.last_accuracy);
    const int live = live_workers(self);
    say(self,
        fmt("step %lld, epoch %.2f, loss = %.4f, %.1f examples/sec, "
            "%d worker%s, %s %s = %s",
            static_cast<long long>(logged), epoch_of(self, logged), loss, rate,
            live, live == 1 ? "" : "s", st.opts.data->watched_name(),
            score_name(st.opts.cfg.model.loss), acc.c_str()));
    st.progress.metrics.progress(st.progress.training_seconds(now), logged,
                                 epoch_of(self, logged), loss, rate);
    st.progress.window_samples = r.samples - in_samples;
    st.progress.window_loss = r.loss_sum * (1 - in);
    st.progress.window_start = now;
  } else {
    st.progress.window_samples += r.samples;
    st.progress.window_loss += r.loss_sum;
  }
  if (st.stopping())
    return;
  if (!st.eval.evaluating && st.progress.schedule->take_eval(st.progress.steps)) {
    evaluate_now(self, [=] {
      auto& s = self->state;
      auto target = s.opts.cfg.cluster.target_accuracy;
      if (target > 0 && s.eval.last_accuracy >= target && !s.stopping()) {
        say(self, fmt("target accuracy %.4f reached; finishing", target));
        self->send(s.shards.feeder, finish_atom_v);
      }
    });
  }
  if (!st.checkpoints.taking && !st.opts.cfg.training.checkpoint.dir.empty()
      && st.progress.schedule->take_checkpoint(st.progress.steps))
    checkpoint_now(self, [] {});
}

} // namespace troupe::chief_ops

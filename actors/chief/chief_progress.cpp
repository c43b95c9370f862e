// The run's progress: the workers' reports, the progress lines and
// metrics they make, the evaluations and checkpoints that come due as
// runtime/rules/run_schedule.hpp says, and the user's pause.
#include <algorithm>
#include <cmath>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

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

void on_report(chief_self self, const worker_report& r) {
  auto& st = self->state;
  if (st.ended())
    return;
  if (!std::isfinite(r.loss_sum))
    return fail_run(self,
                    make_error(errc::non_finite,
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
  if (!st.eval.evaluating
      && st.progress.schedule->take_eval(st.progress.steps)) {
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

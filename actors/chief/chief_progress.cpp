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
  if (!st.progress.set_user_paused(paused, now_seconds()))
    return;
  say(self, paused ? "paused (by the shell or the page)"
                   : "resumed (by the shell or the page)");
  if (paused)
    self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
      .then([](feeder_position&) {}, [](caf::error&) {});
  else if (!st.checkpoints.taking && !st.recovery.recovering())
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
                                   static_cast<long long>(st.progress.steps()),
                                   r.worker)));
  auto* w = st.members.find_worker(r.worker);
  if (w == nullptr) // not a worker of this run
    return;
  st.members.heard_from(w->node, now_seconds());
  auto run_line = st.progress.count(r, now_seconds());
  if (auto line = w->count(r, *st.progress.schedule)) {
    const auto& window = line->window;
    say(self, fmt("worker %d: step %lld, loss = %.4f (%.1f examples/sec; "
                  "%.4f sec/batch)",
                  r.worker, static_cast<long long>(line->step),
                  window.mean_loss(), window.samples_per_second(),
                  window.seconds / static_cast<double>(window.steps)));
    st.progress.metrics.worker(r.worker,
                               st.progress.training_seconds(now_seconds()),
                               line->step, window.mean_loss(),
                               window.samples_per_second());
  }
  if (run_line) {
    const auto logged = run_line->step;
    const auto& window = run_line->window;
    double rate = static_cast<double>(window.samples) / window.seconds;
    std::string acc = st.eval.last_accuracy == -1
                        ? std::string{"-"}
                        : fmt("%.4f", st.eval.last_accuracy);
    const int live = self->state.members.live_workers();
    say(self, fmt("step %lld, epoch %.2f, loss = %.4f, %.1f examples/sec, "
                  "%d worker%s, %s %s = %s",
                  static_cast<long long>(logged), epoch_of(self, logged),
                  window.mean_loss(), rate, live, live == 1 ? "" : "s",
                  st.opts.data->watched_name(),
                  score_name(st.opts.cfg.model.loss), acc.c_str()));
    st.progress.metrics.progress(st.progress.training_seconds(now_seconds()),
                                 logged, epoch_of(self, logged),
                                 window.mean_loss(), rate);
  }
  if (st.stopping())
    return;
  if (!st.eval.evaluating
      && st.progress.schedule->take_eval(st.progress.steps())) {
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
      && st.progress.schedule->take_checkpoint(st.progress.steps()))
    checkpoint_now(self, [] {});
  if (!st.checkpoints.taking && export_due(self))
    export_now(self, [] {});
  follow_on_report(self, r);
}

} // namespace troupe::chief_ops

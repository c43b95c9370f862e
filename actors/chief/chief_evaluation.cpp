// The run's evaluations: the parameters the shards hold, scored on the
// test set by the chief's own model (chief_clicks.cpp scores a click
// model) or by the user's evaluate function, one at a time.
#include <algorithm>
#include <cmath>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "models/trainer.hpp"
#include "runtime/base/errc.hpp"

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
  if (st.recovery.recovering()) {
    st.recovery.when_over([=] { evaluate_now(self, then); });
    return;
  }
  // An external model is scored by the user's evaluation function, when
  // the run was given one.
  if (st.eval.last_eval_step == st.progress.steps()
      || (!st.eval.evaluator && !st.eval.external))
    return then();
  st.eval.evaluating = true;
  st.eval.last_eval_step = st.progress.steps();
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
      // A click model scores with the rows the shards hold; an external
      // model's evaluate(params) returned above.
      if (s.opts.cfg.model.type == model_config::kind::click)
        return evaluate_clicks(self, s.opts.data->watched(), report, retry);
      report(evaluate(*s.eval.evaluator, s.opts.data->watched(),
                      std::max(s.opts.cfg.training.batch_size, 256)),
             -1);
    },
    retry);
}

} // namespace troupe::chief_ops

// The run's progress as the workers report it: steps and samples, the
// window of the next progress line, the recent loss, and the time paused
// by the shell, which the rates leave out. chief_progress.cpp counts the
// reports and pauses; a recovery or a takeover sets the steps back to
// where the shards are, a join of workers the feeder's plan, and the
// shell the learning rate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "actors/chief/progress_window.hpp"
#include "runtime/base/metrics_log.hpp"
#include "runtime/rules/run_schedule.hpp"

namespace troupe {

class run_progress {
public:
  metrics_log metrics;
  /// Steps of one epoch of every worker: the whole set once (shared,
  /// sharded) or once per worker the run started with (replicated).
  int64_t per_epoch = 1;
  int64_t total_steps = 0; ///< the feeder's plan, as of the last join
  std::unique_ptr<run_schedule> schedule; ///< evaluations, checkpoints, logs
  /// The learning rate the shards were started with or last set to.
  double base_lr = 0;

  /// Training begins at `now` (seconds).
  void begin(double now) {
    t0_ = now;
    window_start_ = now;
  }

  /// Batches trained (reports), resumed included.
  int64_t steps() const { return steps_; }
  int64_t samples() const { return samples_; }
  /// The steps are where the shards are (a start, a recovery, a takeover).
  void set_steps(int64_t steps) { steps_ = steps; }

  /// The training loss of the latest reports (a moving average over about
  /// ten); -1 before the first.
  double recent_loss() const { return recent_loss_; }

  /// Counts report `r` at time `now`; the line it completes, if any
  /// (schedule's log_step), whose window's seconds are the wall time since
  /// the last line.
  std::optional<progress_line> count(const worker_report& r, double now);

  bool user_paused() const { return user_paused_; }
  /// The shell pauses or resumes at `now`; false when it already was.
  bool set_user_paused(bool paused, double now);
  /// Seconds of training since the start, pauses by the shell left out.
  double training_seconds(double now) const {
    return now - t0_ - paused_seconds_
           - (paused_since_ >= 0 ? now - paused_since_ : 0);
  }

private:
  double t0_ = 0;
  int64_t steps_ = 0;
  int64_t samples_ = 0;
  double recent_loss_ = -1;
  progress_window window_;
  double window_start_ = 0;
  bool user_paused_ = false;
  /// The seconds of pauses that ended, and when the current one began
  /// (-1: none).
  double paused_seconds_ = 0, paused_since_ = -1;
};

} // namespace troupe

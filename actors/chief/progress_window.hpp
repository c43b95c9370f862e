// What a progress line reports: the steps, samples, loss and compute time
// since the last line, of one worker or of the whole run.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "actors/protocol/worker_protocol.hpp"

namespace troupe {

struct progress_line;

struct progress_window {
  int64_t steps = 0, samples = 0;
  double loss = 0, seconds = 0;

  double mean_loss() const { return loss / static_cast<double>(samples); }
  double samples_per_second() const {
    return static_cast<double>(samples) / seconds;
  }

  /// Adds report `r`, which took a step count from `before` to
  /// `before + r.steps`. A report covers a few steps (a worker sends one
  /// per 8 steps or 50 ms): when it crosses `logged`, the multiple of
  /// log_every_steps that a line names (0: it crosses none), its share of
  /// steps up to that step counts in the line's window, which is returned,
  /// and the rest in the next (a few steps at most, assumed alike).
  std::optional<progress_line> add(const worker_report& r, int64_t before,
                                   int64_t logged);
};

/// A progress line: the step it names, and the window up to it.
struct progress_line {
  int64_t step;
  progress_window window;
};

inline std::optional<progress_line>
progress_window::add(const worker_report& r, int64_t before, int64_t logged) {
  if (logged == 0) {
    steps += r.steps;
    samples += r.samples;
    loss += r.loss_sum;
    seconds += r.step_seconds;
    return std::nullopt;
  }
  const double in = r.steps == 0 ? 1.0
                                 : static_cast<double>(logged - before)
                                     / static_cast<double>(r.steps);
  const auto in_samples = std::llround(static_cast<double>(r.samples) * in);
  progress_window line{steps + (logged - before), samples + in_samples,
                       loss + r.loss_sum * in, seconds + r.step_seconds * in};
  *this = {before + r.steps - logged, r.samples - in_samples,
           r.loss_sum * (1 - in), r.step_seconds * (1 - in)};
  return progress_line{logged, line};
}

} // namespace troupe

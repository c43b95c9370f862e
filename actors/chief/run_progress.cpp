#include "actors/chief/run_progress.hpp"

namespace troupe {

std::optional<progress_line> run_progress::count(const worker_report& r,
                                                 double now) {
  const int64_t before = steps_;
  steps_ += r.steps;
  samples_ += r.samples;
  if (r.samples > 0) {
    double mean = r.loss_sum / static_cast<double>(r.samples);
    recent_loss_ = recent_loss_ < 0 ? mean : 0.9 * recent_loss_ + 0.1 * mean;
  }
  auto logged = schedule->log_step(before, steps_);
  auto line = window_.add(r, before, logged);
  if (!line)
    return std::nullopt;
  line->window.seconds = now - window_start_;
  window_start_ = now;
  return line;
}

bool run_progress::set_user_paused(bool paused, double now) {
  if (user_paused_ == paused)
    return false;
  user_paused_ = paused;
  if (paused) {
    paused_since_ = now;
  } else if (paused_since_ >= 0) {
    // The progress window's rate leaves the pause out too.
    paused_seconds_ += now - paused_since_;
    window_start_ += now - paused_since_;
    paused_since_ = -1;
  }
  return true;
}

} // namespace troupe

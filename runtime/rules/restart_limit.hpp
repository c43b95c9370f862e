// Restart intensity in the manner of Erlang/OTP supervisors: at most
// `max_restarts` restarts within any `window_s` seconds.
#pragma once

#include <deque>

namespace troupe {

class restart_limit {
public:
  restart_limit(int max_restarts, double window_s)
    : max_(max_restarts), window_(window_s) {}

  /// Records a restart wanted at time `now` (seconds); false when it would
  /// exceed the intensity (then it is not recorded).
  bool allow(double now) {
    while (!times_.empty() && now - times_.front() > window_)
      times_.pop_front();
    if (static_cast<int>(times_.size()) >= max_)
      return false;
    times_.push_back(now);
    ++total_;
    return true;
  }

  int total() const { return total_; }
  /// Restarts within the window that ended at the last allowed one.
  int recent() const { return static_cast<int>(times_.size()); }
  int max_restarts() const { return max_; }
  double window() const { return window_; }

private:
  int max_;
  double window_;
  int total_ = 0;
  std::deque<double> times_;
};

} // namespace troupe

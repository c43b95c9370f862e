// Per-run metrics files: `<dir>/<run>.jsonl` (one JSON object per progress
// line and per evaluation) and `<dir>/<run>.csv` (the evaluations:
// seconds, step, epoch, test accuracy, test loss), which scripts/plot.sh
// turns into accuracy-over-time and accuracy-over-steps plots.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "caf/error.hpp"

namespace troupe {

class metrics_log {
public:
  /// No files: every call is a no-op.
  metrics_log() = default;

  /// Creates `dir` if needed and truncates the run's two files.
  /// errc::io_error naming the path when that fails.
  caf::error open(const std::string& dir, const std::string& run);

  void progress(double seconds, int64_t step, double epoch, double loss,
                double examples_per_sec);
  void evaluation(double seconds, int64_t step, double epoch, double accuracy,
                  double loss);

private:
  struct closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, closer> jsonl_, csv_;
};

} // namespace troupe

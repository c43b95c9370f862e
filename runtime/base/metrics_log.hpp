// Per-run metrics files in a metrics folder, named by the run's name and
// id, `<dir>/<run>-<run id>.*`, so runs never overwrite each other and a
// resumed run (which keeps its id) appends to its own:
// - `.jsonl`: one JSON object per event: "run" (at every start or resume:
//   name, id, mode, workers, data partition, the step it starts at),
//   "progress" (the cluster's progress lines), "worker" (each worker's),
//   "eval" (evaluations);
// - `.csv`: the evaluations (seconds, step, epoch, test accuracy, test loss;
//   a regression's R^2 in place of the accuracy);
// - `.progress.csv`: the progress lines (seconds, step, epoch, loss,
//   examples/s).
// The CSV files start with a "# run=... mode=... workers=..." line, which
// scripts/plot.sh puts in the plot's legend. The same scalars also go to
// TensorBoard's event files in `<dir>/tensorboard/<run>-<run id>/`
// (tensorboard_events.hpp): `tensorboard --logdir <dir>/tensorboard`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "caf/error.hpp"
#include "runtime/base/tensorboard_events.hpp"

namespace troupe {

/// What names a run in its metrics files.
struct metrics_run {
  std::string name, run_id, mode, partition;
  int workers = 0;
  int64_t start_step = 0; ///< > 0: resumed there
  /// What an evaluation's score is: "accuracy", or "r2" for a regression
  /// (the column "test_<score>").
  std::string score = "accuracy";
};

class metrics_log {
public:
  /// No files: every call is a no-op.
  metrics_log() = default;

  /// Creates `dir` if needed and checks that files can be made there:
  /// errc::io_error naming it otherwise (before a run starts).
  static caf::error prepare(const std::string& dir);

  /// Opens (appends to) the run's files in `dir`. errc::io_error naming
  /// the path when that fails.
  caf::error open(const std::string& dir, const metrics_run& run);

  /// The base path of the files ("" before open).
  const std::string& base() const { return base_; }

  /// Also hands each "progress", "worker" and "eval" record (one JSON
  /// object, as the .jsonl file has it) to `fn`, with or without files:
  /// the Python module's progress callback.
  void set_listener(std::function<void(const std::string&)> fn) {
    listener_ = std::move(fn);
  }

  void progress(double seconds, int64_t step, double epoch, double loss,
                double examples_per_sec);
  void worker(int32_t id, double seconds, int64_t step, double loss,
              double examples_per_sec);
  /// `score` is the run's metrics_run::score.
  void evaluation(double seconds, int64_t step, double epoch, double score,
                  double loss);

private:
  struct closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  using file = std::unique_ptr<std::FILE, closer>;
  /// Writes `record` to the .jsonl file and hands it to the listener.
  void emit(const std::string& record);
  /// emit() of the record printf makes of `format` (at most 255
  /// characters); false, and nothing made, when nobody reads records.
  bool event(const char* format, ...) __attribute__((format(printf, 2, 3)));
  /// Appends a line to `csv` (when open) and flushes it.
  static void csv_line(const file& csv, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

  std::string base_;
  std::string score_key_ = "test_accuracy";
  std::string score_tag_ = "test/accuracy"; ///< TensorBoard's name of it
  std::function<void(const std::string&)> listener_;
  file jsonl_, csv_, progress_csv_;
  tensorboard_events tensorboard_;
};

} // namespace troupe

// Training in one process: the reusable training step, evaluation, and the
// epoch loop with progress lines, checkpoints and resume.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "models/eval_result.hpp"
#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/params/optimizer.hpp"

namespace troupe {

/// A model replica plus the optimizer over all of its parameters.
class local_trainer {
public:
  local_trainer(model& m, const optimizer_config& cfg);

  /// One step: forward/backward on (x, y) given in host memory, then the
  /// optimizer update at the current global step, which then advances.
  batch_loss step(const float* x, batch_targets y, int batch);

  int64_t global_step() const { return step_; }
  model& replica() { return model_; }

  /// The full state as a checkpoint (parameters, optimizer slots, step).
  checkpoint snapshot() const;

  /// Restores a snapshot; errc::layout_mismatch naming `origin` when it
  /// belongs to another model, errc::bad_format when its optimizer slots
  /// differ from this optimizer's.
  caf::error restore(const checkpoint& ckpt, const std::string& origin);

private:
  model& model_;
  optimizer opt_;
  // Plain SGD without weight decay rides on the backward pass (see
  // model::sgd_step); every other optimizer needs the whole gradient.
  bool fused_sgd_;
  int64_t step_ = 0;
  std::vector<float> host_params_, host_grads_; // non-host backends only
};

/// Evaluates the model on all of `data` in batches of `batch_size`: with
/// float targets and mean squared error, a regression's scores.
eval_result evaluate(model& m, const dataset& data, int batch_size);

/// `x` with `digits` decimals ("%.*f"), as the progress lines print it.
std::string fixed(double x, int digits);

/// One row of logits: its first arg-max, and log(sum_c exp(z[c] - z[best]))
/// (>= 0), so -log softmax(z)[c] = log_sum - (z[c] - z[best]) without
/// overflow or a float probability that rounds to 0.
struct logit_row {
  size_t best = 0;
  double log_sum = 0;
};
logit_row read_logits(const float* z, size_t classes);

/// An evaluation sample by sample: the loss and accuracy of evaluate()
/// plus the confusion matrix (confusion[label][predicted], the predicted
/// class being the first arg-max of the logits); with float targets,
/// evaluate()'s scores alone and no matrix.
struct detailed_eval {
  eval_result overall;
  std::vector<std::vector<int64_t>> confusion;
};
detailed_eval evaluate_per_class(model& m, const dataset& data, int batch_size);

/// What a finished run reports.
struct run_summary {
  int64_t steps = 0;
  int64_t epochs = 0; ///< completed epochs
  double seconds = 0; ///< training wall time, evaluation excluded
  double examples_per_sec = 0;
  eval_result test; ///< the test set, at the end
};

/// Number of steps of one epoch: the last batch may be short, so every
/// sample is trained exactly once per epoch.
int64_t steps_per_epoch(int64_t samples, int batch_size);

/// Where a local run stands, for a metrics endpoint on another thread:
/// updated after every step under `mutex`. -1: not known yet.
struct local_status {
  std::mutex mutex;
  std::string run_id;
  int64_t steps = 0, total_steps = 0, samples = 0;
  double epoch = 0, seconds = 0, loss = -1, test_accuracy = -1;
  double learning_rate = 0;
};

/// Trains `cfg` on `data` in this process, printing progress to `log`:
/// resumes from the newest checkpoint when configured to, logs every
/// log_every_steps, evaluates per eval_every_steps or epoch, checkpoints,
/// and stops at the epoch or step limit. errc::non_finite when the loss
/// turns NaN or Inf. With cluster.metrics_dir it writes the run's metrics
/// files there (runtime/base/metrics_log); with `status`, it keeps it current.
caf::expected<run_summary> run_local_training(const run_config& cfg,
                                              const train_test& data,
                                              compute_backend& be,
                                              std::ostream& log,
                                              local_status* status = nullptr);

/// The newest "ckpt-<step>.safetensors" in dir, or "" when there is none.
std::string newest_checkpoint(const std::string& dir);

} // namespace troupe

// Optimizers over a flat float range: SGD, momentum and Adam with optional L2
// weight decay, and TF1-style learning-rate schedules. A parameter shard runs
// one over the slice it owns; the single-process trainer runs one over all.
// Every update is element-wise, so optimizing slices independently equals
// optimizing the whole vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

/// Learning rate as a function of the global step, as TF1's
/// tf.train.exponential_decay: lr * rate^(step / decay_steps), with the
/// exponent floored when `staircase`.
struct lr_schedule {
  enum class kind { constant, exponential };
  kind type = kind::constant;
  double decay_steps = 1000; ///< > 0
  double decay_rate = 1.0;   ///< > 0
  bool staircase = false;
};

struct optimizer_config {
  enum class kind { sgd, momentum, adam };
  kind type = kind::sgd;
  double learning_rate = 0.01;
  double momentum = 0.9; ///< momentum only
  bool nesterov = false; ///< momentum only
  double beta1 = 0.9;    ///< adam only
  double beta2 = 0.999;  ///< adam only
  double epsilon = 1e-8; ///< adam only
  /// L2 penalty: grad += weight_decay * param before the update (coupled
  /// decay, as a tf.nn.l2_loss term in the loss would do). 0 disables it.
  double weight_decay = 0;
  lr_schedule schedule;
  /// Runs the update with denormals flushed to zero (flush_denormals.hpp
  /// says why). Not a config file key: bench-shard turns it off to show the
  /// difference.
  bool flush_denormals = true;
};

/// "sgd", "momentum", "adam".
const char* to_string(optimizer_config::kind k);

/// The learning rate at global step `step` (0-based).
double learning_rate_at(const optimizer_config& cfg, int64_t step);

/// An optimizer bound to a range of `size` elements; owns its state.
class optimizer {
public:
  optimizer(optimizer_config cfg, size_t size);

  /// params -= update(grads) for one step; `step` is the global step of this
  /// update (0-based), which sets the learning rate and Adam's bias
  /// correction; `lr_scale` multiplies this step's learning rate, and
  /// `implicit_momentum` (in [0, 1)) is subtracted from this step's
  /// momentum (Adam's beta1, the momentum optimizer's m), not below 0: a
  /// stale push's, see param_block. `step_scale`, when given, scales
  /// each coordinate's step (Adam: after its normalisation; SGD and
  /// momentum: the gradient): the gap-aware rule (stale_compensation).
  /// Every array has size() elements.
  void apply(float* params, const float* grads, int64_t step,
             double lr_scale = 1.0, double implicit_momentum = 0,
             const float* step_scale = nullptr);

  size_t size() const { return size_; }
  const optimizer_config& config() const { return cfg_; }
  /// Changes the base learning rate (the schedule still applies to it).
  void set_learning_rate(double lr) { cfg_.learning_rate = lr; }

  /// Named state vectors ("momentum", or "adam_m" and "adam_v"), each size()
  /// long, for checkpoints; empty for SGD.
  std::vector<std::pair<std::string, std::vector<float>*>> slots();

  /// Copies of the same slots, for snapshots.
  std::vector<std::pair<std::string, std::vector<float>>> copy_slots() const;

  /// The state beside the slots (see lowered_beta1_ratio_), which a
  /// replica copies for an exact copy of the optimizer.
  double lowered_beta1_ratio() const { return lowered_beta1_ratio_; }
  void set_lowered_beta1_ratio(double r) { lowered_beta1_ratio_ = r; }

private:
  /// Slot names in order; slot 0 lives in slot_a_, slot 1 in slot_b_.
  std::vector<std::string> slot_names() const;

  optimizer_config cfg_;
  size_t size_;
  std::vector<float> slot_a_; // momentum accumulator, or Adam's m
  std::vector<float> slot_b_; // Adam's v
  std::vector<float> scaled_; // SGD's and momentum's scaled gradient
  /// Adam's bias correction divides m by 1 - (the product of every step's
  /// beta1). With beta1 lowered for some steps that product is
  /// beta1^(step + 1) times this: the product of (lowered beta1 / beta1),
  /// exactly 1 while nothing was lowered, so the plain path is unchanged.
  /// Not in checkpoints: a shard that restores one starts it at 1, which
  /// errs only in the first dozens of steps, where beta1^t is not yet ~0.
  double lowered_beta1_ratio_ = 1.0;
};

} // namespace troupe

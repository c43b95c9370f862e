// A model troupe does not compute: the user's own (model.type "external"),
// whose training step runs outside troupe, e.g. the Python module's step
// function. The worker pulls the parameters, leases the batch and pushes
// the gradient as it does for troupe's own models, under the same
// supervision; an external_step computes the gradient in between.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "caf/expected.hpp"
#include "models/eval_result.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// The parameters of one step as the worker pulled them: one block per
/// shard, each that shard's range of the flat vector. A block is shared
/// with the shard (in one process) or is the buffer the data plane read
/// into, and must not be written.
struct pulled_params {
  const param_layout* layout = nullptr;
  std::vector<flat_range> ranges;
  std::vector<std::shared_ptr<const std::vector<float>>> blocks;

  /// Tensor `t`'s values: in place when one block holds all of it, else
  /// (a tensor the shard split cut through) gathered into `scratch`.
  const float* tensor(const tensor_slot& t, std::vector<float>& scratch) const;

  /// The block that holds all of tensor `t` (what keeps tensor()'s
  /// pointer valid), or null when the shard split cuts through it.
  std::shared_ptr<const std::vector<float>>
  block_holding(const tensor_slot& t) const;
};

class external_step {
public:
  virtual ~external_step() = default;

  /// The gradient of the batch's mean loss at `params` for samples
  /// `samples` (indices into the user's training set), written to `grads`
  /// (layout.total() floats, layout order); returns the batch's loss sum
  /// and hits. An error fails the step: the worker ends with it, and the
  /// chief restarts the worker, counted against the restart intensity.
  virtual caf::expected<batch_loss> step(const pulled_params& params,
                                         const std::vector<uint32_t>& samples,
                                         float* grads) = 0;
};

/// Makes worker `id`'s step: each worker has its own.
using external_step_factory =
  std::function<std::shared_ptr<external_step>(int32_t worker)>;

/// Scores the parameters with the user's own code (the Python module's
/// evaluate function) on the user's own test set. The chief calls it
/// where troupe's own models are evaluated (every eval_every_steps, at
/// the end, for target_accuracy); `params` is one block holding the
/// whole flat vector. An error ends the run with it.
using external_evaluator =
  std::function<caf::expected<eval_result>(const pulled_params&)>;

} // namespace troupe

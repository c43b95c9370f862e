// A model troupe does not compute: the user's own (model.type "external"),
// whose training step runs outside troupe, e.g. the Python module's step
// function. The worker pulls the parameters, leases the batch and pushes
// the gradient as it does for troupe's own models, under the same
// supervision; an external_step computes the gradient in between.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "models/eval_result.hpp"
#include "runtime/base/errc.hpp"
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

/// One embedding table's part of a step: the batch's keys, the row of
/// each distinct key as the shards hold it, and (written by the step) each
/// distinct key's gradient. models/table_batch.hpp fills in all but the
/// keys and the gradients.
struct table_rows {
  int32_t table = 0; ///< its index in model.tables
  std::string name;
  int dim = 0;
  /// samples x width keys, sample after sample; -1: no key there (a bag
  /// shorter than the widest).
  std::vector<int64_t> keys;
  size_t width = 0;
  /// The distinct keys, in the order they first occur in `keys`.
  std::vector<int64_t> unique;
  /// samples x width: each key's index in `unique`; -1 where `keys` is.
  std::vector<int64_t> inverse;
  /// unique.size() x dim: the rows, pulled. Shared so that a view handed
  /// to the step's code may outlive the step.
  std::shared_ptr<std::vector<float>> values;
  /// unique.size() x dim: the gradient of the batch's mean loss with
  /// respect to each distinct key's row (summed over its occurrences).
  std::vector<float> grads;
};

class external_step {
public:
  virtual ~external_step() = default;

  /// The keys of `samples`' rows, one entry per table of the model (its
  /// keys and width set; the other fields are the caller's). An error
  /// (a key source that fails) fails the step as step() does.
  virtual caf::error batch_keys(const std::vector<uint32_t>& /*samples*/,
                                std::vector<table_rows>& /*tables*/) {
    return {};
  }

  /// The gradient of the batch's mean loss at `params` for samples
  /// `samples` (indices into the user's training set), written to `grads`
  /// (layout.total() floats, layout order); returns the batch's loss sum
  /// and hits. An error fails the step: the worker ends with it, and the
  /// chief restarts the worker, counted against the restart intensity.
  virtual caf::expected<batch_loss> step(const pulled_params& params,
                                         const std::vector<uint32_t>& samples,
                                         float* grads) = 0;

  /// The step of a model with embedding tables: as above, and the
  /// gradient of each table's rows into its table_rows::grads. What the
  /// worker calls; by default (a step of no tables) the step above, which
  /// a model with tables refuses (errc::bad_step).
  virtual caf::expected<batch_loss> step(const pulled_params& params,
                                         const std::vector<uint32_t>& samples,
                                         float* grads,
                                         std::vector<table_rows>& tables) {
    if (!tables.empty())
      return make_error(errc::bad_step,
                        "the model has embedding tables, and its step takes "
                        "none");
    return step(params, samples, grads);
  }
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

// A click-through model in the style of wide-and-deep's deep part: every
// categorical field's values are looked up in one sparse embedding table
// and mean-pooled per field (multi-valued fields included), concatenated
// with the numeric fields, and fed to an MLP whose two-way softmax is the
// logistic output (softmax of (l0, l1) is sigmoid(l1 - l0)). Scored by
// log-loss and ROC AUC.
//
// This is the model in one process: the table is local, the dense part
// runs on a host compute backend and its own optimizer. The step keeps the
// parameter server's shape (pull the batch's rows once each, push their
// gradients once each), so a worker can swap the local table for shards.
#pragma once

#include <memory>
#include <vector>

#include "caf/expected.hpp"
#include "models/click_batch.hpp"
#include "models/model.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/params/optimizer.hpp"
#include "runtime/sparse/sparse_table.hpp"

namespace troupe {

struct click_model_config {
  int dim = 8;                     ///< embedding width
  std::vector<int> hidden{64, 32}; ///< the MLP's hidden layers
  int batch_size = 256;
  uint64_t seed = 1;
  optimizer_config dense;         ///< the MLP's (adam 0.001 by default)
  sparse_optimizer_config sparse; ///< the table's (adagrad 0.05 by default)

  click_model_config() {
    dense.type = optimizer_config::kind::adam;
    dense.learning_rate = 0.001;
  }
};

struct click_scores {
  double log_loss = 0, auc = 0;
  int64_t count = 0;
};

class click_model {
public:
  /// errc::invalid_config for a backend that is not on the host (the
  /// dense optimizer runs on host memory) or a shape the MLP refuses.
  static caf::expected<std::unique_ptr<click_model>>
  make(const click_schema& schema, const click_model_config& cfg,
       compute_backend& be);

  /// One step on samples idx[0..n) of `d` (n <= batch_size): pull, forward,
  /// backward, push. Returns the batch's mean log-loss.
  double train_step(const click_data& d, const uint32_t* idx, int n);

  /// Click probabilities of every sample of `d`, and their scores.
  click_scores evaluate(const click_data& d, std::vector<double>* p = nullptr);

  sparse_table& table() { return *table_; }
  model& dense() { return *mlp_; }
  int64_t steps() const { return steps_; }

private:
  click_model(const click_schema& schema, const click_model_config& cfg,
              std::unique_ptr<model> mlp);
  /// Plans the batch and pulls its rows from the table: batch_.inputs()
  /// is then ready.
  void pull_rows(const click_data& d, const uint32_t* idx, int n);

  click_schema schema_;
  click_model_config cfg_;
  std::unique_ptr<model> mlp_;
  std::unique_ptr<sparse_table> table_;
  optimizer dense_opt_;
  int64_t steps_ = 0;
  click_batch batch_; ///< one shard: the local table
  std::vector<float> input_grad_;
  std::vector<int32_t> labels_;
};

} // namespace troupe

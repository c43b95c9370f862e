// The step of a click model: the embedding rows of the leased batch are
// pulled from the shards that hold them (each distinct row once, from its
// own shard only), the MLP trains on the pooled rows, and each shard gets
// the gradients of the rows it sent. Click logs streamed from their parts
// are read here, with the batch's rows; logs held in memory are read as
// any batch is.
#include <numeric>

#include "actors/timing.hpp"
#include "actors/worker/model_step.hpp"
#include "models/click_batch.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

class click_step : public model_step {
public:
  click_step(model_parts parts, int32_t shards)
    : model_step(std::move(parts)), clicks_(planner(shards)) {}

  void take_ranges(const std::vector<flat_range>& ranges) override {
    clicks_ = planner(static_cast<int32_t>(ranges.size()));
  }

  caf::expected<std::vector<row_request>> rows_needed(const lease_grant& lease,
                                                      int32_t worker) override {
    auto n = static_cast<int>(lease.samples.size());
    if (train_.click_parts) {
      auto t0 = now_seconds();
      click_read_stats cost;
      auto rows = train_.click_parts->read(lease.samples.data(), n, &cost);
      cost_.seconds += now_seconds() - t0;
      cost_.bytes += cost.file_bytes;
      if (!rows) // a changed part keeps its kind: a restart cannot mend it
        return make_error(rows.error() == errc::data_changed
                            ? errc::data_changed
                            : errc::worker_failed,
                          who() + ": " + describe(rows.error()));
      rows_ = std::move(*rows);
      order_.resize(static_cast<size_t>(n));
      std::iota(order_.begin(), order_.end(), 0u);
      clicks_->plan(rows_, rows_.numeric.data(), order_.data(), n);
    } else {
      clicks_->plan(*train_.clicks, train_.features.contiguous_floats(),
                    lease.samples.data(), n);
    }
    asked_ = clicks_->holding();
    std::vector<row_request> out;
    for (auto shard : asked_)
      out.push_back(row_request{shard, 0, worker, clicks_->ids(shard)});
    return out;
  }

  caf::error take_rows(const std::vector<row_block>& blocks) override {
    const auto dim = static_cast<size_t>(cfg_.model.table.dim);
    for (size_t i = 0; i < blocks.size(); ++i) {
      auto want = clicks_->ids(asked_[i]).size() * dim;
      if (!blocks[i].values || blocks[i].values->size() != want)
        return make_error(errc::wrong_size, "rows from shard "
                                              + std::to_string(asked_[i])
                                              + " are not the rows asked for");
      clicks_->set_rows(asked_[i], blocks[i].values->data());
    }
    return {};
  }

  caf::expected<batch_loss> compute(const lease_grant& lease, int64_t,
                                    const gradient_buffer& grads) override {
    auto n = static_cast<int>(lease.samples.size());
    if (train_.click_parts) { // read with the batch's rows
      for (int i = 0; i < n; ++i)
        batch_.labels()[i] = rows_.labels[static_cast<size_t>(i)] > 0.5f;
    } else if (auto err = read(lease)) {
      return err;
    }
    // The host backend (checked at start): the gradients land in place.
    (void)replica_->bind_grads(grads());
    input_grad_.resize(static_cast<size_t>(n) * clicks_->input_size());
    auto loss = replica_->forward_backward(clicks_->inputs(), batch_.labels(),
                                           n, input_grad_.data());
    clicks_->backward(input_grad_.data());
    return loss;
  }

  std::vector<row_push>
  rows_to_push(int32_t worker, int64_t batch,
               const std::vector<int64_t>& versions) override {
    // Tagged as the dense push that follows to the same shard (sync: the
    // shard takes or drops both together).
    std::vector<row_push> out;
    for (auto s : clicks_->holding())
      out.push_back(row_push{
        s, 0, worker, batch, versions[static_cast<size_t>(s)], clicks_->ids(s),
        std::make_shared<const std::vector<float>>(clicks_->row_grads(s))});
    return out;
  }

private:
  /// The batch planner for `shards` shards.
  std::unique_ptr<click_batch> planner(int32_t shards) const {
    return std::make_unique<click_batch>(cfg_.data.click_numeric,
                                         cfg_.model.table_fields,
                                         cfg_.model.table.dim, shards);
  }

  std::unique_ptr<click_batch> clicks_;
  std::vector<int32_t> asked_; ///< the shards asked for rows, in order
  /// The gradient of the MLP's inputs, which flows back into the rows.
  std::vector<float> input_grad_;
  /// Streamed logs: the leased batch's samples, read from their parts
  /// (samples 0..n-1 in the lease's order).
  click_data rows_;
  std::vector<uint32_t> order_;
};

} // namespace

std::unique_ptr<step_kind> make_click_step(model_parts parts, int32_t shards) {
  return std::make_unique<click_step>(std::move(parts), shards);
}

} // namespace troupe

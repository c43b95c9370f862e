// EASGD's step (cluster.consistency "easgd"): the worker trains its own
// replica with its own optimizer, pulling nothing; every tau steps it
// pulls the center the shards hold, moves its replica toward it and
// pushes the elastic difference, which the shards add to the center (TF's
// ElasticAverageOptimizer). It starts from the center.
#include <cstring>

#include "actors/worker/model_step.hpp"
#include "models/trainer.hpp"

namespace troupe {

namespace {

class elastic_step : public model_step {
public:
  explicit elastic_step(model_parts parts)
    : model_step(std::move(parts)), local_(*replica_, cfg_.training.optimizer),
      center_(replica_->layout().total()) {}

  /// The pulled values are the center; the replica stays as it trained.
  void take_values(
    size_t, const flat_range& r,
    const std::shared_ptr<const std::vector<float>>& values) override {
    std::memcpy(center_.data() + r.begin, values->data(),
                r.size() * sizeof(float));
  }

  bool starts_from_values() const override { return true; }
  void start_from_values() override { replica_->set_params(center_.data()); }
  bool pulls_each_step() const override { return false; }

  caf::expected<batch_loss> compute(const lease_grant& lease, int64_t,
                                    const gradient_buffer&) override {
    if (auto err = read(lease))
      return err;
    return local_.step(batch_.inputs(), batch_.targets(),
                       static_cast<int>(lease.samples.size()));
  }

  step_push push_after(int64_t clock) const override {
    return (clock + 1) % cfg_.cluster.tau != 0 ? step_push::none
                                               : step_push::elastic;
  }

  std::shared_ptr<const std::vector<float>> elastic_difference() override {
    std::vector<float> local(center_.size());
    replica_->get_params(local.data());
    auto alpha = static_cast<float>(cfg_.cluster.elastic_rate());
    // diff = local - center; local -= alpha * diff; the shard then does
    // center += alpha * diff.
    auto diff = std::make_shared<std::vector<float>>(local.size());
    for (size_t i = 0; i < local.size(); ++i) {
      (*diff)[i] = local[i] - center_[i];
      local[i] -= alpha * (*diff)[i];
    }
    replica_->set_params(local.data());
    return diff;
  }

private:
  local_trainer local_;
  std::vector<float> center_; ///< the shards' values, as last pulled
};

} // namespace

std::unique_ptr<step_kind> make_elastic_step(model_parts parts) {
  return std::make_unique<elastic_step>(std::move(parts));
}

} // namespace troupe

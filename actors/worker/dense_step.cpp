// The step of troupe's own dense models: forward/backward on the leased
// batch, the gradient written where the shards read it.
#include "actors/worker/model_step.hpp"

namespace troupe {

namespace {

class dense_step : public model_step {
public:
  explicit dense_step(model_parts parts) : model_step(std::move(parts)) {}

  caf::expected<batch_loss> compute(const lease_grant& lease, int64_t,
                                    const gradient_buffer& grads) override {
    if (auto err = read(lease))
      return err;
    auto n = static_cast<int>(lease.samples.size());
    auto* g = grads();
    // On a host backend the gradient lands in the pushed buffer itself.
    bool in_place = backend_->host_accessible();
    if (in_place)
      (void)replica_->bind_grads(g);
    auto loss = replica_->forward_backward(batch_.inputs(), batch_.targets(),
                                           n);
    if (!in_place)
      replica_->get_grads(g);
    return loss;
  }
};

} // namespace

std::unique_ptr<step_kind> make_dense_step(model_parts parts) {
  return std::make_unique<dense_step>(std::move(parts));
}

} // namespace troupe

// The step of a model troupe does not compute (model.type "external"):
// the pulled blocks go as they are to the user's step function (the
// Python module's), and the gradient it writes is pushed like any other.
#include "actors/worker/step_kind.hpp"

#include "actors/worker/worker.hpp"
#include "models/external_step.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

class external_model_step : public step_kind {
public:
  external_model_step(const worker_options& opts)
    : worker_(opts.id), step_(opts.external) {
    pulled_.layout = opts.layout.get();
    take_ranges(opts.ranges);
  }

  size_t flat_size() const override { return pulled_.layout->total(); }

  void take_values(
    size_t i, const flat_range&,
    const std::shared_ptr<const std::vector<float>>& values) override {
    pulled_.blocks[i] = values;
  }

  void take_ranges(const std::vector<flat_range>& ranges) override {
    pulled_.ranges = ranges;
    pulled_.blocks.assign(ranges.size(), nullptr);
  }

  caf::expected<batch_loss> compute(const lease_grant& lease, int64_t clock,
                                    const gradient_buffer& grads) override {
    auto loss = step_->step(pulled_, lease.samples, grads());
    if (loss)
      return loss;
    // A result the step's contract refuses is kept as such: the chief
    // ends the run instead of restarting the worker.
    return make_error(
      loss.error() == errc::bad_step ? errc::bad_step : errc::worker_failed,
      "worker " + std::to_string(worker_) + ": step " + std::to_string(clock)
        + ": " + describe(loss.error()));
  }

private:
  int32_t worker_;
  std::shared_ptr<external_step> step_;
  pulled_params pulled_; ///< this step's values, as the shards sent them
};

} // namespace

std::unique_ptr<step_kind>
make_external_model_step(const worker_options& opts) {
  return std::make_unique<external_model_step>(opts);
}

} // namespace troupe

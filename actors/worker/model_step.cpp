#include "actors/worker/model_step.hpp"

#include "runtime/base/errc.hpp"

namespace troupe {

model_step::model_step(model_parts parts)
  : worker_(parts.worker), cfg_(*parts.cfg), train_(*parts.train),
    backend_(std::move(parts.backend)), replica_(std::move(parts.replica)),
    batch_(train_, *backend_, static_cast<size_t>(cfg_.training.batch_size)) {}

caf::error model_step::read(const lease_grant& lease) {
  if (auto err = batch_.read(lease.samples, cost_))
    return make_error(errc::data_changed, who() + ": " + describe(err));
  return {};
}

} // namespace troupe

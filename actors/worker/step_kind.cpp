// make_step_kind: the one place that picks a worker's kind of step from
// its model's type and consistency mode, and sets its model up.
#include "actors/worker/step_kind.hpp"

#include <exception>

#include "actors/worker/model_step.hpp"
#include "actors/worker/worker.hpp"
#include "models/backend_factory.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

std::unique_ptr<step_kind> make_external_model_step(const worker_options&);

caf::expected<std::unique_ptr<step_kind>>
make_step_kind(const worker_options& opts) {
  const auto& cfg = opts.cfg;
  const auto& train = opts.data->train;
  auto who = "worker " + std::to_string(opts.id);
  if (cfg.model.type == model_config::kind::external) {
    if (!opts.external || !opts.layout)
      return make_error(errc::invalid_config,
                        who
                          + ": an external model's workers run the user's "
                            "step function (the Python module's workers); "
                            "this node has none to run");
    return make_external_model_step(opts);
  }
  // The model's device buffers are allocated here; a device that fails
  // then (out of memory, say) ends the worker like a failure in a step.
  model_parts parts;
  parts.worker = opts.id;
  parts.cfg = &cfg;
  parts.train = &train;
  auto backend = make_backend(cfg.training.device, cfg.training.threads);
  if (!backend)
    return backend.error();
  parts.backend = std::move(*backend);
  try {
    auto made = make_model(cfg.model, train.height, train.width, train.channels,
                           train.classes, *parts.backend);
    if (!made)
      return made.error();
    parts.replica = std::move(*made);
  } catch (const std::exception& e) {
    return make_error(errc::worker_failed,
                      who + " could not set up its model on "
                        + parts.backend->describe() + ": " + e.what());
  }
  // Dropout masks of its own: workers of one seed would otherwise drop the
  // same units in every step (troupe-train's model is stream 0).
  parts.replica->set_random_stream(static_cast<uint64_t>(opts.id) + 1);
  if (cfg.model.type == model_config::kind::click) {
    if (!parts.backend->host_accessible()
        || (!train.clicks && !train.click_parts))
      return make_error(
        errc::invalid_config,
        who + ": a click model trains on "
          + (train.clicks || train.click_parts
               ? "the CPU backend, not " + parts.backend->describe()
               : std::string{"click logs (data.format \"click\")"}));
    return make_click_step(std::move(parts),
                           static_cast<int32_t>(opts.shards.size()));
  }
  if (cfg.cluster.consistency == cluster_config::mode::easgd)
    return make_elastic_step(std::move(parts));
  return make_dense_step(std::move(parts));
}

} // namespace troupe

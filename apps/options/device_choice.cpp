#include "apps/options/device_choice.hpp"

#include "models/backend_factory.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

void add_device_option(CLI::App& app, std::optional<device_spec>& out,
                       const std::string& help) {
  auto valid = [](std::string& text) -> std::string {
    return parse_device(text) ? "" : bad_device_message(text);
  };
  app
    .add_option_function<std::string>(
      "--device", [&out](const std::string& text) { out = parse_device(text); },
      help)
    ->check(CLI::Validator{valid, "cpu|gpu|gpu:N"});
}

caf::error choose_device(run_config& cfg, const std::string& node,
                         const std::optional<device_spec>& flag) {
  std::string where = cfg.origin + ": /training/device";
  auto& nodes = cfg.cluster.nodes;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == node && nodes[i].device) {
      cfg.training.device = *nodes[i].device;
      where = cfg.origin + ": /cluster/nodes/" + std::to_string(i) + "/device";
    }
  if (flag) {
    cfg.training.device = *flag;
    where = "--device";
  }
  // A click model's worker keeps its batch's rows and the MLP's gradients
  // in host memory (actors/worker/worker.cpp): refused here, once, rather than
  // by every worker as it starts (and by the chief restarting them).
  if (cfg.model.type == model_config::kind::click
      && cfg.training.device.is_gpu())
    return make_error(errc::invalid_config,
                      where + ": " + cfg.training.device.to_string()
                        + " was asked for, but a click model's workers "
                          "train on the CPU (its rows and the MLP's "
                          "update live in host memory)");
  return check_device(cfg.training.device, where);
}

} // namespace troupe

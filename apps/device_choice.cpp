#include "apps/device_choice.hpp"

#include "actors/backend_factory.hpp"
#include "runtime/errc.hpp"

namespace troupe {

caf::error choose_device(run_config& cfg, const std::string& node,
                         const std::string& device_flag) {
  std::string where = cfg.origin + ": /training/device";
  auto& nodes = cfg.cluster.nodes;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == node && nodes[i].device) {
      cfg.training.device = *nodes[i].device;
      where = cfg.origin + ": /cluster/nodes/" + std::to_string(i)
              + "/device";
    }
  if (!device_flag.empty()) {
    auto spec = parse_device(device_flag);
    if (!spec)
      return make_error(errc::invalid_config,
                        "--device: expected \"cpu\", \"gpu\" or \"gpu:N\", "
                        "found \"" + device_flag + "\"");
    cfg.training.device = *spec;
    where = "--device";
  }
  return check_device(cfg.training.device, where);
}

} // namespace troupe

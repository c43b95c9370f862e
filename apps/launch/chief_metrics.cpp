#include "apps/launch/chief_metrics.hpp"

#include "apps/metrics/prometheus_text.hpp"
#include "caf/scoped_actor.hpp"

namespace troupe {

metrics_endpoint::render_fn chief_metrics(caf::actor_system& sys,
                                          std::shared_ptr<chief_slot> slot,
                                          caf::timespan timeout) {
  return [&sys, slot, timeout](std::string& text) {
    auto chief = slot->get();
    if (!chief) {
      text = "troupe: the run has not started or is over";
      return false;
    }
    bool ok = false;
    caf::scoped_actor self{sys};
    self->request(chief, timeout, stats_atom_v)
      .receive(
        [&](cluster_view& v) {
          text = prometheus_text(v, own_process_usage());
          ok = true;
        },
        [&](caf::error& err) {
          text = "troupe: the chief did not answer: " + to_string(err);
        });
    return ok;
  };
}

caf::expected<std::unique_ptr<metrics_endpoint>> serve_chief_metrics(
  caf::actor_system& sys, const std::pair<std::string, uint16_t>& at,
  std::shared_ptr<chief_slot> slot, caf::timespan timeout, std::ostream* log) {
  auto started = metrics_endpoint::start(
    at.first, at.second, chief_metrics(sys, std::move(slot), timeout));
  if (started && log)
    *log << "metrics: " << (*started)->url() << std::endl;
  return started;
}

} // namespace troupe

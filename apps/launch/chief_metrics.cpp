#include "apps/launch/chief_metrics.hpp"

#include "apps/launch/chief_api.hpp"
#include "apps/launch/view_poller.hpp"
#include "apps/metrics/prometheus_text.hpp"
#include "apps/web/page_files.hpp"
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
  // The /api/ views read the poller's view; it lives as long as the
  // endpoint's handler, which the endpoint's end lets go of last.
  auto poller = std::make_shared<view_poller>(sys, slot, timeout);
  auto started = metrics_endpoint::start(
    at.first, at.second, chief_metrics(sys, std::move(slot), timeout),
    [poller](const http_request& req) {
      if (auto api = chief_api(*poller, req))
        return api;
      return page_answer(req);
    });
  if (started && log)
    *log << "metrics: " << (*started)->url() << "\npage: http://"
         << (*started)->host() << ":" << (*started)->port() << "/" << std::endl;
  return started;
}

} // namespace troupe

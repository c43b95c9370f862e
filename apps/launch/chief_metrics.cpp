#include "apps/launch/chief_metrics.hpp"

#include "actors/net/remote.hpp"
#include "apps/metrics/view_api.hpp"
#include "apps/metrics/metrics_history.hpp"
#include "apps/launch/page_steering.hpp"
#include "apps/launch/view_poller.hpp"
#include "apps/metrics/prometheus_text.hpp"
#include "apps/web/page_files.hpp"
#include "caf/scoped_actor.hpp"
#include "runtime/base/errc.hpp"

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

caf::expected<cluster_key> page_steering_key(caf::actor_system& sys,
                                             const std::string& key_file,
                                             std::ostream* log) {
  auto security = security_of(sys);
  if (security->guard && security->guard->key() != nullptr)
    return *security->guard->key();
  bool made = false;
  auto key = load_or_make_key(key_file.empty() ? default_key_path() : key_file,
                              made);
  if (key && made && log)
    *log << "cluster key: made " << describe(*key)
         << " (the page steers with it)" << std::endl;
  return key;
}

chief_port::chief_port(std::unique_ptr<metrics_endpoint> endpoint,
                       std::shared_ptr<view_poller> views)
  : endpoint_(std::move(endpoint)), views_(std::move(views)) {}

chief_port::~chief_port() = default;

void chief_port::close(const caf::expected<cluster_summary>& result) {
  if (result)
    views_->finish("done", "", &*result);
  else
    views_->finish("failed", describe(result.error()), nullptr);
  views_->wait_for_watchers(std::chrono::seconds(5));
  endpoint_.reset();
}

caf::expected<std::unique_ptr<chief_port>>
serve_chief_metrics(caf::actor_system& sys,
                    const std::pair<std::string, uint16_t>& at,
                    std::shared_ptr<chief_slot> slot, caf::timespan timeout,
                    chief_port_parts parts, std::ostream* log) {
  // The /api/ views read the poller's view; it and the steering live as
  // long as the endpoint's handler, which the endpoint's end lets go of
  // last.
  auto poller = std::make_shared<view_poller>(sys, slot, timeout);
  // A steering command the chief has not answered in 8 s is reported as
  // such, before the port's 10 s for a request runs out.
  auto steering = std::make_shared<page_steering>(
    sys, slot, std::move(parts.steering_key), std::chrono::seconds(8));
  auto started = metrics_endpoint::start(
    at.first, at.second, chief_metrics(sys, std::move(slot), timeout),
    [poller, steering, tail = std::move(parts.tail),
     dir = std::move(parts.metrics_dir)](const http_request& req) {
      if (auto steer = steering->answer(req))
        return steer;
      if (auto runs = metrics_history(dir, req))
        return runs;
      // The poller's latest view, kept alive while the answer is made.
      std::shared_ptr<const view_poller::snapshot> held;
      auto latest = [&] {
        held = poller->latest();
        if (!held)
          return api_view{nullptr, {}, "the chief has not answered yet"};
        if (!held->answered)
          return api_view{nullptr, {}, held->error};
        return api_view{&held->view, held->taken, {}};
      };
      if (auto api = view_api(latest, tail.get(), req))
        return api;
      return page_answer(req);
    });
  if (!started)
    return started.error();
  if (log)
    *log << "metrics: " << (*started)->url() << "\npage: http://"
         << (*started)->host() << ":" << (*started)->port() << "/" << std::endl;
  return std::make_unique<chief_port>(std::move(*started), std::move(poller));
}

} // namespace troupe

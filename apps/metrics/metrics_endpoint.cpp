#include "apps/metrics/metrics_endpoint.hpp"

#include <httplib.h>

#include "runtime/base/host_port.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

caf::expected<std::pair<std::string, uint16_t>>
parse_metrics_listen(const std::string& text) {
  auto at = parse_address(text, 0);
  if (!at)
    return make_error(errc::invalid_config,
                      "--metrics-listen: " + describe(at.error()));
  return at;
}

caf::expected<std::unique_ptr<metrics_endpoint>>
metrics_endpoint::start(const std::string& host, uint16_t port,
                        render_fn render) {
  std::unique_ptr<metrics_endpoint> e{new metrics_endpoint};
  e->server_ = std::make_unique<httplib::Server>();
  auto& s = *e->server_;
  // One scrape at a time is plenty for a dashboard and keeps an idle
  // endpoint at one sleeping thread (httplib's default pool has 8 or more).
  s.new_task_queue = [] { return new httplib::ThreadPool(1); };
  // A client that sends nothing, or too much, is closed quickly.
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_timeout(5);
  s.set_payload_max_length(4096);
  s.Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    std::string text;
    if (render(text)) {
      res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
    } else {
      res.status = 503;
      res.set_content(text + "\n", "text/plain; charset=utf-8");
    }
  });
  int bound = port == 0 ? s.bind_to_any_port(host)
                        : (s.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    // The address came from the command line: bad input (exit 2).
    return make_error(errc::invalid_config,
                      "metrics endpoint: cannot listen at " + host + ":"
                        + std::to_string(port)
                        + " (taken, or not an address of this host)");
  e->host_ = host;
  e->port_ = static_cast<uint16_t>(bound);
  auto* server = e->server_.get();
  e->thread_ = std::thread{[server] { server->listen_after_bind(); }};
  return e;
}

metrics_endpoint::~metrics_endpoint() {
  if (server_)
    server_->stop();
  if (thread_.joinable())
    thread_.join();
}

std::string metrics_endpoint::url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/metrics";
}

} // namespace troupe

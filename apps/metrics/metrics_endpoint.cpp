#include "apps/metrics/metrics_endpoint.hpp"

#include "apps/web/http_server.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/host_port.hpp"

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
                        render_fn render, more_fn more) {
  auto serve = [render, more](const http_request& req) {
    http_response res;
    if (req.path != "/metrics" && more) {
      if (auto answer = more(req))
        return std::move(*answer);
    }
    if (req.path != "/metrics") {
      res.status = 404;
      res.body = "not found: " + req.path + "\n";
    } else if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.headers.emplace_back("Allow", "GET, HEAD");
      res.body = "/metrics is read with GET\n";
    } else if (std::string text; render(text)) {
      res.content_type = "text/plain; version=0.0.4; charset=utf-8";
      res.body = std::move(text);
    } else {
      res.status = 503;
      res.body = text + "\n";
    }
    return res;
  };
  auto server = http_server::start(host, port, std::move(serve));
  if (!server)
    return server.error();
  std::unique_ptr<metrics_endpoint> e{new metrics_endpoint};
  e->server_ = std::move(*server);
  return e;
}

metrics_endpoint::~metrics_endpoint() = default;

uint16_t metrics_endpoint::port() const {
  return server_->port();
}

const std::string& metrics_endpoint::host() const {
  return server_->host();
}

std::string metrics_endpoint::url() const {
  return "http://" + host() + ":" + std::to_string(port()) + "/metrics";
}

} // namespace troupe

// An HTTP endpoint that serves GET /metrics in the Prometheus text format
// on a thread of its own (apps/web/http_server.hpp: idle or slow clients
// keep no scrape waiting). What it serves comes from `render`, called once
// per scrape on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "apps/web/http_server.hpp"

#include "caf/expected.hpp"

namespace troupe {

/// The HOST:PORT of a --metrics-listen flag (port 0 allowed: any free
/// one); errc::invalid_config naming the flag and the text otherwise.
caf::expected<std::pair<std::string, uint16_t>>
parse_metrics_listen(const std::string& text);

class metrics_endpoint {
public:
  /// The exposition text, or an error text (then the scrape gets 503).
  using render_fn = std::function<bool(std::string& text)>;

  /// What else the port serves: the answer for a path other than
  /// /metrics, or nullopt (404).
  using more_fn =
    std::function<std::optional<http_response>(const http_request&)>;

  /// Listens at `host`:`port` (0: a free port, see port()).
  /// errc::invalid_config naming the address when it cannot bind.
  static caf::expected<std::unique_ptr<metrics_endpoint>>
  start(const std::string& host, uint16_t port, render_fn render,
        more_fn more = {});

  ~metrics_endpoint(); ///< stops serving; waits for a scrape under way

  uint16_t port() const;
  const std::string& host() const;
  /// "http://HOST:PORT/metrics".
  std::string url() const;

  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

private:
  metrics_endpoint() = default;
  std::unique_ptr<http_server> server_;
};

} // namespace troupe

// An HTTP/1.1 server on one thread of its own, for what the chief's
// metrics port serves (/metrics today). One epoll loop holds every
// connection, so an idle or slow client costs a buffer and a descriptor
// and never keeps another waiting: with a thread per connection (the pool
// of cpp-httplib used before), 200 idle connections silenced /metrics for
// as long as they stayed open.
//
// The rules a client meets: a request must arrive whole within
// `request_timeout` of the connection's opening or of the previous answer
// (sending a byte a second does not extend it); a connection kept alive
// that sends nothing for as long is closed; past `max_connections` the
// connection waiting longest is closed to make room; when the process is
// out of descriptors, the newest connection is closed at once rather than
// left in the backlog. Every answer says Cache-Control: no-store and
// X-Content-Type-Options: nosniff unless its handler says otherwise.
//
// A handler that must wait for its answer (a steering command the chief
// answers) defers it (http_response::later): the connection waits, read no
// further, while every other connection is served, until the answer is
// given from any thread or the request's time runs out.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "apps/web/http_request.hpp"
#include "caf/expected.hpp"

namespace troupe {

struct http_response;

/// Gives a deferred request its answer; callable from any thread, once
/// (later calls, and calls after the connection closed or the server
/// stopped, do nothing).
using http_reply = std::function<void(http_response)>;

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  /// More headers ("Location", "Cache-Control" to replace no-store, ...).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Set: the answer comes later. The server calls it at once, on its
  /// thread, with the reply to give when the answer is known; the rest of
  /// this response is not sent.
  std::function<void(http_reply)> later;
};

/// Answers one request; runs on the server's thread, so it must not wait
/// long (what it serves should be at hand, or fetched with a timeout).
using http_handler = std::function<http_response(const http_request&)>;

struct http_server_options {
  http_limits limits;
  size_t max_connections = 1024;
  std::chrono::milliseconds request_timeout{10000};
};

class http_server {
public:
  /// Listens at `host`:`port` (0: a free port, see port()).
  /// errc::invalid_config naming the address when it cannot bind.
  static caf::expected<std::unique_ptr<http_server>>
  start(const std::string& host, uint16_t port, http_handler handler,
        http_server_options options = {});

  ~http_server(); ///< stops serving; waits for an answer under way

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  /// The connections open now (for tests and the page's own figures).
  size_t connections() const { return open_.load(); }

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

private:
  struct loop;
  http_server() = default;
  std::unique_ptr<loop> loop_;
  std::thread thread_;
  std::string host_;
  uint16_t port_ = 0;
  std::atomic<size_t> open_{0};
};

/// The answer's bytes as they go on the wire (no body for HEAD).
std::string http_answer_bytes(const http_response& r, bool keep_alive,
                              bool head_only);

} // namespace troupe

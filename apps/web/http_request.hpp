// One HTTP/1.1 request read from a connection's bytes, for the chief's
// page and /metrics. The reader takes what has arrived so far and says
// whether a whole request is there, more is needed, or the bytes can never
// be a request (then with the status to answer and why). It accepts what
// a browser, curl and Prometheus send (a request line, headers, a body of
// Content-Length bytes) within small limits and refuses the rest: chunked
// bodies, bare LF line ends, control characters, oversized parts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

struct http_request {
  std::string method; ///< "GET", "POST", ...
  std::string path;   ///< "/api/status", decoded; always starts '/'
  std::string query;  ///< after '?', as sent; "" when none
  std::vector<std::pair<std::string, std::string>> headers; ///< names lower
  std::string body;
  bool keep_alive = true; ///< HTTP/1.1 unless "Connection: close"

  /// The value of header `name` (lower case); nullptr when absent.
  const std::string* header(std::string_view name) const;
};

struct http_limits {
  size_t max_head_bytes = 8192; ///< request line and headers
  size_t max_body_bytes = 4096;
};

struct http_read {
  enum class outcome { need_more, whole, bad } what = outcome::need_more;
  size_t used = 0; ///< whole: the request's bytes, from the front
  int status = 0;  ///< bad: 400, 413, 431, 501 or 505
  std::string why; ///< bad: what was wrong, for the answer's body
};

/// Reads the request at the front of `bytes` into `out`.
http_read read_http_request(std::string_view bytes, const http_limits& limits,
                            http_request& out);

/// "Not Found" for 404 and so on; "Unknown" for a code not used here.
const char* http_reason(int status);

} // namespace troupe

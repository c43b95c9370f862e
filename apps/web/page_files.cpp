#include "apps/web/page_files.hpp"

namespace troupe {

std::optional<http_response> page_answer(const http_request& req) {
  for (auto& f : page_files()) {
    if (req.path != f.path)
      continue;
    http_response r;
    if (req.method != "GET" && req.method != "HEAD") {
      r.status = 405;
      r.headers.emplace_back("Allow", "GET, HEAD");
      r.body = std::string{req.path} + " is read with GET\n";
      return r;
    }
    r.content_type = f.content_type;
    r.body = std::string{f.body};
    r.headers = {{"Content-Security-Policy",
                  "default-src 'none'; script-src 'self'; style-src 'self'; "
                  "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                  "form-action 'none'; frame-ancestors 'none'"},
                 {"X-Frame-Options", "DENY"},
                 {"Referrer-Policy", "no-referrer"}};
    return r;
  }
  return std::nullopt;
}

} // namespace troupe

// libFuzzer target: the request reader of the chief's metrics port
// (apps/web/http_request.hpp), fed what a client may send. Besides a
// crash or a sanitizer report, a finding is a broken promise (a trap):
//   a whole request uses no more bytes than it was given, its path starts
//     with '/', its body fits the limit, and every prefix of those bytes
//     reads as "need more" (a request that arrives in pieces is never
//     refused for being cut);
//   a refusal carries one of the statuses the server answers with, and why.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "apps/web/http_request.hpp"

namespace {

void check(bool promise) {
  if (!promise)
    __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using outcome = troupe::http_read::outcome;
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  troupe::http_limits limits;
  limits.max_head_bytes = 1024; // small, so the fuzzer reaches the edges
  limits.max_body_bytes = 256;
  troupe::http_request req;
  auto got = troupe::read_http_request(bytes, limits, req);
  switch (got.what) {
    case outcome::whole: {
      check(got.used <= size && got.used > 0);
      check(!req.path.empty() && req.path.front() == '/');
      check(req.body.size() <= limits.max_body_bytes);
      for (size_t cut : {size_t{0}, got.used / 2, got.used - 1}) {
        troupe::http_request part;
        check(troupe::read_http_request(bytes.substr(0, cut), limits, part).what
              == outcome::need_more);
      }
      break;
    }
    case outcome::bad:
      check(got.status == 400 || got.status == 413 || got.status == 431
            || got.status == 501 || got.status == 505);
      check(!got.why.empty());
      break;
    case outcome::need_more:
      check(size < limits.max_head_bytes + 4 + 256 + 1);
      break;
  }
  return 0;
}

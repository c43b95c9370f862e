// The HTTP request reader of the chief's metrics port: what a browser,
// curl and Prometheus send is read whole, a request cut anywhere waits for
// more, and what can never be a request is refused with its status and why.
#include "apps/web/http_request.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace troupe;
using outcome = http_read::outcome;

namespace {

http_read read(const std::string& bytes, http_request& out,
               http_limits limits = {}) {
  return read_http_request(bytes, limits, out);
}

int status_of(const std::string& bytes) {
  http_request r;
  auto got = read(bytes, r);
  BOOST_TEST_INFO(bytes.substr(0, 80));
  BOOST_TEST((got.what == outcome::bad));
  return got.status;
}

} // namespace

BOOST_AUTO_TEST_SUITE(http_request)

BOOST_AUTO_TEST_CASE(what_a_browser_sends_is_read_whole) {
  const std::string get = "GET /api/status?since=3 HTTP/1.1\r\n"
                          "Host: 127.0.0.1:9100\r\n"
                          "User-Agent: Mozilla/5.0\r\n"
                          "Accept: */*\r\n\r\n";
  troupe::http_request r;
  auto got = read(get + "GET /next", r);
  BOOST_TEST((got.what == outcome::whole));
  BOOST_TEST(got.used == get.size()); // the next request stays
  BOOST_TEST(r.method == "GET");
  BOOST_TEST(r.path == "/api/status");
  BOOST_TEST(r.query == "since=3");
  BOOST_TEST(*r.header("user-agent") == "Mozilla/5.0");
  BOOST_TEST(r.header("cookie") == nullptr);
  BOOST_TEST(r.keep_alive);
  // A body of Content-Length bytes; header names in any case.
  const std::string post = "POST /api/pause HTTP/1.1\r\nCONTENT-length: 5\r\n"
                           "Connection: close\r\n\r\nhello";
  got = read(post, r);
  BOOST_TEST((got.what == outcome::whole));
  BOOST_TEST(r.body == "hello");
  BOOST_TEST(!r.keep_alive);
  // Percent escapes in the path are decoded; HTTP/1.0 closes by default.
  got = read("GET /a%20b/%2e%2e HTTP/1.0\r\n\r\n", r);
  BOOST_TEST((got.what == outcome::whole));
  BOOST_TEST(r.path == "/a b/..");
  BOOST_TEST(!r.keep_alive);
  got = read("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", r);
  BOOST_TEST(r.keep_alive);
}

BOOST_AUTO_TEST_CASE(a_request_cut_anywhere_waits_for_more) {
  const std::string post = "POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  for (size_t cut = 0; cut < post.size(); ++cut) {
    troupe::http_request r;
    BOOST_TEST_INFO("cut at " << cut);
    BOOST_TEST((read(post.substr(0, cut), r).what == outcome::need_more));
  }
}

BOOST_AUTO_TEST_CASE(what_can_never_be_a_request_is_refused) {
  // A TLS ClientHello: a NUL, so never a request.
  BOOST_TEST(status_of(std::string("\x16\x03\x01\x02\x00\x01\x00\x01", 8))
             == 400);
  BOOST_TEST(status_of("GET /\n\n") == 400); // bare LF
  BOOST_TEST(status_of("GET / HTTP/1.1\r\nHost\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET / HTTP/1.1\r\n folded: x\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET / HTTP/2.0\r\n\r\n") == 505);
  BOOST_TEST(status_of("GET http://x/ HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET /a%zz HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET /a%00 HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET  / HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(status_of("G(T / HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(status_of("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n") == 400);
  BOOST_TEST(status_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == 400);
  BOOST_TEST(status_of("POST / HTTP/1.1\r\nContent-Length: 1\r\n"
                       "Content-Length: 1\r\n\r\nx")
             == 400);
  BOOST_TEST(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
             == 501);
  BOOST_TEST(status_of("POST / HTTP/1.1\r\nContent-Length: 4097\r\n\r\n")
             == 413);
  // A head over the limit, whole or not.
  std::string big = "GET / HTTP/1.1\r\nX: " + std::string(9000, 'a');
  BOOST_TEST(status_of(big) == 431);
  BOOST_TEST(status_of(big + "\r\n\r\n") == 431);
  troupe::http_request r;
  auto got = read("POST / HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", r);
  BOOST_TEST(got.why == "a body of 4097 bytes (at most 4096)");
}

BOOST_AUTO_TEST_SUITE_END()

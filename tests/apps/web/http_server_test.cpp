// The HTTP server of the chief's metrics port, over real sockets on
// 127.0.0.1: it answers, keeps connections alive, answers pipelined
// requests in order, and idle, trickling or oversized clients neither keep
// another waiting nor keep their connection past the request timeout.
#include "apps/web/http_server.hpp"
#include "runtime/base/errc.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

/// A client socket connected to 127.0.0.1:`port`; -1 on failure.
int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    auto n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    at += static_cast<size_t>(n);
  }
}

/// What arrives on `fd` until it closes or `limit` passes.
std::string read_until_closed(int fd, std::chrono::milliseconds limit) {
  std::string out;
  auto end = clock_type::now() + limit;
  char buf[4096];
  while (clock_type::now() < end) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      end - clock_type::now());
    if (::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 1))) <= 0)
      break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

/// Reads one answer (head and Content-Length body) from `fd`.
std::string read_answer(int fd, std::chrono::milliseconds limit) {
  std::string out;
  auto end = clock_type::now() + limit;
  char c;
  while (clock_type::now() < end) {
    auto head_end = out.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      auto at = out.find("Content-Length: ");
      size_t length = at == std::string::npos ? 0
                                              : std::stoul(out.substr(at + 16));
      if (out.size() >= head_end + 4 + length)
        return out;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    if (::recv(fd, &c, 1, 0) <= 0)
      break;
    out += c;
  }
  return out;
}

/// One GET on a connection of its own: the answer and the seconds it took.
std::pair<std::string, double> get(uint16_t port, const std::string& path) {
  auto start = clock_type::now();
  int fd = connect_to(port);
  if (fd < 0)
    return {"", -1};
  send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
  auto answer = read_answer(fd, 5000ms);
  ::close(fd);
  return {answer,
          std::chrono::duration<double>(clock_type::now() - start).count()};
}

bool starts(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::unique_ptr<troupe::http_server> hello_server(http_server_options o = {}) {
  auto s = troupe::http_server::start(
    "127.0.0.1", 0,
    [](const http_request& r) {
      http_response res;
      if (r.path == "/boom")
        throw std::runtime_error("boom");
      if (r.path != "/hello")
        return http_response{404, "text/plain; charset=utf-8", "no\n", {}, {}};
      res.body = "hello " + r.method + " " + r.body;
      return res;
    },
    o);
  BOOST_REQUIRE(s);
  return std::move(*s);
}

double cpu_seconds_of_this_process() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
         + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

} // namespace

BOOST_AUTO_TEST_SUITE(http_server)

BOOST_AUTO_TEST_CASE(it_answers_keeps_alive_and_answers_pipelined_requests) {
  auto s = hello_server();
  auto [answer, took] = get(s->port(), "/hello");
  BOOST_TEST(starts(answer, "HTTP/1.1 200 OK\r\n"), answer);
  BOOST_TEST(answer.find("\r\nCache-Control: no-store\r\n")
             != std::string::npos);
  BOOST_TEST(answer.find("\r\nX-Content-Type-Options: nosniff\r\n")
             != std::string::npos);
  BOOST_TEST(answer.find("\r\n\r\nhello GET ") != std::string::npos, answer);
  BOOST_TEST(starts(get(s->port(), "/other").first, "HTTP/1.1 404 Not Found"));
  BOOST_TEST(starts(get(s->port(), "/boom").first,
                    "HTTP/1.1 500 Internal Server Error"));
  // Two requests on one connection, then two sent in one write.
  int fd = connect_to(s->port());
  send_all(fd, "GET /hello HTTP/1.1\r\n\r\n");
  BOOST_TEST(starts(read_answer(fd, 2000ms), "HTTP/1.1 200"));
  send_all(fd, "POST /hello HTTP/1.1\r\nContent-Length: 1\r\n\r\nA"
               "HEAD /hello HTTP/1.1\r\nConnection: close\r\n\r\n");
  auto both = read_until_closed(fd, 2000ms);
  ::close(fd);
  auto second = both.find("HTTP/1.1 200", 1);
  BOOST_TEST(both.find("hello POST A") < second, both);
  BOOST_TEST(second != std::string::npos, both);
  // HEAD: the length of the body, not the body.
  BOOST_TEST(both.substr(second).find("Content-Length: 11\r\n")
               != std::string::npos,
             both);
  BOOST_TEST(both.find("hello HEAD") == std::string::npos, both);
  BOOST_TEST(both.find("Connection: close\r\n") != std::string::npos, both);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_answered_and_closed) {
  auto s = hello_server();
  for (auto& bytes :
       {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11),
        "GET / HTTP/1.1\r\nX: " + std::string(1 << 20, 'a') + "\r\n\r\n",
        std::string(
          "POST /hello HTTP/1.1\r\nContent-Length: 100000\r\n\r\n")}) {
    int fd = connect_to(s->port());
    send_all(fd, bytes);
    auto answer = read_until_closed(fd, 3000ms);
    ::close(fd);
    BOOST_TEST((starts(answer, "HTTP/1.1 400") || starts(answer, "HTTP/1.1 431")
                || starts(answer, "HTTP/1.1 413")),
               answer);
    BOOST_TEST(answer.find("Connection: close") != std::string::npos, answer);
  }
  BOOST_TEST(starts(get(s->port(), "/hello").first, "HTTP/1.1 200"));
}

BOOST_AUTO_TEST_CASE(a_trickling_client_is_cut_off_at_the_request_timeout) {
  http_server_options o;
  o.request_timeout = 1000ms;
  auto s = hello_server(o);
  int fd = connect_to(s->port());
  auto start = clock_type::now();
  // One byte every 100 ms of a request that never ends: closed after about
  // 1 s all the same (the bytes do not extend it).
  bool closed = false;
  const std::string slow =
    "GET /hello HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
  for (size_t i = 0; i < slow.size() && !closed; ++i) {
    send_all(fd, slow.substr(i, 1));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char c;
      closed = ::recv(fd, &c, 1, 0) <= 0;
    }
  }
  auto after = std::chrono::duration<double>(clock_type::now() - start).count();
  ::close(fd);
  BOOST_TEST(closed);
  BOOST_TEST(after >= 0.9);
  BOOST_TEST(after < 2.0);
  // The server counts a connection gone just after closing it, so the
  // client may see the close first: give the count up to 2 s.
  auto counted = clock_type::now();
  while (s->connections() != 0u && clock_type::now() - counted < 2s)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(s->connections() == 0u);
}

BOOST_AUTO_TEST_CASE(idle_and_slow_clients_keep_no_one_waiting) {
  // 500 connections that send nothing and 50 that send a byte each 100 ms
  // (bounded: 3 s): every GET meanwhile answers within 1 s, and the server
  // spends next to no CPU on them. One process holds both ends, so it
  // needs about 1,200 descriptors.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 1400) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 1400);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < 1400) {
    BOOST_TEST_MESSAGE("skipped: 1400 descriptors needed, the limit is "
                       << lim.rlim_cur);
    return;
  }
  auto s = hello_server();
  std::vector<int> idle;
  for (int i = 0; i < 500; ++i)
    idle.push_back(connect_to(s->port()));
  std::atomic<bool> trickling{true};
  std::thread slow{[&] {
    std::vector<int> fds;
    for (int i = 0; i < 50; ++i) {
      fds.push_back(connect_to(s->port()));
      send_all(fds.back(), "GET /hello HTTP/1.1\r\nX: ");
    }
    auto end = clock_type::now() + 3s;
    while (trickling && clock_type::now() < end) {
      for (int fd : fds)
        send_all(fd, "a");
      std::this_thread::sleep_for(100ms);
    }
    for (int fd : fds)
      ::close(fd);
  }};
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(s->connections() >= 500u);
  auto cpu_before = cpu_seconds_of_this_process();
  double slowest = 0;
  for (int i = 0; i < 10; ++i) {
    auto [answer, took] = get(s->port(), "/hello");
    BOOST_TEST(starts(answer, "HTTP/1.1 200"), answer);
    slowest = std::max(slowest, took);
    std::this_thread::sleep_for(200ms);
  }
  auto cpu = cpu_seconds_of_this_process() - cpu_before;
  trickling = false;
  slow.join();
  BOOST_TEST_MESSAGE("with " << s->connections()
                             << " connections open, the slowest of 10 GETs "
                             << slowest << " s; CPU " << cpu << " s in 2 s");
  BOOST_TEST(slowest < 1.0);
  // Both ends of 550 connections, the trickle's sends included.
  BOOST_TEST(cpu < 0.5);
  for (int fd : idle)
    ::close(fd);
}

BOOST_AUTO_TEST_CASE(past_its_connections_the_longest_waiting_gives_way) {
  http_server_options o;
  o.max_connections = 64;
  auto s = hello_server(o);
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i)
    idle.push_back(connect_to(s->port()));
  std::this_thread::sleep_for(200ms);
  auto [answer, took] = get(s->port(), "/hello");
  BOOST_TEST(starts(answer, "HTTP/1.1 200"), answer);
  BOOST_TEST(took < 1.0);
  BOOST_TEST(s->connections() <= 64u);
  // The first ones were closed to make room.
  BOOST_TEST(read_until_closed(idle.front(), 500ms).empty());
  for (int fd : idle)
    ::close(fd);
}

BOOST_AUTO_TEST_CASE(an_address_it_cannot_take_is_refused_by_name) {
  auto s = hello_server();
  auto again = troupe::http_server::start("127.0.0.1", s->port(),
                                          [](const http_request&) {
                                            return http_response{};
                                          });
  BOOST_REQUIRE(!again);
  auto text = describe(again.error());
  BOOST_TEST(text.find("cannot listen at 127.0.0.1:"
                       + std::to_string(s->port()))
               != std::string::npos,
             text);
  BOOST_TEST(!troupe::http_server::start(
    "192.0.2.1", 0, [](const http_request&) { return http_response{}; }));
}

// A deferred answer: its connection waits while others are served, the
// answer given from another thread arrives, the connection then serves its
// next request; one whose time runs out is closed, and its late reply is
// dropped.
BOOST_AUTO_TEST_CASE(a_deferred_answer_keeps_no_one_else_waiting) {
  std::mutex mutex;
  std::vector<http_reply> held;
  http_server_options o;
  o.request_timeout = 1500ms;
  auto s = troupe::http_server::start(
    "127.0.0.1", 0,
    [&](const http_request& r) {
      http_response res;
      if (r.path == "/slow")
        res.later = [&](http_reply reply) {
          std::lock_guard<std::mutex> guard{mutex};
          held.push_back(std::move(reply));
        };
      else
        res.body = "quick";
      return res;
    },
    o);
  BOOST_REQUIRE(s);
  auto port = (*s)->port();
  int waiting = connect_to(port);
  send_all(waiting, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  auto [quick, took] = get(port, "/quick");
  BOOST_TEST(quick.find("quick") != std::string::npos, quick);
  BOOST_TEST(took < 1.0);
  BOOST_TEST(read_answer(waiting, 200ms).empty()); // still waiting
  http_reply reply;
  {
    std::lock_guard<std::mutex> guard{mutex};
    BOOST_REQUIRE_EQUAL(held.size(), 1u);
    reply = held[0];
  }
  std::thread{[reply] {
    reply(http_response{202, "application/json", "{\"done\":1}", {}, {}});
  }}.join();
  reply(http_response{500, "text/plain", "twice", {}, {}}); // ignored
  auto first = read_answer(waiting, 2000ms);
  BOOST_TEST(starts(first, "HTTP/1.1 202 "), first);
  BOOST_TEST(first.find("{\"done\":1}") != std::string::npos, first);
  auto second = read_answer(waiting, 2000ms);
  BOOST_TEST(second.find("quick") != std::string::npos, second);
  BOOST_TEST(second.find("twice") == std::string::npos, second);
  ::close(waiting);
  // Never answered: closed at the request timeout; the late reply is
  // dropped, and the server goes on.
  int forgotten = connect_to(port);
  send_all(forgotten, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  auto start = clock_type::now();
  auto nothing = read_until_closed(forgotten, 4000ms);
  BOOST_TEST(nothing.empty(), nothing);
  BOOST_TEST(std::chrono::duration<double>(clock_type::now() - start).count()
             < 3.5);
  ::close(forgotten);
  {
    std::lock_guard<std::mutex> guard{mutex};
    BOOST_REQUIRE_EQUAL(held.size(), 2u);
    held[1](http_response{});
  }
  BOOST_TEST(get(port, "/again").first.find("quick") != std::string::npos);
  // A reply that outlives the server does nothing.
  s->reset();
  held[1](http_response{});
}

BOOST_AUTO_TEST_SUITE_END()

#include "apps/web/http_server.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using clock_type = std::chrono::steady_clock;

struct connection {
  uint64_t serial = 0; ///< which connection of all on this fd
  std::string in;
  std::string out;
  size_t sent = 0;
  bool closing = false; ///< close once `out` is sent
  /// A deferred answer is awaited (http_response::later); how to send it.
  bool waiting = false, keep_alive = true, head_only = false;
  clock_type::time_point deadline;
};

/// Deferred answers given on other threads, for the loop to send. Every
/// reply shares it, so that a late one finds it shut (wake -1) rather
/// than a loop that is gone.
struct deferred_answers {
  struct answer {
    int fd;
    uint64_t serial;
    http_response res;
  };
  std::mutex mutex;
  int wake = -1; ///< an eventfd the loop watches
  std::vector<answer> queue;

  void give(int fd, uint64_t serial, http_response res) {
    std::lock_guard<std::mutex> guard{mutex};
    if (wake < 0)
      return;
    queue.push_back({fd, serial, std::move(res)});
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
  }
};

bool has_header(const http_response& r, const char* name) {
  for (auto& [k, v] : r.headers)
    if (strcasecmp(k.c_str(), name) == 0)
      return true;
  return false;
}

http_response refusal(int status, const std::string& why) {
  return {status, "text/plain; charset=utf-8", why + "\n", {}, {}};
}

} // namespace

std::string http_answer_bytes(const http_response& r, bool keep_alive,
                              bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " "
                    + http_reason(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (!has_header(r, "Cache-Control"))
    out += "Cache-Control: no-store\r\n";
  out += "X-Content-Type-Options: nosniff\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (auto& [k, v] : r.headers)
    out += k + ": " + v + "\r\n";
  out += "\r\n";
  if (!head_only)
    out += r.body;
  return out;
}

struct http_server::loop {
  int listener = -1;
  int epoll = -1;
  int wake = -1;  ///< an eventfd: written to stop the loop
  int spare = -1; ///< a descriptor given up when accept finds none left
  http_handler handler;
  http_server_options opts;
  std::atomic<size_t>* open = nullptr;
  std::unordered_map<int, connection> conns;
  uint64_t serials = 0;
  std::shared_ptr<deferred_answers> deferred =
    std::make_shared<deferred_answers>();

  ~loop() {
    {
      std::lock_guard<std::mutex> guard{deferred->mutex};
      if (deferred->wake >= 0)
        ::close(deferred->wake);
      deferred->wake = -1;
    }
    for (auto& [fd, c] : conns)
      ::close(fd);
    for (int fd : {listener, epoll, wake, spare})
      if (fd >= 0)
        ::close(fd);
  }

  void watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll, op, fd, &ev);
  }

  void close_conn(int fd) {
    ::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
    open->store(conns.size());
  }

  /// The connection waiting longest: the first to give way.
  int oldest() const {
    int fd = -1;
    clock_type::time_point at{};
    for (auto& [f, c] : conns)
      if (fd < 0 || c.deadline < at) {
        fd = f;
        at = c.deadline;
      }
    return fd;
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listener, nullptr, nullptr,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        if ((errno == EMFILE || errno == ENFILE) && spare >= 0) {
          // Out of descriptors: take the connection with the spare one and
          // close it, so that it does not wait in the backlog (and the
          // listener does not wake this loop again and again).
          ::close(spare);
          spare = -1;
          int taken = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
          if (taken >= 0)
            ::close(taken);
          spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          continue;
        }
        return; // EAGAIN, or nothing to be done now
      }
      if (conns.size() >= opts.max_connections)
        close_conn(oldest());
      auto& c = conns[fd];
      c.serial = ++serials;
      c.deadline = clock_type::now() + opts.request_timeout;
      open->store(conns.size());
      watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
    }
  }

  /// Answers the request at the front of `c.in`, if it is whole and
  /// nothing waits to be sent; false when there is none to answer, or its
  /// answer is deferred.
  bool answer(int fd, connection& c) {
    if (!c.out.empty() || c.closing || c.waiting || c.in.empty())
      return false;
    http_request req;
    auto r = read_http_request(c.in, opts.limits, req);
    if (r.what == http_read::outcome::need_more)
      return false;
    c.sent = 0;
    if (r.what == http_read::outcome::bad) {
      c.out = http_answer_bytes(refusal(r.status, r.why), false, false);
      c.closing = true;
      c.in.clear();
      return true;
    }
    c.in.erase(0, r.used);
    http_response res;
    try {
      res = handler(req);
    } catch (const std::exception& e) {
      res = refusal(500, std::string{"the server failed: "} + e.what());
    }
    c.keep_alive = req.keep_alive;
    c.head_only = req.method == "HEAD";
    if (res.later) {
      c.waiting = true; // until the answer comes, or the request's time ends
      auto once = std::make_shared<std::atomic<bool>>(false);
      http_reply reply = [box = deferred, fd, serial = c.serial,
                          once](http_response given) {
        if (!once->exchange(true))
          box->give(fd, serial, std::move(given));
      };
      try {
        res.later(reply);
      } catch (const std::exception& e) {
        reply(refusal(500, std::string{"the server failed: "} + e.what()));
      }
      return false;
    }
    send_answer(c, res);
    return true;
  }

  void send_answer(connection& c, const http_response& res) {
    c.out = http_answer_bytes(res, c.keep_alive, c.head_only);
    c.closing = c.closing || !c.keep_alive; // closing: the client left
    c.deadline = clock_type::now() + opts.request_timeout;
  }

  /// Sends what is due and answers the requests whole in `c.in`,
  /// pipelined ones too; false when the connection is done with.
  bool serve(int fd, connection& c) {
    if (!flush(fd, c))
      return false;
    while (answer(fd, c)) {
      if (!flush(fd, c))
        return false;
      if (!c.out.empty())
        break; // the client reads slower than this answers
    }
    return true;
  }

  /// The deferred answers given since last time, each to its connection
  /// if that is still open and waiting.
  void take_deferred() {
    uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(deferred->wake, &count, sizeof count);
    std::vector<deferred_answers::answer> given;
    {
      std::lock_guard<std::mutex> guard{deferred->mutex};
      given.swap(deferred->queue);
    }
    for (auto& a : given) {
      auto it = conns.find(a.fd);
      if (it == conns.end() || it->second.serial != a.serial
          || !it->second.waiting)
        continue; // closed meanwhile (its time ran out, or the client left)
      auto& c = it->second;
      c.waiting = false;
      send_answer(c, a.res);
      if (!serve(a.fd, c))
        close_conn(a.fd);
    }
  }

  /// Sends what it can; false when the connection is done with. While an
  /// answer waits for the client to read it, nothing more is read.
  bool flush(int fd, connection& c) {
    while (c.sent < c.out.size()) {
      auto n = ::send(fd, c.out.data() + c.sent, c.out.size() - c.sent,
                      MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(fd, EPOLLOUT, EPOLL_CTL_MOD); // EPOLLHUP and EPOLLERR come anyway
        return true;
      }
      if (n <= 0)
        return false;
      c.sent += static_cast<size_t>(n);
    }
    if (c.closing)
      return false;
    if (!c.out.empty()) { // all sent: the next request's time starts now
      c.out.clear();
      c.sent = 0;
      c.deadline = clock_type::now() + opts.request_timeout;
      watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
    }
    return true;
  }

  void on_event(int fd, uint32_t events) {
    auto it = conns.find(fd);
    if (it == conns.end())
      return;
    auto& c = it->second;
    if (events & EPOLLERR)
      return close_conn(fd);
    bool eof = false;
    if (c.out.empty() && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) {
      // What one request may hold, and a little more: a client sending
      // past it is answered (431 or 413) and cut off, not buffered.
      const size_t most = opts.limits.max_head_bytes
                          + opts.limits.max_body_bytes + 4096;
      char buf[16384];
      while (c.in.size() < most) {
        auto n = ::recv(fd, buf, std::min(sizeof buf, most - c.in.size()), 0);
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
          break;
        if (n < 0)
          return close_conn(fd);
        if (n == 0) { // the client sends no more; it may still read
          eof = true;
          break;
        }
        c.in.append(buf, static_cast<size_t>(n));
      }
    } else if (events & EPOLLHUP) {
      return close_conn(fd);
    }
    if (!serve(fd, c))
      return close_conn(fd);
    if (eof) {
      if (c.out.empty() && !c.waiting)
        return close_conn(fd);
      c.closing = true;
    }
  }

  /// Closes the connections past their time; the ms to the next deadline,
  /// -1 when none.
  int expire() {
    auto now = clock_type::now();
    std::vector<int> late;
    auto next = clock_type::time_point::max();
    for (auto& [fd, c] : conns) {
      if (c.deadline <= now)
        late.push_back(fd);
      else
        next = std::min(next, c.deadline);
    }
    for (int fd : late)
      close_conn(fd);
    if (next == clock_type::time_point::max())
      return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::max<long long>(ms, 1));
  }

  void run() {
    epoll_event events[64];
    for (;;) {
      int n = ::epoll_wait(epoll, events, 64, expire());
      if (n < 0 && errno != EINTR)
        return;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == wake)
          return;
        if (fd == deferred->wake)
          take_deferred();
        else if (fd == listener)
          accept_all();
        else
          on_event(fd, events[i].events);
      }
    }
  }
};

caf::expected<std::unique_ptr<http_server>>
http_server::start(const std::string& host, uint16_t port, http_handler handler,
                   http_server_options options) {
  auto fail = [&](const std::string& why) {
    // The address came from the command line: bad input (exit 2).
    return make_error(errc::invalid_config,
                      "metrics endpoint: cannot listen at " + host + ":"
                        + std::to_string(port) + " (" + why + ")");
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0
      || found == nullptr)
    return fail("not an address of this host");
  std::unique_ptr<http_server> s{new http_server};
  s->loop_ = std::make_unique<loop>();
  auto& l = *s->loop_;
  int err = 0;
  for (auto* a = found; a != nullptr && l.listener < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family,
                      a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 511) == 0) {
      l.listener = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (l.listener < 0)
    return fail(err == EADDRINUSE ? "taken"
                                  : "taken, or not an address of this host");
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(l.listener, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = ntohs(bound.ss_family == AF_INET6
                     ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  s->host_ = host;
  l.epoll = ::epoll_create1(EPOLL_CLOEXEC);
  l.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  l.spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  l.deferred->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l.epoll < 0 || l.wake < 0 || l.deferred->wake < 0)
    return fail(std::strerror(errno));
  l.handler = std::move(handler);
  l.opts = options;
  l.open = &s->open_;
  l.watch(l.listener, EPOLLIN, EPOLL_CTL_ADD);
  l.watch(l.wake, EPOLLIN, EPOLL_CTL_ADD);
  l.watch(l.deferred->wake, EPOLLIN, EPOLL_CTL_ADD);
  auto* lp = s->loop_.get();
  s->thread_ = std::thread{[lp] { lp->run(); }};
  // Named, so that top -H and the tests see what the port costs.
  ::pthread_setname_np(s->thread_.native_handle(), "troupe-http");
  return s;
}

http_server::~http_server() {
  if (loop_ && loop_->wake >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(loop_->wake, &one, sizeof one);
  }
  if (thread_.joinable())
    thread_.join();
}

} // namespace troupe

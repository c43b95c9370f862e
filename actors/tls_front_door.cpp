#include "actors/tls_front_door.hpp"

#include <chrono>
#include <deque>
#include <iostream>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/sockets.hpp"

namespace troupe {

namespace {

using clock_type = std::chrono::steady_clock;

/// A connection whose handshake is under way.
struct pending_handshake {
  int fd;
  ssl_ptr ssl;
  clock_type::time_point deadline;
  short events = POLLIN; // the client speaks first
  std::string peer;
};

} // namespace

struct tls_front_door::impl {
  int listen_fd;
  int wake[2] = {-1, -1}; ///< a byte in wake[1] ends the loop
  std::shared_ptr<const tls_context> tls;
  handoff on_ready;
  std::string what;
  bool bulk = false;
  std::deque<pending_handshake> pending;
  std::thread thread;
  bool stopped = false;

  void refuse(pending_handshake& p, const std::string& why) {
    std::cerr << "troupe: " << what << " port " << local_port_of(listen_fd)
              << ": refused " << p.peer << ": " << why << std::endl;
    ::close(p.fd);
  }

  void accept_one() {
    int fd = ::accept4(listen_fd, nullptr, nullptr,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return;
    no_delay(fd);
    if (pending.size() >= max_pending) {
      refuse(pending.front(), std::to_string(max_pending)
                                + " TLS handshakes under way; closing the "
                                  "oldest");
      pending.pop_front();
    }
    pending_handshake p;
    p.fd = fd;
    p.ssl = tls->session(fd, true, bulk);
    p.deadline = clock_type::now() + tls->handshake_timeout;
    p.peer = peer_of(fd);
    if (!p.ssl) {
      refuse(p, "cannot create a TLS session");
      return;
    }
    pending.push_back(std::move(p));
  }

  /// Advances every handshake whose socket is ready; hands on the done.
  void step(const std::vector<pollfd>& polled) {
    // polled[0] is the wake pipe, polled[1] the listener, then pending in
    // order.
    std::deque<pending_handshake> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      auto& p = pending[i];
      auto revents = i + 2 < polled.size() ? polled[i + 2].revents : 0;
      if (revents == 0) {
        if (clock_type::now() >= p.deadline)
          refuse(p, "no TLS handshake within "
                      + std::to_string(tls->handshake_timeout.count())
                      + " ms");
        else
          still.push_back(std::move(p));
        continue;
      }
      std::string why;
      errno = 0;
      auto r = handshake_step(p.ssl.get(), p.events, why);
      if (r < 0)
        refuse(p, why);
      else if (r == 0)
        still.push_back(std::move(p));
      else
        on_ready(p.fd, std::move(p.ssl));
    }
    pending.swap(still);
  }

  void run() {
    std::vector<pollfd> polled;
    for (;;) {
      polled.clear();
      polled.push_back({wake[0], POLLIN, 0});
      polled.push_back({listen_fd, POLLIN, 0});
      auto next = clock_type::time_point::max();
      for (auto& p : pending) {
        polled.push_back({p.fd, p.events, 0});
        next = std::min(next, p.deadline);
      }
      int wait_ms = -1;
      if (!pending.empty()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next - clock_type::now());
        wait_ms = static_cast<int>(std::max<int64_t>(left.count() + 1, 0));
      }
      if (::poll(polled.data(), polled.size(), wait_ms) < 0 && errno != EINTR)
        break;
      if (polled[0].revents != 0)
        break;
      step(polled);
      if (polled[1].revents != 0)
        accept_one();
    }
    for (auto& p : pending)
      ::close(p.fd);
    pending.clear();
  }
};

tls_front_door::tls_front_door(int listen_fd,
                               std::shared_ptr<const tls_context> tls,
                               handoff on_ready, std::string what,
                               bool bulk)
  : impl_(std::make_unique<impl>()), port_(local_port_of(listen_fd)) {
  impl_->listen_fd = listen_fd;
  impl_->tls = std::move(tls);
  impl_->on_ready = std::move(on_ready);
  impl_->what = std::move(what);
  impl_->bulk = bulk;
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0)
    impl_->wake[0] = impl_->wake[1] = -1;
  impl_->thread = std::thread([p = impl_.get()] { p->run(); });
}

tls_front_door::~tls_front_door() {
  stop();
}

void tls_front_door::stop() {
  if (impl_->stopped)
    return;
  impl_->stopped = true;
  char one = 1;
  if (::write(impl_->wake[1], &one, 1) != 1)
    ::shutdown(impl_->listen_fd, SHUT_RDWR);
  if (impl_->thread.joinable())
    impl_->thread.join();
  ::close(impl_->listen_fd);
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

} // namespace troupe

#include "actors/net/front_door.hpp"

#include <chrono>
#include <deque>
#include <iostream>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/sockets.hpp"

namespace troupe {

namespace {

using clock_type = std::chrono::steady_clock;

/// A connection whose handshake is under way.
struct pending_handshake {
  int fd;
  std::unique_ptr<peer_proof> proof;
  clock_type::time_point deadline;
  short events = POLLIN; // the client speaks first
  std::string peer;
};

} // namespace

struct front_door::impl {
  int listen_fd;
  int wake[2] = {-1, -1}; ///< a byte in wake[1] ends the loop
  std::shared_ptr<const link_guard> guard;
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
                                + " handshakes under way; closing the "
                                  "oldest");
      pending.pop_front();
    }
    pending_handshake p;
    p.fd = fd;
    p.proof = guard->accept(fd, bulk);
    p.deadline = clock_type::now() + guard->timeout();
    p.peer = peer_of(fd);
    // A proof that needs nothing from the peer (an open guard) is done at
    // once; others wait for the peer's first bytes.
    if (advance(p))
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
          refuse(p, "no " + guard->handshake() + " within "
                      + std::to_string(guard->timeout().count()) + " ms"
                      + refusal_hint());
        else
          still.push_back(std::move(p));
        continue;
      }
      if (advance(p))
        still.push_back(std::move(p));
    }
    pending.swap(still);
  }

  /// One step of `p`'s proof: true while it goes on; hands it on when
  /// done, refuses it when failed.
  bool advance(pending_handshake& p) {
    std::string why;
    auto r = p.proof->step(p.events, why);
    if (r < 0)
      refuse(p, why + refusal_hint());
    else if (r > 0)
      on_ready(p.fd, p.proof->take_session());
    return r == 0;
  }

  /// Where a refused member would find the key, for the log line.
  std::string refusal_hint() const {
    if (auto* key = guard->key())
      return "; members prove the key in " + key->path();
    return {};
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

front_door::front_door(int listen_fd, std::shared_ptr<const link_guard> guard,
                       handoff on_ready, std::string what, bool bulk)
  : impl_(std::make_unique<impl>()), port_(local_port_of(listen_fd)) {
  impl_->listen_fd = listen_fd;
  impl_->guard = std::move(guard);
  impl_->on_ready = std::move(on_ready);
  impl_->what = std::move(what);
  impl_->bulk = bulk;
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0)
    impl_->wake[0] = impl_->wake[1] = -1;
  impl_->thread = std::thread([p = impl_.get()] { p->run(); });
}

front_door::~front_door() {
  stop();
}

void front_door::stop() {
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

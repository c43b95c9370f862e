#include "actors/net/guarded_middleman.hpp"

#include <deque>
#include <iostream>
#include <map>
#include <mutex>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caf/io/basp_broker.hpp"
#include "caf/io/broker.hpp"
#include "caf/io/doorman.hpp"
#include "caf/io/middleman.hpp"
#include "caf/io/middleman_actor_impl.hpp"
#include "caf/io/network/acceptor_impl.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/interfaces.hpp"
#include "caf/io/network/stream_impl.hpp"
#include "caf/io/scribe.hpp"
#include "caf/policy/tcp.hpp"
#include "caf/defaults.hpp"
#include "caf/settings.hpp"

#include "actors/net/basp_check.hpp"
#include "actors/net/front_door.hpp"
#include "actors/net/link_clock.hpp"
#include "actors/net/sockets.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

namespace net = caf::io::network;
using net::rw_state;
using default_mpx = net::default_multiplexer;

// -- reading and writing an established session ------------------------------

/// The stream policy of a proven connection for CAF's multiplexer: plain
/// TCP, or an established TLS session (the handshake is over when CAF gets
/// the socket, so every call is SSL_read or SSL_write; "want read/write"
/// is success with 0 bytes, and the multiplexer calls again when the
/// socket is ready). Every byte read passes basp_check first.
struct guarded_stream_policy {
  guarded_stream_policy(ssl_ptr s, basp_check::side side)
    : ssl(std::move(s)), check(side) {}

  rw_state read_some(size_t& result, net::native_socket fd, void* buf,
                     size_t len) {
    auto state = ssl ? finish(SSL_read(ssl.get(), buf, static_cast<int>(len)),
                              result, len)
                     : caf::policy::tcp::read_some(result, fd, buf, len);
    if (state != rw_state::success || result == 0)
      return state;
    auto why = check.feed(static_cast<const uint8_t*>(buf), result);
    if (why.empty())
      return state;
    std::cerr << "troupe: closing the link with " << peer_of(fd) << ": " << why
              << std::endl;
    result = 0;
    return rw_state::failure;
  }

  rw_state write_some(size_t& result, net::native_socket fd, const void* buf,
                      size_t len) {
    if (!ssl)
      return caf::policy::tcp::write_some(result, fd, buf, len);
    return finish(SSL_write(ssl.get(), buf, static_cast<int>(len)), result,
                  len);
  }

  /// Decrypted bytes waiting in the session do not make the socket
  /// readable: read them before the multiplexer waits again. (CAF's module
  /// asks for at least the threshold, and stalls when fewer are there.)
  bool must_read_more(net::native_socket, size_t) {
    return ssl && SSL_pending(ssl.get()) > 0;
  }

  rw_state finish(int ret, size_t& result, size_t len) {
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    if (ret > 0) {
      result = static_cast<size_t>(ret);
      return rw_state::success;
    }
    switch (SSL_get_error(ssl.get(), ret)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE: return rw_state::success;
      default: ERR_clear_error(); return rw_state::failure;
    }
  }

  ssl_ptr ssl;
  basp_check check;
};

/// CAF's scribe (connection servant) over guarded_stream_policy; the same
/// as CAF's own scribe_impl but for the policy.
class guarded_scribe : public caf::io::scribe {
public:
  guarded_scribe(default_mpx& mpx, net::native_socket fd, ssl_ptr ssl,
                 basp_check::side side)
    : scribe(net::conn_hdl_from_socket(fd)),
      stream_(mpx, fd, std::move(ssl), side) {}

  void configure_read(caf::io::receive_policy::config config) override {
    if (!launched_)
      start_link_clock(*this); // see link_clock.hpp
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }

  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override { stream_.flush(this); }

  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  net::stream_impl<guarded_stream_policy> stream_;
};

// -- accepting ---------------------------------------------------------------

/// Proven connections from the front door's thread, waiting for
/// the multiplexer. One byte on the wake socket per connection makes the
/// doorman's socket readable once per connection.
class ready_queue {
public:
  explicit ready_queue(int wake_write) : wake_write_(wake_write) {}

  ~ready_queue() {
    for (auto& r : ready_)
      ::close(r.first);
    for (auto& a : accepted_)
      ::close(a.first);
    ::close(wake_write_);
  }

  /// From the front door's thread.
  void push(int fd, ssl_ptr ssl) {
    std::lock_guard<std::mutex> guard{mtx_};
    char one = 1;
    if (::send(wake_write_, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
      ::close(fd); // the doorman is gone or hopelessly behind
      return;
    }
    ready_.emplace_back(fd, std::move(ssl));
  }

  /// The socket of the next connection (its session kept for take), or
  /// -1.
  int accept_next() {
    std::lock_guard<std::mutex> guard{mtx_};
    if (ready_.empty())
      return -1;
    auto next = std::move(ready_.front());
    ready_.pop_front();
    accepted_.emplace(next.first, std::move(next.second));
    return next.first;
  }

  /// The session of accepted socket `fd` (null without TLS); false when
  /// `fd` is not one of ours.
  bool take(int fd, ssl_ptr& session) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = accepted_.find(fd);
    if (it == accepted_.end())
      return false;
    session = std::move(it->second);
    accepted_.erase(it);
    return true;
  }

private:
  std::mutex mtx_;
  int wake_write_;
  std::deque<std::pair<int, ssl_ptr>> ready_;
  std::map<int, ssl_ptr> accepted_;
};

/// The acceptor policy of the doorman: "accepting" takes the next
/// connection the front door has finished.
struct handoff_policy {
  explicit handoff_policy(std::shared_ptr<ready_queue> q)
    : queue(std::move(q)) {}

  bool try_accept(net::native_socket& result, net::native_socket fd) {
    char byte;
    result = net::invalid_native_socket;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) == 1)
      result = queue->accept_next();
    return true;
  }

  std::shared_ptr<ready_queue> queue;
};

/// CAF's doorman (listener servant) fed by a front_door: CAF polls the
/// wake socket, the front door does the listening and the handshakes.
class guarded_doorman : public caf::io::doorman {
public:
  guarded_doorman(default_mpx& mpx, int wake_read,
                  std::shared_ptr<ready_queue> queue, std::string addr)
    : doorman(net::accept_hdl_from_socket(wake_read)),
      acceptor_(mpx, wake_read, queue), queue_(std::move(queue)),
      addr_(std::move(addr)) {}

  /// The front door starts after the doorman exists: it feeds queue_.
  void attach(std::unique_ptr<front_door> door) { door_ = std::move(door); }

  ~guarded_doorman() override {
    if (door_)
      door_->stop();
  }

  bool new_connection() override {
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    ssl_ptr ssl;
    if (!queue_->take(fd, ssl))
      return false;
    auto scribe = caf::make_counted<guarded_scribe>(mpx, fd, std::move(ssl),
                                                    basp_check::side::accepted);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

  void graceful_shutdown() override {
    if (door_)
      door_->stop();
    acceptor_.graceful_shutdown();
    detach(&acceptor_.backend(), false);
  }

  void launch() override { acceptor_.start(this); }
  std::string addr() const override { return addr_; }
  uint16_t port() const override { return door_ ? door_->port() : 0; }
  void add_to_loop() override { acceptor_.activate(this); }
  void remove_from_loop() override { acceptor_.passivate(); }

private:
  net::acceptor_impl<handoff_policy> acceptor_;
  std::shared_ptr<ready_queue> queue_;
  std::unique_ptr<front_door> door_;
  std::string addr_;
};

// -- the middleman actor -----------------------------------------------------

class guarded_middleman_impl : public caf::io::middleman_actor_impl {
public:
  guarded_middleman_impl(caf::actor_config& cfg, caf::actor basp,
                         std::shared_ptr<const link_guard> guard)
    : caf::io::middleman_actor_impl(cfg, std::move(basp)),
      guard_(std::move(guard)) {}

  const char* name() const override { return "troupe_guarded_middleman"; }

protected:
  /// Connects and proves itself within the guard's timeout (this actor
  /// runs on a scheduler thread; CAF's own blocks a thread of its own for
  /// as long as the kernel tries). Without a proof to make, TCP gets
  /// middleman.connection-timeout.
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             uint16_t port) override {
    auto where = host + ":" + std::to_string(port);
    auto tcp_timeout = guard_->admits_anyone()
                         ? caf::get_or(
                           system().config(), "middleman.connection-timeout",
                           caf::defaults::middleman::connection_timeout)
                         : caf::timespan{guard_->timeout()};
    std::string why;
    int fd = connect_within(host, port, tcp_timeout, why);
    if (fd < 0)
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             "cannot connect to " + where + ": " + why);
    set_nonblocking(fd, true);
    auto proof = guard_->connect(fd, false);
    why = finish_proof(*proof, fd,
                       std::chrono::steady_clock::now() + guard_->timeout());
    if (!why.empty()) {
      ::close(fd);
      // Not cannot_connect_to_node: trying again gives the same answer
      // (and a peer that answered with another key is final).
      // A refusal says what was wrong already; a closed or silent peer
      // gets the guard's guess at why.
      if (proof->refused())
        return make_error(errc::unauthorized, guard_->handshake() + " with "
                                                + where + " failed: " + why);
      return make_error(errc::node_unreachable,
                        guard_->handshake() + " with " + where
                          + " failed: " + why + " (" + guard_->hint() + ")");
    }
    return caf::make_counted<guarded_scribe>(mpx(), fd, proof->take_session(),
                                             basp_check::side::connected);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr,
                                           bool reuse) override {
    std::string host = addr != nullptr && *addr != '\0' ? addr : "0.0.0.0";
    auto listener = listen_on(host, port, reuse);
    if (!listener)
      return listener.error();
    int wake[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, wake) != 0) {
      ::close(*listener);
      return caf::make_error(caf::sec::cannot_open_port,
                             "cannot make a socket pair");
    }
    auto queue = std::make_shared<ready_queue>(wake[1]);
    auto doorman = caf::make_counted<guarded_doorman>(mpx(), wake[0], queue,
                                                      host);
    doorman->attach(std::make_unique<front_door>(
      *listener, guard_,
      [queue](int fd, ssl_ptr ssl) { queue->push(fd, std::move(ssl)); },
      "control"));
    return doorman;
  }

private:
  default_mpx& mpx() {
    return static_cast<default_mpx&>(system().middleman().backend());
  }

  std::shared_ptr<const link_guard> guard_;
};

} // namespace

caf::io::middleman_actor
make_guarded_middleman(caf::actor_system& sys,
                       std::shared_ptr<const link_guard> guard) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(
    caf::atom("BASP"));
  // Scheduled, not detached like CAF's own: a detached actor must be
  // killed before its system is destroyed. Its connect blocks a scheduler
  // thread for the length of a handshake (milliseconds; at most the
  // guard's timeout).
  auto mm = sys.spawn<guarded_middleman_impl, caf::hidden>(basp,
                                                           std::move(guard));
  // It lives as long as the BASP broker it feeds, which holds it here (no
  // other strong reference exists) and ends it when the middleman stops.
  caf::actor_cast<caf::abstract_actor*>(basp)->attach_functor(
    [mm](const caf::error&) {
      caf::anon_send_exit(mm, caf::exit_reason::kill);
    });
  return caf::actor_cast<caf::io::middleman_actor>(mm);
}

} // namespace troupe

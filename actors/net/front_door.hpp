// The front door of a listening socket: accepts connections and runs
// their server handshakes (the cluster key's or TLS's, actors/net/link_guard)
// on one thread that sleeps in poll(), so a peer that connects and says
// nothing (or half a handshake) costs nothing but a file descriptor until
// its deadline, and only a peer that proved the key (or whose certificate
// the cluster's CA signed) is handed on. What holds:
// - a handshake not done within the guard's timeout is closed;
// - at most max_pending handshakes run at once; a new connection beyond
//   that closes the oldest (a flood can delay nodes, never exhaust the
//   process);
// - a refused peer is logged once, with its address and the reason.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "actors/net/link_guard.hpp"

namespace troupe {

class front_door {
public:
  /// Receives each authenticated connection: a non-blocking socket with
  /// TCP_NODELAY and its finished TLS session (null without TLS).
  using handoff = std::function<void(int fd, ssl_ptr ssl)>;

  static constexpr size_t max_pending = 64;

  /// Serves listening socket `listen_fd` (taken over, closed by stop());
  /// `what` names the listener in log lines ("control", "data plane");
  /// `bulk`: sessions for the data plane (tls_context::session).
  front_door(int listen_fd, std::shared_ptr<const link_guard> guard,
             handoff on_ready, std::string what, bool bulk = false);
  ~front_door();

  front_door(const front_door&) = delete;
  front_door& operator=(const front_door&) = delete;

  uint16_t port() const { return port_; }

  /// Stops accepting, closes the handshakes in flight, joins the thread.
  /// Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  uint16_t port_;
};

} // namespace troupe

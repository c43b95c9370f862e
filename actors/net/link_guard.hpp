// What a peer must prove before any byte of its connection reaches CAF's
// BASP or the data plane: the cluster's key (the default,
// actors/net/key_handshake.hpp), a certificate of the cluster's CA (mutual
// TLS, actors/net/tls.hpp), or nothing (--insecure, and actor systems that
// were never secured: tests and benchmarks on loopback). The front door
// (actors/net/front_door.hpp) runs the server side of each accepted
// connection, the middleman and the data plane client the client side.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/net/cluster_key.hpp"
#include "actors/net/tls.hpp"

namespace troupe {

/// One connection's proof under way, on its non-blocking socket.
class peer_proof {
public:
  virtual ~peer_proof() = default;

  /// 1 done, 0 wants `events` (POLLIN/POLLOUT) before the next step, -1
  /// failed with `why`.
  virtual int step(short& events, std::string& why) = 0;

  /// The finished TLS session (null without TLS).
  virtual ssl_ptr take_session() { return nullptr; }

  /// After a failed step: the peer's answer was wrong, so trying again
  /// gives the same (another key; see key_handshake::refused).
  virtual bool refused() const { return false; }
};

class link_guard {
public:
  virtual ~link_guard() = default;

  /// The server side of accepted socket `fd`; `bulk`: a data plane link.
  virtual std::unique_ptr<peer_proof> accept(int fd, bool bulk) const = 0;

  /// The client side of connected socket `fd`.
  virtual std::unique_ptr<peer_proof> connect(int fd, bool bulk) const = 0;

  /// How long a peer may take to prove itself.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// "mutual TLS", "cluster key 0123abcd... in PATH", "none".
  virtual std::string describe() const = 0;

  /// What a failed client handshake may mean, for its error message.
  virtual std::string hint() const = 0;

  /// "TLS handshake", "key handshake".
  virtual std::string handshake() const = 0;

  /// True for the open guard: no proof, plaintext as CAF has it.
  virtual bool admits_anyone() const { return false; }

  /// The key, when this guard is the cluster key's.
  virtual const cluster_key* key() const { return nullptr; }
};

std::shared_ptr<const link_guard>
make_tls_guard(std::shared_ptr<const tls_context> tls);

std::shared_ptr<const link_guard>
make_key_guard(cluster_key key,
               std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// Admits every peer at once (no proof): plaintext as CAF has it, but
/// still behind troupe's doorman and BASP check.
std::shared_ptr<const link_guard> make_open_guard();

/// Runs `proof` on `fd` until it is done or `deadline` passes, waiting in
/// poll(); empty on success, else why it failed.
std::string finish_proof(peer_proof& proof, int fd,
                         std::chrono::steady_clock::time_point deadline);

} // namespace troupe

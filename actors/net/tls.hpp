// Mutual TLS for every link of a cluster, with OpenSSL directly: the
// cluster's CA is its identity, so a peer is admitted when it presents a
// certificate the CA signed and proves it holds the key (no host-name
// check: any node of the cluster may connect to any other).
//
// Why not CAF's own OpenSSL module: its server does the handshake inside
// the multiplexer, where one idle TCP connection (or one that sends only a
// TLS record header) makes that thread spin at 100% of a core for as long
// as the peer holds it, and a bad key aborts the process at the first
// connection. Here the handshake runs before CAF sees the socket, on a
// thread that sleeps in poll() with a deadline (tls_front_door.hpp), and
// every file is checked when the node starts.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "caf/expected.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace troupe {

/// Where a node's TLS material lives (PEM files).
struct tls_files {
  std::string ca;          ///< the cluster's CA certificate
  std::string certificate; ///< this node's certificate (chain), CA-signed
  std::string key;         ///< its private key, unencrypted

  bool empty() const {
    return ca.empty() && certificate.empty() && key.empty();
  }
};

/// Frees an SSL session.
struct ssl_free_fn {
  void operator()(ssl_st* s) const;
};
using ssl_ptr = std::unique_ptr<ssl_st, ssl_free_fn>;

/// A loaded, checked TLS configuration shared by every link of a process.
class tls_context {
public:
  /// Loads and checks the files: each exists and is PEM, the key matches
  /// the certificate, and the CA signed the certificate. The error names
  /// the file and what is wrong (the node exits 2 with it).
  static caf::expected<std::shared_ptr<tls_context>>
  load(const tls_files& files);

  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// A new session on connected socket `fd`, as client or server. `bulk`:
  /// for the data plane, with a read buffer of bulk_buffer bytes (it must
  /// be sized before the handshake allocates it; see link_socket).
  ssl_ptr session(int fd, bool server, bool bulk = false) const;

  static constexpr long bulk_buffer = 256 * 1024;

  /// How long a peer may take to complete its handshake.
  std::chrono::milliseconds handshake_timeout{5000};

  /// The subject of this node's certificate (for messages).
  const std::string& subject() const { return subject_; }

private:
  explicit tls_context(ssl_ctx_st* ctx) : ctx_(ctx) {}

  ssl_ctx_st* ctx_;
  std::string subject_;
};

/// The text of OpenSSL's error queue (and clears it); `fallback` when it
/// is empty.
std::string ssl_errors(const std::string& fallback);

/// One step of a handshake: 1 done, 0 wants `events` (POLLIN/POLLOUT)
/// before the next step, -1 failed with `why`.
int handshake_step(ssl_st* ssl, short& events, std::string& why);

} // namespace troupe

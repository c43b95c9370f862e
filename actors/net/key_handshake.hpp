// Proving the cluster key without sending it: a challenge-response with a
// fresh nonce from each side and HMAC-SHA256 (OpenSSL), run on a new
// connection before any byte of it reaches CAF's BASP or the data plane.
//
//   client -> server  "troupek1" | key id (8) | client nonce (32)
//   server -> client  key id (8) | server nonce (32)
//                     | HMAC(key, "troupe server" | nonces)          (32)
//   client -> server  HMAC(key, "troupe client" | nonces)            (32)
//
// The client checks the server's answer before it proves anything itself,
// so both sides are authenticated; a recorded handshake replays to
// nothing (the other side's nonce is new), and the two labels keep one
// side's answer from serving as the other's. The server reads exactly
// the handshake's bytes, so what follows is the protocol's own. The key
// ids (see cluster_key::id) let a refusal say "another key" rather than
// only "refused".
//
// Why not TLS 1.3 with the key as an external pre-shared key: TLS
// encrypts every byte, which halves the data plane's throughput on the
// machines measured (caf-notes: 656 against 1230 MB/s at 4 MB), and
// clusters that want encryption have mutual TLS already. The key proves
// membership at connect time and costs nothing after it; it does not
// protect against someone who can read or rewrite the traffic on the way
// (docs: the security table).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/net/cluster_key.hpp"

namespace troupe {

/// One side of the handshake as a state machine over bytes (no socket):
/// send what to_send() holds, feed exactly wants() bytes to take(), until
/// done(). Also what the fuzz target drives.
class key_exchange {
public:
  enum class role { server, client };

  static constexpr size_t nonce_size = 32;
  static constexpr size_t mac_size = 32;
  static constexpr size_t id_size = 8;
  static constexpr char magic[9] = "troupek1";

  /// `nonce`: nonce_size fresh random bytes (random_nonce()).
  key_exchange(const cluster_key& key, role r,
               const std::array<uint8_t, nonce_size>& nonce);

  /// Bytes to receive before the next step; 0 once done or failed.
  size_t wants() const;

  /// Bytes to send now; the caller sends them and clears the vector.
  std::vector<uint8_t>& to_send() { return out_; }

  /// Takes exactly wants() bytes. Empty, or why the peer is refused (it
  /// names what came instead of the handshake, or the other key's id).
  std::string take(const uint8_t* data);

  /// The peer proved the key (and, on the client, the proof is queued).
  bool done() const { return state_ == state::done; }

  static std::array<uint8_t, nonce_size> random_nonce();

  /// Server: the key id the client sent, when it differs from ours.
  const std::string& other_key_id() const { return peer_id_; }

private:
  enum class state {
    magic,  // server: the client's first 8 bytes
    hello,  // server: its key id and nonce
    proof,  // server: the client's HMAC
    answer, // client: the server's id, nonce and HMAC
    done,
    failed,
  };

  std::array<uint8_t, mac_size> mac(const char* label) const;
  std::string fail(std::string why);

  cluster_key key_;
  state state_;
  std::array<uint8_t, nonce_size> client_nonce_{};
  std::array<uint8_t, nonce_size> server_nonce_{};
  std::vector<uint8_t> out_;
  std::string peer_id_; ///< the peer's key id when it differs from ours
};

/// Drives a key_exchange on non-blocking socket `fd`, reading no byte
/// past the handshake. step(): 1 done, 0 wants `events` (POLLIN/POLLOUT)
/// first, -1 failed with `why`.
class key_handshake {
public:
  key_handshake(const cluster_key& key, key_exchange::role r, int fd);

  int step(short& events, std::string& why);

  /// After a failed step: the peer answered, and its answer was wrong
  /// (another key, no proof, another protocol). Trying again gives the
  /// same answer; a closed or silent connection may not.
  bool refused() const { return refused_; }

private:
  key_exchange::role role_;
  bool refused_ = false;
  int fd_;
  key_exchange exchange_;
  std::vector<uint8_t> in_;
  size_t have_ = 0;
  size_t got_total_ = 0; ///< bytes the peer sent, for messages
};

} // namespace troupe

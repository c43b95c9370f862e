// What the data plane's frames travel on: a reliable, ordered stream of
// bytes in both directions, for one reader thread and one writer at a
// time. A TCP or TLS socket (actors/net/link_socket.hpp) is one; a pair of
// rings in memory shared with a process on the same host
// (actors/data_plane/shared_link.hpp) is the other.
#pragma once

#include <cstddef>
#include <string>

namespace troupe {

/// How far a write got.
enum class written { all, some, failed };

class byte_link {
public:
  virtual ~byte_link() = default;

  /// Reads exactly n bytes; false when the link ends first.
  virtual bool read_exact(void* data, size_t n) = 0;

  /// Writes header and payload from byte `done` on (of the two together).
  /// With `wait` false it stops when the link takes no more without
  /// waiting (written::some; `done` says how far): an actor must never
  /// wait for a peer that does not read. A closed peer is an error.
  virtual written write(const void* head, size_t head_len, const void* body,
                        size_t body_len, size_t& done, bool wait) = 0;

  /// Ends both directions: a blocked read or write returns, here and at
  /// the peer. Thread-safe.
  virtual void shutdown() = 0;

  /// The peer, for messages.
  virtual std::string peer() const = 0;
};

} // namespace troupe

// One connected socket of the data plane, plain TCP or TLS, for one
// reader thread and one writer at a time (the two may run at once).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "actors/net/byte_link.hpp"
#include "actors/net/tls.hpp"

namespace troupe {

class link_socket final : public byte_link {
public:
  /// Takes `fd` over (closed by the destructor). With a session, `fd`
  /// must be non-blocking and the handshake finished; the session is
  /// switched to buffered reads and writes (see the constructor). Without
  /// one, `fd` is made blocking.
  link_socket(int fd, ssl_ptr ssl);
  ~link_socket();

  link_socket(const link_socket&) = delete;
  link_socket& operator=(const link_socket&) = delete;

  /// Reads exactly n bytes; false when the connection ends first.
  bool read_exact(void* data, size_t n) override;

  /// Writes header and payload from byte `done` on (of the two together).
  /// With `wait` false it stops when the socket's buffer is full
  /// (written::some; `done` says how far): an actor must never wait for a
  /// peer that does not read. A closed peer is an error, not SIGPIPE.
  written write(const void* head, size_t head_len, const void* body,
                size_t body_len, size_t& done, bool wait) override;

  /// Ends both directions: a blocked read or write returns. Thread-safe.
  void shutdown() override;

  std::string peer() const override;

  /// The socket, for a poll that only watches it (no reads or writes).
  int fd() const { return fd_; }

private:
  written write_plain(const void* head, size_t head_len, const void* body,
                      size_t body_len, size_t& done, bool wait);
  written write_tls(const void* head, size_t head_len, const void* body,
                    size_t body_len, size_t& done, bool wait);
  bool wait_for(short events);
  /// Sends what the write buffer holds; false when it must wait.
  written flush_tls(bool wait);

  int fd_;
  ssl_ptr ssl_;
  /// An OpenSSL session is not safe for two threads at once: the reader
  /// and the writer take turns, each holding this only inside one
  /// SSL_read or SSL_write, never while waiting for the socket.
  std::mutex ssl_mtx_;
};

} // namespace troupe

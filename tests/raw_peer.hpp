// A stranger's side of a TCP connection, for the tests that send a node
// bytes it must refuse: connecting, sending, building CAF 0.17's BASP
// headers, and waiting for the node to close the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include "actors/net/sockets.hpp"

namespace troupe::test {

using byte_string = std::vector<uint8_t>;

/// A blocking TCP connection to 127.0.0.1:port, or -1.
inline int raw_connect(uint16_t port) {
  std::string why;
  return connect_within("127.0.0.1", port, std::chrono::seconds(5), why);
}

/// Sends all of `bytes`, or stops where the peer closed.
inline void send_all(int fd, const byte_string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    auto n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0)
      return; // closed by the peer: what the caller checks next
    at += static_cast<size_t>(n);
  }
}

/// Whether the peer has closed `fd` (end of file or reset) within
/// `timeout_s`; whatever it sends meanwhile is read and dropped.
inline bool closed_by_peer(int fd, double timeout_s) {
  auto end = std::chrono::steady_clock::now()
             + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 1 && ::recv(fd, buf, sizeof(buf), 0) <= 0)
      return true;
  }
  return false;
}

/// CAF 0.17's 32-byte BASP header, big-endian as CAF writes it.
inline byte_string basp_header(uint8_t op, uint32_t payload,
                               uint64_t op_data = 0, uint64_t source = 0,
                               uint64_t dest = 0) {
  byte_string h(32, 0);
  h[0] = op;
  for (int i = 0; i < 4; ++i)
    h[4 + i] = static_cast<uint8_t>(payload >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i) {
    h[8 + i] = static_cast<uint8_t>(op_data >> (56 - 8 * i));
    h[16 + i] = static_cast<uint8_t>(source >> (56 - 8 * i));
    h[24 + i] = static_cast<uint8_t>(dest >> (56 - 8 * i));
  }
  return h;
}

} // namespace troupe::test

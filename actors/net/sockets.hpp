// Plain POSIX socket helpers shared by the data plane and the TLS front
// door: connecting with a deadline, listening, naming a peer.
#pragma once

#include <cstdint>
#include <string>

#include "caf/expected.hpp"
#include "caf/timespan.hpp"

namespace troupe {

/// Sends small frames at once instead of waiting to fill a segment.
void no_delay(int fd);

/// Switches O_NONBLOCK on or off.
void set_nonblocking(int fd, bool on);

/// "host:port" of the peer of a connected socket ("?:0" when unknown).
std::string peer_of(int fd);

/// A connected, blocking socket to host:port within `timeout`, with
/// TCP_NODELAY, or -1 and `why`.
int connect_within(const std::string& host, uint16_t port,
                   caf::timespan timeout, std::string& why);

/// A listening socket on host:port (port 0: the kernel picks one), with
/// SO_REUSEADDR when `reuse` (a restarted node gets its port back at
/// once). "localhost" means 127.0.0.1. The error names the address.
caf::expected<int> listen_on(const std::string& host, uint16_t port,
                             bool reuse);

/// The port a bound socket listens on.
uint16_t local_port_of(int fd);

/// True for an address only this machine reaches: 127.0.0.0/8, ::1 and
/// "localhost".
bool is_loopback(const std::string& host);

} // namespace troupe

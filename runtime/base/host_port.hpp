// "host:port" text as flags and cluster files write it, and the address a
// listener binds for a configured host. Plain strings, no sockets: the
// network layer (actors/net), the metrics endpoint and the programs' flags
// all read addresses the same way.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "caf/expected.hpp"

namespace troupe {

/// "host:port" -> parts; the error names the bad text. `lowest_port` 0
/// admits port 0 (for a listener: any free port).
caf::expected<std::pair<std::string, uint16_t>>
parse_address(const std::string& text, long lowest_port = 1);

/// The address to listen on for a node's configured host: "localhost" is
/// 127.0.0.1 (not every address the name resolves to).
inline std::string bind_address(const std::string& host) {
  return host == "localhost" ? std::string{"127.0.0.1"} : host;
}

} // namespace troupe

#include "runtime/base/host_port.hpp"

#include <cerrno>
#include <cstdlib>

#include "runtime/base/errc.hpp"

namespace troupe {

caf::expected<std::pair<std::string, uint16_t>>
parse_address(const std::string& text, long lowest_port) {
  auto colon = text.rfind(':');
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      "expected HOST:PORT, got \"" + text + "\"");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return bad();
  char* end = nullptr;
  errno = 0;
  auto port = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || errno != 0 || port < lowest_port || port > 65535)
    return bad();
  return std::make_pair(text.substr(0, colon), static_cast<uint16_t>(port));
}

} // namespace troupe

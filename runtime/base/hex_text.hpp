// Hex digits read one at a time and bytes written as hex: the cluster
// key's file, its id, the metrics port's %-escapes and the page's
// steering proofs read and write them alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

/// `n` bytes as 2n lower-case hex digits.
inline std::string to_hex(const uint8_t* data, size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 0xf];
  }
  return out;
}

/// The value of hex digit `c` (either case), or -1 for any other char.
inline int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace troupe

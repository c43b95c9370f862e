// Hex digits read one at a time: the cluster key's file and the metrics
// port's %-escapes read them alike.
#pragma once

namespace troupe {

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

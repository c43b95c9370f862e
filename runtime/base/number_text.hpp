// A double as text, in the few precisions troupe writes: one function, so
// that a file and a message never disagree on how a number is spelled.
#pragma once

#include <cstdio>
#include <string>

namespace troupe {

/// How many significant digits a number is written with.
enum class digits {
  float_exact = 9,   ///< a float read back exactly (metrics' values)
  decimal = 15,      ///< as a person wrote it: 0.1 stays 0.1 (configs)
  double_exact = 17, ///< a double read back exactly (JSON written back)
};

/// x as printf's "%.Ng" writes it, N as `d` says.
inline std::string number_text(double x, digits d) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", static_cast<int>(d), x);
  return buf;
}

} // namespace troupe

// The exit codes of troupe's commands: 0 done; 2 bad input (command line,
// config, dataset, a checkpoint that does not fit); 1 a failure while
// running (the loss turned NaN, a disk error, too many restarts).
#pragma once

#include <iostream>
#include <string>

#include "runtime/base/errc.hpp"

namespace troupe {

inline int exit_code(const caf::error& err) {
  if (err.category() != caf::atom("troupe"))
    return 1;
  switch (static_cast<errc>(err.code())) {
    case errc::invalid_config:
    case errc::file_not_found:
    case errc::bad_format:
    case errc::layout_mismatch:
    case errc::unauthorized:
    case errc::data_changed: return 2;
    default: return 1;
  }
}

/// Prints "<program>: error: <what>" to stderr; returns the exit code.
inline int report_failure(const char* program, const caf::error& err) {
  std::cerr << program << ": error: " << describe(err) << std::endl;
  return exit_code(err);
}

} // namespace troupe

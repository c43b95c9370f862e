// This process's resident memory and CPU time: what the metrics endpoint
// serves for the chief's process and each node agent reports for its own.
#pragma once

#include <cstdint>

namespace troupe {

/// From /proc/self/statm and getrusage (0 where they cannot be read).
struct process_usage {
  int64_t resident_bytes = 0;
  double cpu_seconds = 0; ///< user and system
};

process_usage own_process_usage();

} // namespace troupe

// This process's resident memory and CPU time, and which process it is:
// what the metrics endpoint serves for the chief's process and each node
// agent reports for its own (the shell shows them with its workers).
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

/// From /proc/self/statm and getrusage (0 where they cannot be read).
struct process_usage {
  int64_t resident_bytes = 0;
  double cpu_seconds = 0; ///< user and system
  int64_t pid = 0;
  std::string host;    ///< gethostname()
  std::string program; ///< /proc/self/comm: "troupe-node", "python3"
};

process_usage own_process_usage();

} // namespace troupe

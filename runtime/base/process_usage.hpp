// This process's resident memory and CPU time, and which process it is:
// what the metrics endpoint serves for the chief's process and each node
// agent reports for its own (the shell shows them with its workers).
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

/// From /proc/self/statm, mallinfo2 and getrusage (0 where they cannot be
/// read).
struct process_usage {
  int64_t resident_bytes = 0;
  /// What malloc has handed out and not had back (mallinfo2's uordblks
  /// and hblkhd, all arenas): the heap in use. Resident memory also holds
  /// what the allocator keeps after a free, which comes and goes with the
  /// order of frees; this does not, so it is what shows a leak.
  int64_t heap_bytes = 0;
  double cpu_seconds = 0; ///< user and system
  /// When the process started, in seconds since the epoch (from
  /// /proc/self/stat's start time after /proc/stat's boot time): a Python
  /// worker's interpreter counts from its own start, not the module's.
  double started_unix = 0;
  int64_t pid = 0;
  std::string host;    ///< gethostname()
  std::string program; ///< /proc/self/comm: "troupe-node", "python3"
};

process_usage own_process_usage();

} // namespace troupe

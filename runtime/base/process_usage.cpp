#include "runtime/base/process_usage.hpp"

#include <fstream>
#include <malloc.h>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace troupe {

process_usage own_process_usage() {
  process_usage u;
  rusage r{};
  if (getrusage(RUSAGE_SELF, &r) == 0)
    u.cpu_seconds =
      static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec)
      + static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
  std::ifstream statm{"/proc/self/statm"};
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident)
    u.resident_bytes = resident * sysconf(_SC_PAGESIZE);
  const struct mallinfo2 heap = mallinfo2();
  u.heap_bytes = static_cast<int64_t>(heap.uordblks + heap.hblkhd);
  u.pid = getpid();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0)
    u.host = host;
  std::ifstream comm{"/proc/self/comm"};
  std::getline(comm, u.program);
  return u;
}

} // namespace troupe

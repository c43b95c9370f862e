#include "runtime/base/process_usage.hpp"

#include <fstream>
#include <iterator>
#include <sstream>
#include <malloc.h>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace troupe {

namespace {

/// This process's start in seconds since the epoch: field 22 of
/// /proc/self/stat (clock ticks since boot; counted after the ")" that
/// ends the program's name, which may hold spaces) plus /proc/stat's
/// btime. 0 where either cannot be read.
double process_started_unix() {
  std::ifstream stat_file{"/proc/self/stat"};
  std::string stat{std::istreambuf_iterator<char>{stat_file}, {}};
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields{stat.substr(close + 1)};
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {}
  unsigned long long ticks = 0;
  if (!(fields >> ticks))
    return 0;
  std::ifstream boot{"/proc/stat"};
  std::string line;
  while (std::getline(boot, line))
    if (line.rfind("btime ", 0) == 0)
      return static_cast<double>(std::stoll(line.substr(6)))
             + static_cast<double>(ticks)
                 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return 0;
}

} // namespace

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
  static const double started = process_started_unix();
  u.started_unix = started;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0)
    u.host = host;
  std::ifstream comm{"/proc/self/comm"};
  std::getline(comm, u.program);
  return u;
}

} // namespace troupe

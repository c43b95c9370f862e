// What an operator would look at for a running test process, read from
// /proc: its established TCP connections, memory, CPU time and I/O; and
// the bytes through its TCP sockets, from ss.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace troupe::test {

/// One established TCP connection; addresses as text ("10.213.7.1"), an
/// IPv4-mapped IPv6 address as plain dotted IPv4.
struct tcp_link {
  std::string local_ip;
  uint16_t local_port = 0;
  std::string remote_ip;
  uint16_t remote_port = 0;
};

namespace proc_detail {

/// The socket inodes that `pid` holds open. Rows of /proc/PID/net/tcp list
/// every socket of the namespace, so this is what ties a row to `pid`.
inline std::set<unsigned long> socket_inodes(pid_t pid) {
  std::set<unsigned long> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    char buf[64];
    auto n = ::readlink((dir + "/" + e->d_name).c_str(), buf, sizeof(buf) - 1);
    if (n <= 0)
      continue;
    buf[n] = '\0';
    std::string link{buf};
    const std::string tag = "socket:[";
    if (link.compare(0, tag.size(), tag) == 0)
      out.insert(std::strtoul(link.c_str() + tag.size(), nullptr, 10));
  }
  ::closedir(d);
  return out;
}

/// Decodes "0100007F:1F90" or the 32-digit IPv6 form. The kernel prints
/// each 32-bit word of the address as a host-order integer, so parsing the
/// word and storing it back as a host integer restores the original bytes
/// on any endianness.
inline bool decode_endpoint(const std::string& text, std::string& ip,
                            uint16_t& port) {
  auto colon = text.find(':');
  if (colon == std::string::npos)
    return false;
  std::string hex = text.substr(0, colon);
  port = static_cast<uint16_t>(
    std::strtoul(text.c_str() + colon + 1, nullptr, 16));
  char out[INET6_ADDRSTRLEN] = {};
  if (hex.size() == 8) {
    in_addr a{};
    a.s_addr = static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16));
    ip = ::inet_ntop(AF_INET, &a, out, sizeof(out)) ? out : "";
    return !ip.empty();
  }
  if (hex.size() != 32)
    return false;
  in6_addr a{};
  for (int w = 0; w < 4; ++w) {
    auto word = static_cast<uint32_t>(
      std::strtoul(hex.substr(w * 8, 8).c_str(), nullptr, 16));
    std::memcpy(a.s6_addr + w * 4, &word, 4);
  }
  // A node listening on "::" reached over IPv4 shows up here as
  // ::ffff:a.b.c.d; tests compare against the dotted form.
  if (IN6_IS_ADDR_V4MAPPED(&a))
    ip = ::inet_ntop(AF_INET, a.s6_addr + 12, out, sizeof(out)) ? out : "";
  else
    ip = ::inet_ntop(AF_INET6, &a, out, sizeof(out)) ? out : "";
  return !ip.empty();
}

/// Appends the rows in state `state` (01 ESTABLISHED, 0A LISTEN) of one
/// /proc/PID/net/tcp* file whose inode is in `inodes`.
inline void read_tcp_table(const std::string& path,
                           const std::set<unsigned long>& inodes,
                           std::vector<tcp_link>& out,
                           const std::string& state = "01") {
  std::ifstream in{path};
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line)) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::istringstream row{line};
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout;
    unsigned long inode = 0;
    if (!(row >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid
          >> timeout >> inode))
      continue;
    if (st != state || inodes.count(inode) == 0)
      continue;
    tcp_link l;
    if (decode_endpoint(local, l.local_ip, l.local_port)
        && decode_endpoint(remote, l.remote_ip, l.remote_port))
      out.push_back(std::move(l));
  }
}

/// The value after `key` in a "Key: value" file such as /proc/PID/status,
/// or -1 when the file or the key is missing.
inline long long field_of(const std::string& path, const std::string& key) {
  std::ifstream in{path};
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size(), key) == 0)
      return std::atoll(line.c_str() + key.size());
  return -1;
}

} // namespace proc_detail

/// The ESTABLISHED TCP connections whose sockets `pid` holds; empty when
/// the process is gone or unreadable. /proc/PID/net is the network
/// namespace of that process, not ours, which is what a node started with
/// `ip netns exec` needs.
inline std::vector<tcp_link> tcp_links(pid_t pid) {
  std::vector<tcp_link> out;
  auto inodes = proc_detail::socket_inodes(pid);
  if (inodes.empty())
    return out;
  std::string net = "/proc/" + std::to_string(pid) + "/net/";
  proc_detail::read_tcp_table(net + "tcp", inodes, out);
  proc_detail::read_tcp_table(net + "tcp6", inodes, out);
  return out;
}

/// The TCP ports `pid` listens on (what `ss -tlnp` shows for it).
inline std::set<uint16_t> listening_ports(pid_t pid) {
  std::vector<tcp_link> rows;
  auto inodes = proc_detail::socket_inodes(pid);
  std::string net = "/proc/" + std::to_string(pid) + "/net/";
  proc_detail::read_tcp_table(net + "tcp", inodes, rows, "0A");
  proc_detail::read_tcp_table(net + "tcp6", inodes, rows, "0A");
  std::set<uint16_t> out;
  for (auto& r : rows)
    out.insert(r.local_port);
  return out;
}

/// Whether `pid` has an established connection whose remote end is
/// ip:port.
inline bool has_link_to(pid_t pid, const std::string& ip, uint16_t port) {
  for (auto& l : tcp_links(pid))
    if (l.remote_ip == ip && l.remote_port == port)
      return true;
  return false;
}

/// How many shared data-plane segments `pid` maps (one per shared-memory
/// link: actors/data_plane/shared_link.hpp); -1 when its maps are
/// unreadable.
inline int shared_segments(pid_t pid) {
  std::ifstream maps{"/proc/" + std::to_string(pid) + "/maps"};
  if (!maps)
    return -1;
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find("memfd:troupe-data-plane") != std::string::npos;
  return n;
}

/// Polls shared_segments every 50 ms until it is `count`, for up to
/// `timeout_s`; the seconds it took, or -1.
inline double wait_for_segments(pid_t pid, int count, double timeout_s) {
  auto began = std::chrono::steady_clock::now();
  for (;;) {
    auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                                - began)
                    .count();
    if (shared_segments(pid) == count)
      return waited;
    if (waited > timeout_s)
      return -1;
    ::usleep(50000);
  }
}

/// Polls has_link_to every 100 ms for up to `timeout_s`: a node opens its
/// data-plane connection when its first worker starts.
inline bool wait_for_link(pid_t pid, const std::string& ip, uint16_t port,
                          double timeout_s) {
  for (int i = 0; i * 0.1 < timeout_s; ++i) {
    if (has_link_to(pid, ip, port))
      return true;
    ::usleep(100000);
  }
  return has_link_to(pid, ip, port);
}

/// Resident memory in KiB (VmRSS), or -1 when unreadable (the process is
/// gone or a zombie).
inline long rss_kb(pid_t pid) {
  return static_cast<long>(proc_detail::field_of(
    "/proc/" + std::to_string(pid) + "/status", "VmRSS:"));
}

/// Anonymous resident memory in KiB (RssAnon: the heap and stacks, what
/// a process allocated, not the files it maps), or -1 when unreadable.
inline long rss_anon_kb(pid_t pid) {
  return static_cast<long>(proc_detail::field_of(
    "/proc/" + std::to_string(pid) + "/status", "RssAnon:"));
}

/// The files `pid` maps whose path contains `part` (each once, as
/// /proc/PID/maps lists them), e.g. the CUDA libraries a process loaded.
inline std::set<std::string> mapped_files(pid_t pid, const std::string& part) {
  std::set<std::string> out;
  std::ifstream maps{"/proc/" + std::to_string(pid) + "/maps"};
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash != std::string::npos
        && line.find(part, slash) != std::string::npos)
      out.insert(line.substr(slash));
  }
  return out;
}

/// User plus system CPU time in seconds, or -1 when unreadable.
inline double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  // The command name (field 2) is in parentheses and may itself hold
  // spaces and ')', so the fields are counted from the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return -1;
  std::istringstream rest{text.substr(close + 1)};
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // After ')': field 3 (state) is the first; utime and stime are 14, 15.
  for (int i = 3; i <= 13; ++i)
    if (!(rest >> f))
      return -1;
  if (!(rest >> utime >> stime))
    return -1;
  long tick = ::sysconf(_SC_CLK_TCK);
  return tick > 0 ? static_cast<double>(utime + stime) / tick : -1;
}

/// Bytes passed through read/write-like calls (files, pipes and sockets
/// alike); -1 each when unreadable (another user's process needs root).
struct io_counts {
  long long rchar = -1, wchar = -1;
};

inline io_counts io_of(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/io";
  return {proc_detail::field_of(path, "rchar:"),
          proc_detail::field_of(path, "wchar:")};
}

/// Bytes sent plus bytes received so far on the established TCP
/// connections of `pid` (the kernel's per-socket counters, as `ss -ti`
/// prints them); -1 when ss cannot be run. /proc/PID/io does not count
/// socket traffic that goes through send/recv, which is how CAF writes.
/// Runs in the caller's network namespace.
inline long long tcp_bytes(pid_t pid) {
  FILE* ss = ::popen("ss -tinpH state established 2>/dev/null", "r");
  if (ss == nullptr)
    return -1;
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), ss)) > 0;)
    text.append(buf, n);
  if (::pclose(ss) != 0)
    return -1;
  // An entry is a line naming the socket and its process, then indented
  // lines with its counters.
  auto owner = "pid=" + std::to_string(pid) + ",";
  auto counter = [](const std::string& entry, const char* key) {
    auto at = entry.find(key);
    return at == std::string::npos
             ? 0LL
             : std::atoll(entry.c_str() + at + std::strlen(key));
  };
  long long total = 0;
  std::istringstream in{text};
  std::string line, entry;
  auto add = [&] {
    if (entry.find(owner) != std::string::npos)
      total += counter(entry, " bytes_sent:")
               + counter(entry, " bytes_received:");
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '\t') {
      add();
      entry.clear();
    }
    entry += " " + line;
  }
  add();
  return total;
}

} // namespace troupe::test

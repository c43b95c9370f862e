// What a cluster that may not train costs, as an operator would measure
// it: CPU, memory and bytes on the wire of each node process over a few
// seconds, and the shards' version standing still.
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster_file.hpp"
#include "proc_stats.hpp"

namespace troupe::test {

inline void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

/// Shard 0's version once it has stood still for a second (the steps in
/// flight have settled); -1 if it kept moving for 60 s.
inline int64_t settled_version(const temp_dir& dir, const cluster_spec& spec) {
  auto previous = shard_version(dir, spec);
  for (int i = 0; i < 60; ++i) {
    sleep_s(1);
    auto now = shard_version(dir, spec);
    if (now >= 0 && now == previous)
      return now;
    previous = now;
  }
  return -1;
}

/// What a process costs while its cluster waits.
struct usage {
  long rss_kb = 0;
  double cpu_s = 0;
  long long tcp_bytes = 0;
};

inline usage usage_of(const process& p) {
  return {rss_kb(p.pid()), cpu_seconds(p.pid()), tcp_bytes(p.pid())};
}

/// Watches `nodes` for `seconds` while the cluster is supposed to be
/// idle: no node may grow its memory by more than 10% or 50 MB, use more
/// than 5% of a core, or move more than 1 MB over TCP (heartbeats and the
/// shell's own queries are a few KB).
inline void
check_idle(const std::vector<std::pair<std::string, const process*>>& nodes,
           double seconds) {
  std::vector<usage> before;
  for (auto& [name, p] : nodes)
    before.push_back(usage_of(*p));
  sleep_s(seconds);
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto& name = nodes[i].first;
    auto after = usage_of(*nodes[i].second);
    auto grew_kb = after.rss_kb - before[i].rss_kb;
    auto cpu = after.cpu_s - before[i].cpu_s;
    auto bytes = after.tcp_bytes - before[i].tcp_bytes;
    BOOST_TEST_MESSAGE(name << " over " << seconds << " s idle: RSS "
                            << before[i].rss_kb / 1024 << " -> "
                            << after.rss_kb / 1024 << " MB, CPU " << cpu
                            << " s, TCP " << bytes << " bytes");
    BOOST_TEST(before[i].rss_kb > 0);
    BOOST_TEST(grew_kb <= 50 * 1024, name);
    BOOST_TEST(grew_kb <= before[i].rss_kb / 10, name);
    BOOST_TEST(cpu <= 0.05 * seconds, name);
    BOOST_TEST(bytes >= 0, name);
    BOOST_TEST(bytes <= 1000000, name);
  }
}

/// Once the steps in flight have settled, the cluster of `spec` stays idle
/// (check_idle) for `seconds`, and its shard's version stands still.
inline void check_cluster_idle(
  const temp_dir& dir, const cluster_spec& spec,
  const std::vector<std::pair<std::string, const process*>>& nodes,
  double seconds) {
  auto version = settled_version(dir, spec);
  BOOST_REQUIRE(version >= 0);
  check_idle(nodes, seconds);
  BOOST_TEST(shard_version(dir, spec) == version); // it stood still
}

} // namespace troupe::test

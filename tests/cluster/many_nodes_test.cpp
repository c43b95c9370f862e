// Many node processes on one host: 24 troupe-node processes (the chief's,
// two shard nodes, 21 worker nodes) register within seconds, a worker node
// killed with kill -9 and one frozen with SIGSTOP are each found down
// within the link's timeout, and the shell answers for all of them. As an
// operator would check it: no worker node links to another (the links a
// node holds do not grow with the workers), and the paused cluster burns
// no CPU, moves no bytes and grows no memory in any of its processes. The
// size that fits the default suite; scripts/bench-membership.sh measures
// 128 (docs/scale.md).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "idle_checks.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

/// Whether the chief's output has a line saying that node `name` is down.
bool said_down(process& chief, const std::string& name) {
  std::istringstream lines{chief.out()};
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("node " + name + " (", 0) == 0
        && line.find(") is down") != std::string::npos)
      return true;
  return false;
}

/// Seconds until the chief says node `name` is down; -1 after `limit`.
double seconds_until_down(process& chief, const std::string& name,
                          double limit) {
  auto start = clock_type::now();
  while (seconds_since(start) < limit) {
    if (said_down(chief, name))
      return seconds_since(start);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

/// Checks the links of the cluster's node processes as `ss -tnp` shows
/// them: a worker node holds links to the chief and the shard nodes only,
/// none to another worker node; the chief holds one to each member node
/// (at most one more while a shell asks).
void check_links(running_cluster& cluster, const cluster_spec& spec) {
  std::set<uint16_t> worker_ports;
  std::vector<std::string> workers;
  for (auto& n : spec.nodes)
    if (n.name.rfind("w", 0) == 0) {
      workers.push_back(n.name);
      for (auto port : listening_ports(cluster.node(n.name).pid()))
        worker_ports.insert(port);
    }
  size_t most = 0;
  for (auto& w : workers) {
    auto pid = cluster.node(w).pid();
    auto own = listening_ports(pid);
    auto links = tcp_links(pid);
    most = std::max(most, links.size());
    for (auto& l : links)
      BOOST_TEST(!(own.count(l.local_port) == 0
                   && worker_ports.count(l.remote_port) != 0),
                 w << " links to another worker node's port " << l.remote_port);
  }
  auto chief_links = tcp_links(cluster.chief().pid()).size();
  BOOST_TEST_MESSAGE("links: the chief " << chief_links
                                         << ", a worker node at most " << most);
  BOOST_TEST(chief_links >= spec.nodes.size() - 1);
  BOOST_TEST(chief_links <= spec.nodes.size());
  // The chief, and per shard node its data plane and at most a direct
  // control link (measured: 3, the chief and two data planes).
  BOOST_TEST(most <= 5u);
}

} // namespace

BOOST_AUTO_TEST_SUITE(many_nodes)

BOOST_AUTO_TEST_CASE(two_dozen_nodes_register_lose_two_and_answer_the_shell) {
  constexpr int worker_nodes = 21;
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 1000; // stopped from the shell
  spec.nodes = {{"chief"}, {"ps0", 1}, {"ps1", 1}};
  for (int i = 0; i < worker_nodes; ++i)
    spec.nodes.push_back({"w" + std::to_string(i), 0, 1});
  const auto nodes = spec.nodes.size();
  auto start = clock_type::now();
  running_cluster cluster{dir, spec};
  // Every process starts and registers: well within 10 s, though the
  // suite runs beside this test (128 take under 1 s on an idle host).
  BOOST_REQUIRE_MESSAGE(cluster.chief().wait_for_output(
                          "all " + std::to_string(nodes) + " nodes are up", 30),
                        cluster.logs());
  BOOST_TEST(seconds_since(start) < 10.0, cluster.logs());
  cluster.require_step(100);
  check_links(cluster, spec);

  // Paused, none of the 24 processes works: the chief's heartbeats from
  // 23 nodes cost it under 5% of a core.
  BOOST_REQUIRE(run_shell(dir, spec, "pause").first == 0);
  std::vector<std::pair<std::string, const process*>> all{
    {"chief", &cluster.chief()}};
  for (size_t i = 1; i < nodes; ++i)
    all.emplace_back(spec.nodes[i].name, &cluster.node(spec.nodes[i].name));
  check_cluster_idle(dir, spec, all, 3);
  BOOST_REQUIRE(run_shell(dir, spec, "resume").first == 0);

  // kill -9 closes the node's socket: the chief hears of it at once.
  cluster.node("w3").kill9();
  auto killed = seconds_until_down(cluster.chief(), "w3", 10);
  BOOST_TEST(killed >= 0, cluster.logs());
  BOOST_TEST(killed < 1.0, "w3 found down after " << killed << " s");

  // A frozen node keeps its socket open: found when its link has been
  // silent for connection_timeout_ms (1500 in the test cluster file),
  // within a second more.
  cluster.node("w7").freeze();
  auto frozen = seconds_until_down(cluster.chief(), "w7", 10);
  BOOST_TEST(frozen >= 1.4, "w7 found down after " << frozen << " s");
  BOOST_TEST(frozen < 2.5, "w7 found down after " << frozen << " s");

  // The shell lists every node, the two lost ones down, within 1.5 s. A
  // second was the mark, and held on an Intel Xeon VM; on a 2-vCPU AMD
  // EPYC VM the shell's nodes and status took 1.03-1.2 s right after the
  // two losses in about half the runs. The losses do not cause it, the
  // load does: 21 worker processes training on 2 cores. There the shell
  // took 0.2-0.9 s before the losses as after, and 0.04 s with the run
  // paused; it needs about 0.03 s of CPU but switches threads 70-110
  // times, and waits its turn on a core at each. Run at nice -10 it
  // answered in 0.10-0.18 s in 6 of 8 calls (docs/scale.md, "The shell on a
  // busy host").
  constexpr double shell_bound_s = 1.5;
  auto asked = clock_type::now();
  auto [code, out] = run_shell(dir, spec, "nodes");
  auto answered = seconds_since(asked);
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(answered < shell_bound_s);
  auto listed = json::parse(out);
  BOOST_TEST(listed.size() == nodes, out);
  int down = 0;
  for (auto& n : listed)
    down += n["state"] == "down";
  BOOST_TEST(down == 2, out);
  asked = clock_type::now();
  auto [scode, status] = run_shell(dir, spec, "status");
  BOOST_TEST(seconds_since(asked) < shell_bound_s);
  BOOST_REQUIRE_MESSAGE(scode == 0, status);
  BOOST_TEST(json::parse(status)["run"]["mode"] == "async");

  auto [stop, said] = run_shell(dir, spec, "stop");
  BOOST_TEST(stop == 0, said);
  cluster.require_chief_finished(120);
  cluster.node("w7").signal(SIGCONT);
}

BOOST_AUTO_TEST_SUITE_END()

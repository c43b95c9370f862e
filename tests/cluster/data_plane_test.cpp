// The data plane of a multi-process cluster, as an operator would check
// it: each worker node holds its own connection to each shard node, the
// chief's process carries control messages only, and a cluster that may
// not train (paused, or waiting for a lost node) burns no CPU, moves no
// bytes and grows no memory; it trains every sample once per epoch after.
// Also across hosts: nodes in network namespaces, each with its own
// address.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include <chrono>
#include <thread>

#include "running_cluster.hpp"
#include "netns.hpp"
#include "idle_checks.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(data_plane)

BOOST_AUTO_TEST_CASE(
  workers_reach_every_shard_node_directly_and_the_chief_relays_nothing) {
  // Over TCP, as between hosts ("shared_memory": false; on one host the
  // parameters go through shared memory instead: shared_memory_test.cpp),
  // so that the sockets' counters see them.
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.shared_memory = false;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"ps1", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(100);
  auto& chief = cluster.chief();
  check_direct_links(cluster, {"w0", "w1"}, {"ps0", "ps1"});
  // The bytes through the chief's sockets against the parameter bytes
  // the workers pulled and pushed meanwhile (one pull and one push of
  // the whole model per step).
  auto t = traffic_over(cluster, {"w0", "w1"}, 600, 180);
  BOOST_TEST_MESSAGE("over " << t.steps << " steps the workers moved "
                             << t.moved / 1e6 << " MB of parameters ("
                             << t.worker_bytes / 1e6
                             << " MB on their sockets); the chief's sockets "
                             << t.chief_bytes / 1e6 << " MB, "
                             << 100 * t.chief_bytes / t.moved << "%");
  BOOST_TEST(t.chief_bytes >= 0);
  BOOST_TEST(t.chief_bytes < 0.02 * t.moved);
  BOOST_TEST(static_cast<double>(t.worker_bytes) > 0.9 * t.moved);
  for (auto* node : {"w0", "w1", "ps0", "ps1"})
    BOOST_TEST(shared_segments(cluster.node(node).pid()) == 0, node);
  cluster.require_finished();
  BOOST_TEST(epoch_samples(chief.out())
               == (std::vector<long>{60000, 60000, 60000}),
             chief.out());
}

BOOST_AUTO_TEST_CASE(
  a_paused_cluster_is_idle_and_trains_every_sample_after_resume) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(150);
  auto& chief = cluster.chief();
  BOOST_REQUIRE(run_shell(dir, spec, "pause").first == 0);
  check_cluster_idle(dir, spec,
                     {{"chief", &chief},
                      {"ps0", cluster.members()[0].get()},
                      {"w0", cluster.members()[1].get()},
                      {"w1", cluster.members()[2].get()}},
                     10);
  BOOST_REQUIRE(run_shell(dir, spec, "resume").first == 0);
  cluster.require_finished();
  BOOST_TEST(epoch_samples(chief.out()) == (std::vector<long>{60000, 60000}),
             chief.out());
}

BOOST_AUTO_TEST_CASE(
  a_worker_waiting_for_its_lost_node_is_idle_until_it_returns) {
  // sync: worker 0's pull is held at the shard while worker 1 is gone
  // (an update needs both), and the shard answers "ask again" every hold
  // (10 s here) instead of being asked again and again.
  temp_dir dir;
  cluster_spec spec;
  spec.mode = "sync";
  spec.epochs = 2;
  spec.on_node_loss = "wait";
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(150);
  auto& chief = cluster.chief();
  cluster.node("w1").kill9();
  BOOST_REQUIRE(chief.wait_for_output("worker 1 waits for node w1", 10));
  check_cluster_idle(dir, spec,
                     {{"chief", &chief},
                      {"ps0", cluster.members()[0].get()},
                      {"w0", cluster.members()[1].get()}},
                     12);
  auto& again = cluster.start_node("w1", "w1-again");
  cluster.require_chief_finished();
  BOOST_TEST(again.wait(20) == 0, again.err());
  auto out = chief.out();
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  // Worker 1's loss is the only failure: worker 0 waited without one.
  BOOST_TEST(out.find("worker 0 failed") == std::string::npos, out);
  BOOST_TEST(summary_field(out, 9) == "1", out); // restarts
}

BOOST_AUTO_TEST_CASE(a_stream_of_shell_commands_leaves_memory_bounded) {
  // pause, resume, checkpoint and set lr, ten times over while the
  // cluster trains: every node's own memory (anonymous: the mapped
  // dataset's pages are the page cache's, and fill in as an epoch reads
  // them) after them is within 10% or 8 MB of what it was after the first
  // round, whichever is more, and "stop" still ends the run cleanly. The
  // 8 MB leave room for what CAF 0.17's actor clock keeps while training
  // runs: each request's timeout entry until its deadline (about 0.1 MB a
  // second of training, heaptrack).
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 50;               // ended by "stop"
  spec.checkpoint_every = 100000; // a checkpoint dir, for "checkpoint"
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(150);
  auto nodes = cluster.processes();
  std::vector<long> first;
  for (int round = 0; round < 10; ++round) {
    for (auto command : {"pause", "checkpoint", "resume", "set lr 0.001"}) {
      auto [code, said] = run_shell(dir, spec, command);
      BOOST_REQUIRE_MESSAGE(code == 0, command << ": " << said);
    }
    if (round == 0)
      for (auto* p : nodes)
        first.push_back(rss_anon_kb(p->pid()));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto now = rss_anon_kb(nodes[i]->pid());
    BOOST_TEST_MESSAGE("node " << i << ": anonymous RSS " << first[i] / 1024
                               << " MB after the first round, " << now / 1024
                               << " MB after the tenth");
    BOOST_TEST(now - first[i] <= std::max(first[i] / 10, 8L * 1024));
  }
  BOOST_REQUIRE(run_shell(dir, spec, "stop").first == 0);
  cluster.require_finished(120);
}

/// Network namespaces can be made here (root, iproute2).
struct namespaces_available {
  boost::test_tools::assertion_result
  operator()(boost::unit_test::test_unit_id) {
    auto why = netns_lab::unavailable();
    boost::test_tools::assertion_result r{why.empty()};
    r.message() << "no network namespaces here: " << why;
    return r;
  }
};

BOOST_AUTO_TEST_CASE(across_hosts_every_worker_node_links_to_the_shard_node,
                     *boost::unit_test::precondition(namespaces_available{})) {
  // Four "hosts", each its own network namespace and address on a bridge
  // the test makes: the chief, a shard node, a worker node and a node
  // that joins mid-run. Declared before the processes: they must end
  // before their namespaces go.
  netns_lab lab{4};
  BOOST_REQUIRE_MESSAGE(lab.ok(), lab.error());
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    spec.nodes[i].host = lab.ip(i);
    spec.nodes[i].prefix = lab.exec_prefix(i);
  }
  // Addresses beyond loopback: the nodes refuse them without TLS.
  spec.tls_dir = make_certs(dir, "certs", {"cluster", "client"});
  BOOST_REQUIRE(!spec.tls_dir.empty());
  running_cluster cluster{dir, spec};
  cluster.require_step(100);
  auto& chief = cluster.chief();
  auto& joiner = cluster.join({"--workers", "1", "--name", "late"}, "joiner",
                              lab.exec_prefix(3));
  BOOST_REQUIRE_MESSAGE(
    chief.wait_for_output("adding 1 worker on node late", 30), chief.out());
  auto shard_port = data_port_of(cluster.node("ps0"));
  BOOST_TEST(shard_port != 0);
  BOOST_TEST(wait_for_link(joiner.pid(), lab.ip(1), shard_port, 10));
  BOOST_TEST(has_link_to(cluster.node("w0").pid(), lab.ip(1), shard_port));
  cluster.require_finished(); // the joiner too
  auto out = chief.out();
  // The joined node is known by the address it reached the chief from.
  BOOST_TEST(
    out.find("node late (" + lab.ip(3) + ") is up") != std::string::npos, out);
  BOOST_TEST(out.find("worker 1: step ") != std::string::npos, out);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
}

BOOST_AUTO_TEST_SUITE_END()

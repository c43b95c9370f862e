// Nodes on one host: workers and shards exchange values and gradients
// through shared memory, as an operator would check it (each process's
// mappings and its TCP bytes), and kill -9 of either side of a link is
// noticed by the survivor at once, the run recovers as over TCP, and no
// segment stays mapped anywhere.
#include <boost/test/unit_test.hpp>

#include "running_cluster.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(shared_memory)

BOOST_AUTO_TEST_CASE(workers_and_shards_on_one_host_share_memory_not_tcp) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"ps1", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(100);
  auto& chief = cluster.chief();
  // One segment per link: each worker node to each shard node.
  for (auto* w : {"w0", "w1"})
    BOOST_TEST(wait_for_segments(cluster.node(w).pid(), 2, 10) >= 0, w);
  for (auto* s : {"ps0", "ps1"})
    BOOST_TEST(wait_for_segments(cluster.node(s).pid(), 2, 10) >= 0, s);
  BOOST_TEST(shared_segments(chief.pid()) == 0);
  // The TCP connections stay up (they carried the hand-over), but the
  // parameters no longer cross them.
  check_direct_links(cluster, {"w0", "w1"}, {"ps0", "ps1"});
  auto t = traffic_over(cluster, {"w0", "w1"}, 400, 180);
  BOOST_TEST_MESSAGE("over " << t.steps << " steps the workers moved "
                             << t.moved / 1e6 << " MB of parameters, "
                             << t.worker_bytes / 1e6 << " MB on their sockets");
  BOOST_TEST(t.worker_bytes >= 0);
  BOOST_TEST(t.worker_bytes < 0.02 * t.moved);
  cluster.require_finished();
  BOOST_TEST(epoch_samples(chief.out())
               == (std::vector<long>{60000, 60000, 60000}),
             chief.out());
}

BOOST_AUTO_TEST_CASE(
  either_side_killed_the_survivor_lets_go_and_the_run_recovers) {
  temp_dir dir;
  cluster_spec spec;
  spec.mode = "sync";
  spec.epochs = 2;
  spec.checkpoint_every = 200;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"ps1", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(150);
  auto& chief = cluster.chief();
  auto ps0 = cluster.node("ps0").pid(), w0 = cluster.node("w0").pid();
  BOOST_REQUIRE(wait_for_segments(ps0, 2, 10) >= 0);
  BOOST_REQUIRE(wait_for_segments(w0, 2, 10) >= 0);
  // A worker node dies: the shard nodes' ends of its links go at once
  // (the Unix socket beside each segment hangs up), well within the
  // node timeout (1.5 s here) plus a second.
  auto killed = std::chrono::steady_clock::now();
  cluster.node("w1").kill9();
  BOOST_TEST(wait_for_segments(ps0, 1, 2.5) >= 0);
  BOOST_TEST_MESSAGE("ps0 unmapped w1's segment " << seconds_since(killed)
                                                  << " s after the kill");
  BOOST_REQUIRE(chief.wait_for_output(down_line(spec, 4), 10));
  // A shard node dies: the worker node's end of that link goes as fast;
  // shard 1 is restored on ps0, reached through the link w0 holds.
  killed = std::chrono::steady_clock::now();
  cluster.node("ps1").kill9();
  BOOST_TEST(wait_for_segments(w0, 1, 2.5) >= 0);
  BOOST_TEST_MESSAGE("w0 unmapped ps1's segment " << seconds_since(killed)
                                                  << " s after the kill");
  BOOST_REQUIRE(chief.wait_for_output("steps lost, to be trained again", 60));
  BOOST_TEST(shared_segments(ps0) == 1);
  BOOST_TEST(shared_segments(w0) == 1);
  cluster.require_chief_finished();
  auto out = chief.out();
  BOOST_TEST(out.find("worker 1 moves from node w1 to node w0")
               != std::string::npos,
             out);
  BOOST_TEST(out.find("starting shard 1 on node ps0") != std::string::npos,
             out);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  BOOST_TEST(test_accuracy(out) > 0.85, out);
}

BOOST_AUTO_TEST_SUITE_END()

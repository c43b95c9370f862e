// Signals as an operator sends them: SIGTERM to the chief ends the run
// cleanly (the steps in flight, evaluation, checkpoint, summary, exit 0,
// every member 0); SIGTERM to a worker node makes it leave, its leases go
// back and the run still trains every sample once per epoch; a second
// signal ends a process at once.
#include <boost/test/unit_test.hpp>

#include <csignal>

#include "running_cluster.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(signals)

BOOST_AUTO_TEST_CASE(sigterm_to_the_chief_stops_the_run_cleanly) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.checkpoint_every = 100000; // only the final checkpoint, the stop's
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(200);
  auto& chief = cluster.chief();
  chief.signal(SIGTERM);
  cluster.require_finished(60);
  auto out = chief.out();
  BOOST_TEST(has(out, "stop requested by SIGTERM; finishing after the steps "
                      "in flight"),
             out);
  // After the stop: a checkpoint, the final evaluation and the summary.
  auto stop = out.find("stop requested by SIGTERM");
  BOOST_TEST(out.find(": checkpoint ", stop) != std::string::npos, out);
  BOOST_TEST(out.find("test accuracy = ", stop) != std::string::npos, out);
  BOOST_TEST(test_accuracy(out) > 0.5, out);
  auto saved = troupe::list_checkpoints(dir.file("ckpt"));
  BOOST_TEST(saved.size() >= 1u);
  // Stopped early: less than the 3 epochs were trained.
  auto epochs = epoch_samples(out);
  BOOST_TEST(!epochs.empty(), out);
  BOOST_TEST((epochs.size() < 3 || epochs[2] < 60000), out);
  for (auto& m : cluster.members())
    BOOST_TEST(has(m->out(), "the run is over"), m->out());
}

BOOST_AUTO_TEST_CASE(sigint_to_the_embedded_process_stops_the_run_cleanly) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  auto cfg = write_cluster(dir, spec);
  running_cluster run{
    dir, {"embedded", {"--config", write_embedded(dir, cfg, 2, 1)}}};
  run.require_step(200);
  run.chief().signal(SIGINT); // Ctrl-C
  run.require_finished(60);
  auto out = run.chief().out();
  BOOST_TEST(has(out, "stop requested by SIGINT"), out);
  BOOST_TEST(test_accuracy(out) > 0.5, out);
  auto epochs = epoch_samples(out);
  BOOST_TEST((epochs.size() < 3 || epochs[2] < 60000), out);
}

BOOST_AUTO_TEST_CASE(sigterm_to_a_worker_node_hands_back_its_leases) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 2}};
  running_cluster cluster{dir, spec};
  cluster.require_step(200);
  auto& chief = cluster.chief();
  auto& w1 = cluster.node("w1"); // with workers 1 and 2
  w1.signal(SIGTERM);
  BOOST_TEST(w1.wait(30) == 0, w1.err());
  BOOST_TEST(has(w1.out(), "node w1: SIGTERM: leaving the run"), w1.out());
  BOOST_TEST(has(w1.out(), "node w1: left the run"), w1.out());
  cluster.require_finished(); // w1 has ended with 0 already
  auto out = chief.out();
  BOOST_TEST(has(out, "node w1 leaves the run: 2 workers finish their steps"),
             out);
  BOOST_TEST(has(out, "node w1 has left the run"), out);
  BOOST_TEST(has(out, "worker 1 moves from node w1 to node w0"), out);
  BOOST_TEST(has(out, "worker 2 moves from node w1 to node w0"), out);
  BOOST_TEST(!has(out, "is down"), out); // a departure, not a loss
  // Every sample trained once per epoch, and nothing counted as a failure.
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  BOOST_TEST(summary_field(out, 9) == "0", out); // restarts
}

BOOST_AUTO_TEST_CASE(
  a_shard_node_refuses_to_leave_and_a_second_signal_ends_it) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 1;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(100);
  auto& chief = cluster.chief();
  auto& ps0 = cluster.node("ps0");
  ps0.signal(SIGINT);
  BOOST_REQUIRE(ps0.wait_for_output("node ps0: SIGINT: leaving the run", 10));
  for (int i = 0; i < 200 && !has(ps0.err(), "cannot leave"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(has(ps0.err(), "node ps0 cannot leave: node ps0 holds shard(s) 0 "
                            "and cannot leave a running run"),
             ps0.err());
  BOOST_TEST(ps0.running()); // still serving its shard
  ps0.signal(SIGINT);
  BOOST_TEST(ps0.wait(10) == 128 + SIGINT);
  BOOST_TEST(has(ps0.err(), "troupe-node: SIGINT again: exiting at once"),
             ps0.err());
  // Its shard is gone and there is no checkpoint: the run fails, and the
  // worker node says why and exits 1.
  BOOST_TEST(chief.wait(60) == 1, chief.out());
  auto& w0 = cluster.node("w0");
  BOOST_TEST(w0.wait(20) == 1, w0.err());
  BOOST_TEST(has(w0.err(), "node w0: the run failed: shard 0 on node "
                           "ps0 stopped"),
             w0.err());
}

BOOST_AUTO_TEST_SUITE_END()

// Signals as an operator sends them: SIGTERM to the chief ends the run
// cleanly (the steps in flight, evaluation, checkpoint, summary, exit 0,
// every member 0); SIGTERM to a worker node makes it leave, its leases go
// back and the run still trains every sample once per epoch; a second
// signal ends a process at once.
#include <boost/test/unit_test.hpp>

#include <csignal>

#include "cluster_file.hpp"
#include "runtime/checkpoint_dir.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(signals)

BOOST_AUTO_TEST_CASE(sigterm_to_the_chief_stops_the_run_cleanly) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.checkpoint_every = 100000; // only the final checkpoint, the stop's
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  auto cfg = write_cluster(dir, spec);
  auto members = start_members(dir, cfg, spec);
  auto chief = start_chief(dir, cfg, spec);
  BOOST_REQUIRE_MESSAGE(chief->wait_for_step(200, 120),
                        cluster_outputs(*chief, members));
  chief->signal(SIGTERM);
  BOOST_REQUIRE_MESSAGE(chief->wait(60) == 0, chief->err() + chief->out());
  for (auto& m : members)
    BOOST_TEST(m->wait(20) == 0, m->err());
  auto out = chief->out();
  BOOST_TEST(has(out, "stop requested by SIGTERM; finishing after the steps "
                      "in flight"), out);
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
  for (auto& m : members)
    BOOST_TEST(has(m->out(), "the run is over"), m->out());
}

BOOST_AUTO_TEST_CASE(sigint_to_the_embedded_process_stops_the_run_cleanly) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  auto cfg = write_cluster(dir, spec);
  process embedded{dir, "embedded", "troupe-node",
                   {"--config", write_embedded(dir, cfg, 2, 1)}};
  BOOST_REQUIRE_MESSAGE(embedded.wait_for_step(200, 120),
                        embedded.out() + embedded.err());
  embedded.signal(SIGINT); // Ctrl-C
  BOOST_REQUIRE_MESSAGE(embedded.wait(60) == 0,
                        embedded.err() + embedded.out());
  auto out = embedded.out();
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
  auto cfg = write_cluster(dir, spec);
  auto members = start_members(dir, cfg, spec);
  auto chief = start_chief(dir, cfg, spec);
  BOOST_REQUIRE_MESSAGE(chief->wait_for_step(200, 120),
                        cluster_outputs(*chief, members));
  members[2]->signal(SIGTERM); // w1, with workers 1 and 2
  BOOST_TEST(members[2]->wait(30) == 0, members[2]->err());
  BOOST_TEST(has(members[2]->out(), "node w1: SIGTERM: leaving the run"),
             members[2]->out());
  BOOST_TEST(has(members[2]->out(), "node w1: left the run"),
             members[2]->out());
  BOOST_REQUIRE_MESSAGE(chief->wait(240) == 0, chief->err() + chief->out());
  for (size_t i : {0, 1})
    BOOST_TEST(members[i]->wait(20) == 0, members[i]->err());
  auto out = chief->out();
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

BOOST_AUTO_TEST_CASE(a_shard_node_refuses_to_leave_and_a_second_signal_ends_it) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 1;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  auto cfg = write_cluster(dir, spec);
  auto members = start_members(dir, cfg, spec);
  auto chief = start_chief(dir, cfg, spec);
  BOOST_REQUIRE_MESSAGE(chief->wait_for_step(100, 120),
                        cluster_outputs(*chief, members));
  auto& ps0 = *members[0];
  ps0.signal(SIGINT);
  BOOST_REQUIRE(ps0.wait_for_output("node ps0: SIGINT: leaving the run", 10));
  for (int i = 0; i < 200 && !has(ps0.err(), "cannot leave"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(has(ps0.err(), "node ps0 cannot leave: node ps0 holds shard(s) 0 "
                            "and cannot leave a running run"), ps0.err());
  BOOST_TEST(ps0.running()); // still serving its shard
  ps0.signal(SIGINT);
  BOOST_TEST(ps0.wait(10) == 128 + SIGINT);
  BOOST_TEST(has(ps0.err(), "troupe-node: SIGINT again: exiting at once"),
             ps0.err());
  // Its shard is gone and there is no checkpoint: the run fails, and the
  // worker node says why and exits 1.
  BOOST_TEST(chief->wait(60) == 1, chief->out());
  BOOST_TEST(members[1]->wait(20) == 1, members[1]->err());
  BOOST_TEST(has(members[1]->err(), "node w0: the run failed: shard 0 on node "
                                    "ps0 stopped"),
             members[1]->err());
}

BOOST_AUTO_TEST_SUITE_END()

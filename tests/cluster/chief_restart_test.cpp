// The chief is no longer the end of the cluster: member nodes outlive it
// (their workers stop, their shards keep their values) and wait for a
// chief at its address; the same chief command run again takes the run
// over, keeping the live shards when they hold every step since the newest
// checkpoint (nothing lost), else restoring that checkpoint; it says how
// many steps were lost, and the run completes with every sample trained
// once per epoch. A frozen chief that thaws, and a frozen worker node that
// thaws, go on the same way: the nodes register again.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <functional>
#include <cstdlib>
#include <thread>

#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

/// N of the chief's last "...: N steps lost" or "; N steps lost"; -1 if
/// none.
long steps_lost(const std::string& out) {
  for (auto at = out.rfind(" steps lost"); at != std::string::npos && at > 0;
       at = out.rfind(" steps lost", at - 1)) {
    auto begin = out.rfind(' ', at - 1);
    auto n = out.substr(begin + 1, at - begin - 1);
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos)
      return std::atol(n.c_str());
  }
  return -1;
}

/// Kills the chief of `cluster` (SIGKILL) after step 500 and, once every
/// member waits for a new chief, starts the same chief command again
/// (cluster.chief() from then on); returns what the killed chief printed.
/// `meanwhile`, when given, runs while the first chief trains (it may
/// wait for steps, up to the kill's).
std::string kill9_and_run_again(running_cluster& cluster,
                                std::function<void(process&)> meanwhile = {}) {
  auto& chief = cluster.chief();
  if (meanwhile)
    meanwhile(chief);
  cluster.require_step(500);
  auto first_out = chief.out();
  chief.kill9();
  // The members stay: they wait for a chief at the file's address.
  for (auto& m : cluster.members())
    BOOST_REQUIRE_MESSAGE(m->wait_for_output("s for a chief at 127.0.0.1:", 10),
                          m->out() + m->err());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (auto& m : cluster.members())
    BOOST_TEST(m->running());
  cluster.run_chief_again();
  return first_out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(chief_restart)

BOOST_AUTO_TEST_CASE(a_killed_chief_run_again_takes_the_run_over) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 3; // time for a shell status after the takeover
  spec.checkpoint_every = 200;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  auto first_out = kill9_and_run_again(cluster);
  auto& again = cluster.chief();
  // The shell says what the takeover cost.
  BOOST_REQUIRE_MESSAGE(again.wait_for_output("kept the live shards", 60),
                        again.out() + again.err());
  auto [shell_code, status] = run_shell(dir, spec, "status");
  BOOST_TEST(shell_code == 0, status);
  auto j = nlohmann::json::parse(status, nullptr, false);
  BOOST_TEST(j.is_object(), status);
  if (j.is_object() && j.contains("run") && j["run"].contains("taken_over")) {
    auto& t = j["run"]["taken_over"];
    BOOST_TEST(t["lost_steps"] == 0, status);
    BOOST_TEST(t["from_step"].get<int64_t>() > 0, status);
    BOOST_TEST(j["run"]["lost_steps"] == 0, status);
  } else {
    BOOST_ERROR("no taken_over in the status: " + status);
  }
  cluster.require_finished(); // the chief run again, and every member
  auto out = again.out();
  auto run = first_out.substr(first_out.find("identity: run ") + 14, 16);
  BOOST_TEST(has(out, "served run " + run + ", whose chief was lost"), out);
  BOOST_TEST(has(out, "taking over run " + run + " from its checkpoint"), out);
  // The shard on ps0 lived on and its log names every batch it applied
  // since the checkpoint: it is kept, and nothing is trained again.
  BOOST_TEST(has(out, "kept the live shards"), out);
  auto lost = steps_lost(out);
  BOOST_TEST_MESSAGE("steps lost to the chief's restart: "
                     << lost << " (" << line_with(out, "kept the live shards")
                     << ")");
  BOOST_TEST(lost == 0, out);
  // Every sample trained once per epoch, under the old run's id.
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000, 60000}),
             out);
  // Async Adam's last iterate ranges 0.71-0.86 undisturbed.
  BOOST_TEST(test_accuracy(out) > 0.70, out);
  for (auto& m : cluster.members())
    BOOST_TEST(count_of(m->out(), "registered with the chief (run " + run)
                 == 2u,
               m->out());
}

BOOST_AUTO_TEST_CASE(a_chief_run_again_keeps_shards_added_before_it_was_lost) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.checkpoint_every = 200;
  // ps1 holds no shard in the file; the shell adds one there.
  spec.nodes = {{"chief"}, {"ps0", 1}, {"ps1", 0}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  auto first_out = kill9_and_run_again(cluster, [&](process& chief) {
    BOOST_REQUIRE_MESSAGE(chief.wait_for_step(150, 120), chief.out());
    auto [code, out] = run_shell_until_taken(dir, spec, "add-shard ps1");
    BOOST_REQUIRE_MESSAGE(code == 0, out);
  });
  cluster.require_finished();
  auto out = cluster.chief().out();
  BOOST_TEST(has(first_out, "shard 1 added on node ps1"), first_out);
  BOOST_TEST(has(out, "the live shards are 2, not the cluster file's 1"), out);
  BOOST_TEST(has(out, "kept the live shards"), out);
  BOOST_TEST(steps_lost(out) == 0, out);
  BOOST_TEST(summary_field(out, 3) == "2", out);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
}

BOOST_AUTO_TEST_CASE(
  a_shard_that_died_with_its_chief_rewinds_to_the_checkpoint) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.checkpoint_every = 200;
  // Shard 0 lives in the chief's process and dies with it.
  spec.nodes = {{"chief", 1}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  kill9_and_run_again(cluster);
  cluster.require_finished();
  auto out = cluster.chief().out();
  BOOST_TEST(has(out, "cannot keep the live shards (shard 0 did not survive "
                      "its chief)"),
             out);
  // Restored from the checkpoint: at most checkpoint.every_steps lost
  // (plus the steps of one report per worker).
  auto lost = steps_lost(out);
  BOOST_TEST_MESSAGE("steps lost to the chief's restart: "
                     << lost << " ("
                     << line_with(out, "cannot keep the live shards") << ")");
  BOOST_TEST(lost >= 0, out);
  BOOST_TEST(lost <= 200 + 2 * 8, out);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
}

BOOST_AUTO_TEST_CASE(a_frozen_worker_node_that_thaws_registers_again) {
  temp_dir dir;
  cluster_spec spec;
  // Long enough to go on after the thaw: with 8 epochs a loaded CI
  // machine once let the other worker finish the run before w1 had
  // registered again.
  spec.epochs = 16;
  spec.on_node_loss = "wait";
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(200);
  auto& chief = cluster.chief();
  auto& w1 = cluster.node("w1");
  w1.freeze();
  BOOST_REQUIRE(chief.wait_for_output("worker 1 waits for node w1", 10));
  w1.signal(SIGCONT);
  cluster.require_finished(240, 30);
  auto out = chief.out();
  auto up = "node w1 (127.0.0.1:" + std::to_string(spec.nodes[3].port)
            + ") is up";
  BOOST_TEST(count_of(out, up) == 2u, out); // again after the thaw
  BOOST_TEST(count_of(w1.out(), "registered with the chief") == 2u, w1.out());
  // Its worker went on there, and nothing was trained twice or skipped.
  BOOST_TEST(!has(out, "moves"), out);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>(16, 60000)), out);
}

BOOST_AUTO_TEST_CASE(a_frozen_chief_that_thaws_finishes_the_run) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 8;
  spec.checkpoint_every = 200;
  // Workers that lease ahead train on a little while the chief is frozen.
  spec.lease_ahead_ms = 50;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(300);
  auto& chief = cluster.chief();
  chief.freeze();
  for (auto& m : cluster.members())
    BOOST_REQUIRE_MESSAGE(m->wait_for_output("lost the chief", 10),
                          m->out() + m->err());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  chief.signal(SIGCONT);
  cluster.require_finished(240, 30);
  auto out = chief.out();
  // The members' side of it, for a failure's message.
  std::string said = out;
  for (auto& m : cluster.members())
    said += m->out() + m->err();
  // The thawed chief found its links gone and (waiting for it, if it was
  // not back yet) took the shard node back with the shard alive: kept,
  // nothing lost.
  BOOST_TEST(has(out, "kept the live shards"), said);
  BOOST_TEST(epoch_samples(out) == (std::vector<long>(8, 60000)), out);
  auto lost = steps_lost(out);
  BOOST_TEST_MESSAGE("steps lost to the chief's freeze: "
                     << lost << " (" << line_with(out, "kept the live shards")
                     << ")");
  BOOST_TEST(lost == 0, said);
  for (auto& m : cluster.members())
    BOOST_TEST(count_of(m->out(), "registered with the chief") == 2u, said);
}

BOOST_AUTO_TEST_SUITE_END()

// The chief is no longer the end of the cluster: member nodes outlive it
// (their workers stop, their shards keep their values) and wait for a
// chief at its address; the same chief command run again takes the run
// over from its newest checkpoint, says how many steps that lost, and the
// run completes with every sample trained once per epoch.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cluster_file.hpp"

using namespace troupe::test;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1))
    ++n;
  return n;
}

/// N of the chief's "...: N steps lost, to be trained again"; -1 if none.
long steps_lost(const std::string& out) {
  auto at = out.find(" steps lost, to be trained again");
  if (at == std::string::npos)
    return -1;
  auto begin = out.rfind(' ', at - 1);
  return std::atol(out.c_str() + begin + 1);
}

} // namespace

BOOST_AUTO_TEST_SUITE(chief_restart)

BOOST_AUTO_TEST_CASE(a_killed_chief_run_again_takes_the_run_over) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 2;
  spec.checkpoint_every = 200;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  auto cfg = write_cluster(dir, spec);
  auto members = start_members(dir, cfg, spec);
  auto chief = start_chief(dir, cfg, spec);
  BOOST_REQUIRE_MESSAGE(chief->wait_for_step(500, 120),
                        cluster_outputs(*chief, members));
  auto first = chief->out();
  chief->kill9();
  // The members stay: they wait for a chief at the file's address.
  for (auto& m : members)
    BOOST_REQUIRE_MESSAGE(m->wait_for_output("s for a chief at 127.0.0.1:", 10),
                          m->out() + m->err());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (auto& m : members)
    BOOST_TEST(m->running());
  process again{dir, "chief-again", "troupe-node",
                {"--config", cfg, "--node", "chief"}};
  auto code = again.wait(240);
  BOOST_REQUIRE_MESSAGE(code == 0, "exit " << code << ": " << again.err()
                                           << again.out()
                                           << cluster_outputs(again, members));
  for (auto& m : members)
    BOOST_TEST(m->wait(20) == 0, m->err() + m->out());
  auto out = again.out();
  auto run = first.substr(first.find("identity: run ") + 14, 16);
  BOOST_TEST(has(out, "served run " + run + ", whose chief was lost"), out);
  BOOST_TEST(has(out, "taking over run " + run + " from its checkpoint"), out);
  // The shards on ps0 lived on: how far they had got says what the
  // restore to the checkpoint cost, at most checkpoint.every_steps (plus
  // the steps of one report per worker).
  auto lost = steps_lost(out);
  BOOST_TEST_MESSAGE("steps lost to the chief's restart: " << lost);
  BOOST_TEST(lost >= 0, out);
  BOOST_TEST(lost <= 200 + 2 * 8, out);
  // Every sample trained once per epoch, under the old run's id.
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  // Async Adam's last iterate after 2 epochs ranges 0.71-0.86 undisturbed.
  BOOST_TEST(test_accuracy(out) > 0.70, out);
  for (auto& m : members)
    BOOST_TEST(count_of(m->out(), "registered with the chief (run " + run)
                 == 2u, m->out());
}

BOOST_AUTO_TEST_SUITE_END()

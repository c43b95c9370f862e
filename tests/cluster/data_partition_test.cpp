// training.data_partition in a cluster of real processes: a chief, a shard
// node and a worker node with two workers; mid-epoch 0 the shell kills
// worker 0 (its node restarts it, its leases go back) and adds worker 2.
// The chief's end-of-run report must show what each mode promises:
// - shared: every sample once per epoch, whoever trained it;
// - replicated: every worker every sample once in each of its epochs, the
//   added one from the epoch the others were in;
// - sharded: each epoch cut into one part per worker, halves until the
//   added worker's first epoch, thirds from it on.
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

constexpr int epochs = 3;

/// Runs the scenario in `partition` mode; returns the chief's output.
std::string run_with_a_kill_and_an_add(const std::string& partition) {
  temp_dir dir;
  cluster_spec spec;
  spec.data_partition = partition;
  spec.epochs = epochs;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 2}};
  running_cluster cluster{dir, spec};
  cluster.require_step(100);
  auto& chief = cluster.chief();
  auto [kill_code, kill_out] = run_shell(dir, spec, "kill worker:0");
  BOOST_REQUIRE_MESSAGE(kill_code == 0, kill_out);
  auto [add_code, add_out] = run_shell(dir, spec, "add-worker 1 w0");
  BOOST_REQUIRE_MESSAGE(add_code == 0, add_out);
  cluster.require_chief_finished();
  for (auto& m : cluster.members()) {
    auto code = m->wait(20);
    auto out = m->out();
    BOOST_TEST(code == 0,
               m->how_it_ended()
                 << ": " << m->err() << "\n"
                 << out.substr(out.size() > 3000 ? out.size() - 3000 : 0));
  }
  auto out = chief.out();
  BOOST_TEST(has(out, "worker 0 failed"), out);
  BOOST_TEST(has(out, "adding 1 worker on node w0"), out);
  return out;
}

/// The first epoch in which `v` is not 0 (v.size() if none).
size_t first_nonzero(const std::vector<long>& v) {
  size_t e = 0;
  while (e < v.size() && v[e] == 0)
    ++e;
  return e;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_partition)

BOOST_AUTO_TEST_CASE(shared_trains_each_sample_once_per_epoch_across_workers) {
  auto out = run_with_a_kill_and_an_add("shared");
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000, 60000}),
             out);
  BOOST_TEST(has(out, "worker 2: step"), out);     // the added one trained
  BOOST_TEST(worker_samples(out, 0).empty(), out); // no per-worker promise
}

BOOST_AUTO_TEST_CASE(replicated_gives_each_worker_its_own_epochs_over_the_set) {
  auto out = run_with_a_kill_and_an_add("replicated");
  auto full = std::vector<long>(epochs, 60000);
  BOOST_TEST(worker_samples(out, 0) == full, out); // killed and restarted
  BOOST_TEST(worker_samples(out, 1) == full, out);
  // The added worker: from the epoch the slowest worker was in (0 or, on
  // a slow machine, 1), every epoch whole.
  auto added = worker_samples(out, 2);
  BOOST_REQUIRE_MESSAGE(added.size() == static_cast<size_t>(epochs), out);
  auto from = first_nonzero(added);
  BOOST_TEST_MESSAGE("replicated: worker 2 from epoch " << from);
  BOOST_TEST(from <= 1u, out);
  for (size_t e = from; e < added.size(); ++e)
    BOOST_TEST(added[e] == 60000, out);
  auto per_epoch = epoch_samples(out);
  BOOST_REQUIRE(per_epoch.size() == static_cast<size_t>(epochs));
  for (size_t e = 0; e < per_epoch.size(); ++e)
    BOOST_TEST(per_epoch[e] == 120000 + added[e], out);
  // The chief counts an epoch as every starting worker's pass.
  BOOST_TEST(std::stod(summary_field(out, 5)) >= epochs, out);
}

BOOST_AUTO_TEST_CASE(sharded_gives_each_worker_its_own_part_of_every_epoch) {
  auto out = run_with_a_kill_and_an_add("sharded");
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000, 60000}),
             out);
  auto w0 = worker_samples(out, 0), w1 = worker_samples(out, 1),
       w2 = worker_samples(out, 2);
  BOOST_REQUIRE_MESSAGE(w2.size() == static_cast<size_t>(epochs), out);
  // The added worker takes a third from the first epoch whose parts were
  // not fixed yet when it came: never epoch 0, where it was added.
  auto from = first_nonzero(w2);
  BOOST_TEST_MESSAGE("sharded: worker 2 from epoch " << from);
  BOOST_TEST(from >= 1u, out);
  BOOST_TEST(from < static_cast<size_t>(epochs), out);
  for (size_t e = 0; e < static_cast<size_t>(epochs); ++e) {
    long part = e < from ? 30000 : 20000;
    BOOST_TEST(w0.at(e) == part, "epoch " << e << "\n" << out);
    BOOST_TEST(w1.at(e) == part, "epoch " << e << "\n" << out);
    BOOST_TEST(w2.at(e) == (e < from ? 0 : 20000), "epoch " << e);
  }
}

BOOST_AUTO_TEST_SUITE_END()

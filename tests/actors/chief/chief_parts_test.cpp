// The chief's state parts that own their data (actors/chief/chief_members,
// shard_placement, run_progress, recovery_state, node_answers): each keeps its
// indexes with the entries they index, and its counts as the reports say.
#include <boost/test/unit_test.hpp>

#include "actors/chief/chief_state.hpp"
#include "actors/fixture.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

worker_report report(int32_t steps, int32_t samples, double loss_sum,
                     double seconds) {
  worker_report r;
  r.steps = steps;
  r.samples = samples;
  r.loss_sum = loss_sum;
  r.step_seconds = seconds;
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(chief_parts)

BOOST_AUTO_TEST_CASE(a_report_that_crosses_a_logged_step_splits_its_share) {
  progress_window w;
  BOOST_TEST(!w.add(report(4, 40, 8.0, 0.4), 0, 0));
  // Steps 4..8: the line at step 6 takes half of this report.
  auto line = w.add(report(4, 40, 4.0, 0.8), 4, 6);
  BOOST_REQUIRE(line);
  BOOST_TEST(line->step == 6);
  BOOST_TEST(line->window.steps == 6);
  BOOST_TEST(line->window.samples == 60);
  BOOST_TEST(line->window.loss == 10.0);
  BOOST_TEST(line->window.seconds == 0.8, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(line->window.mean_loss() == 10.0 / 60);
  // The rest opens the next window.
  BOOST_TEST(w.steps == 2);
  BOOST_TEST(w.samples == 20);
  BOOST_TEST(w.loss == 2.0);
  BOOST_TEST(w.seconds == 0.4, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_run_progress_leaves_the_shells_pauses_out) {
  run_progress p;
  p.schedule = std::make_unique<run_schedule>(/*per_epoch=*/100,
                                              /*eval_every=*/0,
                                              /*checkpoint_every=*/0,
                                              /*log_every=*/10);
  p.begin(100.0);
  BOOST_TEST(p.set_user_paused(true, 110.0));
  BOOST_TEST(!p.set_user_paused(true, 111.0)); // already paused
  BOOST_TEST(p.training_seconds(115.0) == 10.0);
  BOOST_TEST(p.set_user_paused(false, 120.0));
  BOOST_TEST(p.training_seconds(130.0) == 20.0);
  BOOST_TEST(!p.count(report(5, 50, 5.0, 1.0), 130.0));
  BOOST_TEST(p.recent_loss() == 0.1);
  auto line = p.count(report(5, 50, 10.0, 1.0), 140.0);
  BOOST_REQUIRE(line);
  BOOST_TEST(line->step == 10);
  BOOST_TEST(line->window.samples == 100);
  // The window's seconds are the wall time since the start, the pause
  // (10 s) left out.
  BOOST_TEST(line->window.seconds == 30.0);
  BOOST_TEST(p.steps() == 10);
  BOOST_TEST(p.samples() == 100);
  p.set_steps(4); // a recovery sets the steps back
  BOOST_TEST(p.steps() == 4);
}

BOOST_AUTO_TEST_CASE(members_are_named_by_their_actors_until_forgotten) {
  deterministic_system sys;
  chief_members m;
  auto agent = caf::actor_cast<node_agent_actor>(
    sys.sys->spawn([]() -> caf::behavior { return {[](int) {}}; }));
  m.add_node("a").planned_workers = 2;
  BOOST_TEST(!m.is_up("a"));
  m.register_agent("a", agent);
  BOOST_TEST(m.is_up("a"));
  BOOST_TEST(m.find_node("b") == nullptr);
  auto w0 = m.add_worker("a");
  auto w1 = m.add_worker("a");
  BOOST_TEST(w0 == 0);
  BOOST_TEST(w1 == 1);
  BOOST_TEST(m.worker(w1).home == "a");
  BOOST_TEST(m.live_workers() == 2);
  BOOST_TEST(m.least_loaded_node() == "a");
  auto handle = caf::actor_cast<worker_actor>(
    sys.sys->spawn([]() -> caf::behavior { return {[](int) {}}; }));
  m.worker_started(w1, handle);
  BOOST_TEST((m.worker(w1).state == worker_phase::running));
  BOOST_TEST((m.forget_worker(handle.address()) == std::optional<int32_t>{w1}));
  BOOST_TEST(!m.forget_worker(handle.address())); // once
  BOOST_TEST(
    (m.forget_agent(agent.address()) == std::optional<std::string>{"a"}));
  BOOST_TEST(m.mark_down("a"));
  BOOST_TEST(!m.mark_down("a"));
  BOOST_TEST(m.least_loaded_node().empty());
  m.worker(w0).state = worker_phase::finished;
  BOOST_TEST(m.live_workers() == 1);
  BOOST_TEST(m.skip_file("x.npy"));
  BOOST_TEST(!m.skip_file("x.npy"));
  BOOST_TEST(m.total_restarts() == 0);
  caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  sys.run();
}

BOOST_AUTO_TEST_CASE(shards_and_replicas_are_named_by_their_actors) {
  deterministic_system sys;
  auto spawn_shard = [&] {
    return caf::actor_cast<shard_actor>(
      sys.sys->spawn([]() -> caf::behavior { return {[](int) {}}; }));
  };
  shard_placement p;
  p.ranges = {{0, 10}, {10, 25}};
  BOOST_TEST((p.bounds() == std::vector<uint64_t>{0, 10, 25}));
  p.plan({"a", "b"});
  BOOST_TEST(p.count() == 2u);
  auto s0 = spawn_shard(), s1 = spawn_shard(), r0 = spawn_shard();
  p.started(0, s0, "a");
  p.started(1, s1, "c"); // placed elsewhere than planned
  BOOST_TEST(p.node_of(1) == "c");
  BOOST_TEST((p.shard_of(s1.address()) == std::optional<size_t>{1}));
  BOOST_TEST(
    (p.live_per_node() == std::map<std::string, int>{{"a", 1}, {"c", 1}}));
  p.lost(0);
  BOOST_TEST(!p.shard_of(s0.address()));
  BOOST_TEST(!p.handles()[0]);
  p.replicas().resize(2);
  BOOST_TEST(!p.has_replica(0));
  p.replica_started(0, r0);
  BOOST_TEST(p.has_replica(0));
  BOOST_TEST((p.replica_of(r0.address()) == std::optional<size_t>{0}));
  p.replica_took_over(0, r0);
  p.started(0, r0, "b");
  BOOST_TEST(!p.has_replica(0));
  BOOST_TEST(!p.replica_of(r0.address()));
  BOOST_TEST((p.shard_of(r0.address()) == std::optional<size_t>{0}));
  BOOST_TEST(p.replica_homeless(1));
  BOOST_TEST(!p.replica_homeless(1)); // said once
  BOOST_TEST(p.drop_replicas().empty());
  BOOST_TEST(p.replica_homeless(1)); // forgotten with the replicas
  for (auto& h : {s0, s1, r0})
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  sys.run();
}

BOOST_AUTO_TEST_CASE(a_recovery_makes_earlier_requests_stale) {
  recovery_state r;
  auto gen = r.generation();
  BOOST_TEST(!r.stale(gen));
  r.begin_recovery();
  BOOST_TEST(r.stale(gen));
  BOOST_TEST(r.stale(r.generation())); // while it recovers
  int ran = 0;
  r.when_over([&] { ++ran; });
  r.stopping(3);
  BOOST_TEST(!r.all_stopped());
  BOOST_TEST(r.stopped(3));
  BOOST_TEST(!r.stopped(3));
  BOOST_TEST(r.all_stopped());
  BOOST_TEST(r.wait_for_shard_nodes());
  BOOST_TEST(!r.wait_for_shard_nodes()); // said once
  r.shard_wait_expired();
  BOOST_TEST(r.shard_wait_over());
  r.end_shard_wait();
  BOOST_TEST(!r.waiting_for_shard_nodes());
  r.end();
  BOOST_TEST(!r.stale(r.generation()));
  for (auto& f : r.take_waiting())
    f();
  BOOST_TEST(ran == 1);
  BOOST_TEST(r.take_waiting().empty());
  BOOST_TEST(r.recoveries() == 1);
  r.begin_move();
  r.move_done(1.5);
  BOOST_TEST(r.recoveries() == 1);
  BOOST_TEST(r.moves() == 1);
  BOOST_TEST(r.move_seconds() == 1.5);
}

BOOST_AUTO_TEST_CASE(a_lost_node_gives_up_its_awaited_answers_once) {
  node_answers answers;
  int lost_ps0 = 0, lost_ps1 = 0;
  auto a = answers.await("ps0", [&] { ++lost_ps0; });
  auto b = answers.await("ps0", [&] { ++lost_ps0; });
  auto c = answers.await("ps1", [&] { ++lost_ps1; });
  // The reply to a came: it is settled, and the node's loss skips it.
  BOOST_TEST(node_answers::first(a));
  BOOST_TEST(!node_answers::first(a));
  answers.node_lost("ps0");
  BOOST_TEST(lost_ps0 == 1); // b only
  BOOST_TEST(lost_ps1 == 0);
  // b's reply (or timeout) that comes after all is not taken.
  BOOST_TEST(!node_answers::first(b));
  answers.node_lost("ps0"); // nothing is awaited from it any more
  BOOST_TEST(lost_ps0 == 1);
  BOOST_TEST(answers.in_flight() == 1u);
  // Settled answers leave when the next one is awaited: the map stays as
  // small as what is in flight.
  BOOST_TEST(node_answers::first(c));
  auto d = answers.await("ps1", [&] { ++lost_ps1; });
  BOOST_TEST(answers.in_flight() == 1u);
  answers.node_lost("ps1");
  BOOST_TEST(lost_ps1 == 1);
  BOOST_TEST(*d);
}

BOOST_AUTO_TEST_SUITE_END()

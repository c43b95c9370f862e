// The shard actor refuses bad pushes with an error reply and keeps its state.
#include "actors/shard.hpp"

#include <boost/test/unit_test.hpp>
#include <limits>

#include "fixture.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

/// Joins workers 0 and 1 to shard `s`, as their nodes do first.
template <class Shard>
void join_two_workers(caf::scoped_actor& self, const Shard& s) {
  for (int32_t w : {0, 1})
    self->request(s, std::chrono::seconds(10), join_atom_v, w)
      .receive([](int64_t) {}, [](caf::error&) {});
}

} // namespace

BOOST_AUTO_TEST_SUITE(shard)

BOOST_AUTO_TEST_CASE(bad_pushes_get_an_error_and_change_nothing) {
  cluster_fixture f;
  shard_options o;
  o.block.optimizer.learning_rate = 1.0;
  o.initial = {1.f, 2.f, 3.f};
  auto s = f.sys->spawn(shard_impl, o);
  caf::scoped_actor self{*f.sys};
  auto t = std::chrono::seconds(10);
  self->request(s, t, join_atom_v, int32_t{0})
    .receive([](int64_t) {}, [](caf::error&) {});
  auto push = [&](gradient_push g) {
    caf::error result;
    self->request(s, t, push_atom_v, std::move(g))
      .receive([](push_ack&) {}, [&](caf::error& err) { result = err; });
    return result;
  };
  auto err = push(gradient_push::of(0, 0, 0, {1.f, 1.f}));
  BOOST_TEST((err == errc::wrong_size));
  err = push(gradient_push::of(0, 7, 0, {1.f, 1.f, 1.f}));
  BOOST_TEST((err == errc::invalid_argument));
  err = push(gradient_push::of(
    0, 0, 0, {1.f, std::numeric_limits<float>::infinity(), 1.f}));
  BOOST_TEST((err == errc::non_finite));
  shard_stats stats;
  self->request(s, t, stats_atom_v)
    .receive([&](shard_stats& x) { stats = x; }, [](caf::error&) {});
  BOOST_TEST(stats.refused == 3);
  BOOST_TEST(stats.version == 0);
  float_block values;
  self->request(s, t, pull_atom_v, int32_t{0}, int64_t{0})
    .receive([&](float_block& b) { values = b; }, [](caf::error&) {});
  BOOST_TEST(*values.values == (std::vector<float>{1.f, 2.f, 3.f}));
  // A good push still works.
  BOOST_TEST(!push(gradient_push::of(0, 0, 0, {1.f, 1.f, 1.f})));
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(with_lookahead_workers_pull_ahead_and_the_chief_does_not) {
  // async, SGD at rate 1, stale_lookahead 1: after a fresh push and one
  // a version stale, the pushes' mean staleness is 1/32. A worker's pull
  // gets the values carried on 1/32 of the last step further; the chief's
  // (worker -1: evaluation, checkpoints) gets the values themselves.
  cluster_fixture f;
  shard_options o;
  o.block.mode = cluster_config::mode::async;
  o.block.lookahead = 1;
  o.block.optimizer.learning_rate = 1.0;
  o.initial = {0.f, 0.f};
  auto s = f.sys->spawn(shard_impl, o);
  caf::scoped_actor self{*f.sys};
  auto t = std::chrono::seconds(10);
  join_two_workers(self, s);
  // (shard 0, worker, the version pulled, the gradient)
  for (auto& g : {gradient_push::of(0, 0, 0, {-1.f, 2.f}),
                  gradient_push::of(0, 1, 0, {-1.f, 0.f})})
    self->request(s, t, push_atom_v, g)
      .receive([](push_ack&) {},
               [](caf::error& err) { BOOST_FAIL(to_string(err)); });
  auto pull = [&](int32_t worker) {
    float_block out;
    self->request(s, t, pull_atom_v, worker, int64_t{0})
      .receive([&](float_block& b) { out = b; },
               [](caf::error& err) { BOOST_FAIL(to_string(err)); });
    return out;
  };
  auto chief = pull(-1);
  BOOST_TEST(*chief.values == (std::vector<float>{2.f, -2.f}));
  auto worker = pull(1);
  BOOST_TEST(worker.version == 2);
  BOOST_TEST((*worker.values)[0] == 2.f + 1.f / 32,
             boost::test_tools::tolerance(1e-6f));
  BOOST_TEST((*worker.values)[1] == -2.f);
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_pull_that_is_not_ready_is_held_then_answered_ask_again) {
  // sync, two workers: worker 0's pull for version 1 waits for the update
  // that needs worker 1's push too. The shard holds it; after its hold it
  // answers "ask again" (no values), and an update answers a held pull.
  cluster_fixture f;
  shard_options o;
  o.block.mode = cluster_config::mode::sync;
  o.block.aggregate = 2;
  o.block.optimizer.learning_rate = 1.0;
  o.initial = {1.f, 2.f};
  o.hold = std::chrono::milliseconds(400);
  auto s = f.sys->spawn(shard_impl, o);
  caf::scoped_actor self{*f.sys};
  auto t = std::chrono::seconds(10);
  join_two_workers(self, s);
  auto next_block = [&](caf::timespan within) {
    std::optional<float_block> out;
    self->receive([&](float_block& b) { out = b; },
                  caf::after(within) >> [] {});
    return out;
  };
  auto sent = std::chrono::steady_clock::now();
  self->send(s, pull_atom_v, int32_t{0}, int64_t{1});
  BOOST_TEST(!next_block(std::chrono::milliseconds(200)));
  auto again = next_block(std::chrono::seconds(5));
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->ask_again());
  BOOST_TEST(!again->values);
  BOOST_TEST((std::chrono::steady_clock::now() - sent
              >= std::chrono::milliseconds(400)));
  // Asked again, it is held until both pushes are in.
  self->send(s, pull_atom_v, int32_t{0}, int64_t{1});
  for (int32_t w : {0, 1})
    self->request(s, t, push_atom_v, gradient_push::of(0, w, 0, {1.f, 1.f}))
      .receive([](push_ack&) {}, [](caf::error&) {});
  auto ready = next_block(std::chrono::seconds(5));
  BOOST_REQUIRE(ready.has_value());
  BOOST_TEST(!ready->ask_again());
  BOOST_TEST(ready->version == 1);
  BOOST_TEST(*ready->values == (std::vector<float>{0.f, 1.f}));
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()

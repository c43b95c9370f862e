// The shard actor refuses bad pushes with an error reply and keeps its state.
#include "actors/shard.hpp"

#include <boost/test/unit_test.hpp>
#include <limits>

#include "fixture.hpp"
#include "runtime/errc.hpp"

using namespace troupe;
using troupe::test::cluster_fixture;

BOOST_AUTO_TEST_SUITE(shard)

BOOST_AUTO_TEST_CASE(bad_pushes_get_an_error_and_change_nothing) {
  cluster_fixture f;
  shard_options o;
  o.block.optimizer.learning_rate = 1.0;
  o.initial = {1.f, 2.f, 3.f};
  auto s = f.sys->spawn(shard_impl, o);
  caf::scoped_actor self{*f.sys};
  auto t = std::chrono::seconds(10);
  self->request(s, t, join_atom_v, int32_t{0}).receive([](int64_t) {},
                                                       [](caf::error&) {});
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
  self->request(s, t, stats_atom_v).receive([&](shard_stats& x) { stats = x; },
                                            [](caf::error&) {});
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

BOOST_AUTO_TEST_SUITE_END()

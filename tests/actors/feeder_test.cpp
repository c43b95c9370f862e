// The feeder holds a lease it cannot grant (paused, every batch out)
// instead of answering "wait" at once, grants it as soon as it can, and
// answers "wait" only once it has held it for its hold time.
#include "actors/feeder.hpp"

#include <algorithm>

#include <boost/test/unit_test.hpp>

#include "fixture.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

/// 4 batches of 16 in one epoch; holds leases for `hold`.
feeder_actor small_feeder(cluster_fixture& f, caf::timespan hold) {
  feeder_options o;
  o.samples = 64;
  o.batch = 16;
  o.epochs = 1;
  o.hold = hold;
  return f.sys->spawn(feeder_impl, o);
}

/// The reply to a lease sent earlier with `send`, if one comes within
/// `within`.
std::optional<lease_reply> reply_within(caf::scoped_actor& self,
                                        caf::timespan within) {
  std::optional<lease_reply> out;
  self->receive([&](lease_reply& r) { out = std::move(r); },
                caf::after(within) >> [] {});
  return out;
}

/// Leases `n` batches for `worker` one after the other; their ids.
std::vector<int64_t> lease(caf::scoped_actor& self, const feeder_actor& feeder,
                           int32_t worker, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i)
    self
      ->request(feeder, std::chrono::seconds(5), lease_atom_v, worker,
                int32_t{1})
      .receive([&](lease_reply& r) { ids.push_back(r.grant.id); },
               [](caf::error&) {});
  return ids;
}

/// The reply to one request for `count` batches for `worker`.
lease_reply lease_at_once(caf::scoped_actor& self, const feeder_actor& feeder,
                          int32_t worker, int32_t count) {
  lease_reply r;
  self->request(feeder, std::chrono::seconds(5), lease_atom_v, worker, count)
    .receive([&](lease_reply& x) { r = std::move(x); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(feeder)

BOOST_AUTO_TEST_CASE(a_paused_feeder_holds_a_lease_and_grants_it_on_resume) {
  cluster_fixture f;
  auto feeder = small_feeder(f, 30s);
  caf::scoped_actor self{*f.sys};
  self->request(feeder, 5s, pause_atom_v)
    .receive([](feeder_position&) {}, [](caf::error&) {});
  self->send(feeder, lease_atom_v, int32_t{0}, int32_t{1});
  BOOST_TEST(!reply_within(self, 200ms)); // held, not refused
  self->send(feeder, resume_atom_v);
  auto r = reply_within(self, 5s);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == lease_reply::granted);
  BOOST_TEST(r->held);
  BOOST_TEST(r->grant.samples.size() == 16u);
  self->send_exit(feeder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(
  a_lease_held_while_every_batch_is_out_gets_what_comes_first) {
  cluster_fixture f;
  auto feeder = small_feeder(f, 30s);
  caf::scoped_actor self{*f.sys};
  auto ids = lease(self, feeder, 0, 4);
  BOOST_REQUIRE_EQUAL(ids.size(), 4u);
  // All out: worker 1 waits until worker 0 is lost and its batches return.
  self->send(feeder, lease_atom_v, int32_t{1}, int32_t{1});
  BOOST_TEST(!reply_within(self, 200ms));
  self->request(feeder, 5s, requeue_atom_v, int32_t{0})
    .receive([](int32_t n) { BOOST_TEST(n == 4); }, [](caf::error&) {});
  auto r = reply_within(self, 5s);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == lease_reply::granted);
  // The rest are acked: a lease held then is answered "done" by the last
  // ack.
  auto rest = lease(self, feeder, 1, 3);
  self->send(feeder, lease_atom_v, int32_t{2}, int32_t{1});
  BOOST_TEST(!reply_within(self, 100ms));
  self->send(feeder, ack_atom_v, std::vector<int64_t>{r->grant.id});
  for (auto id : rest)
    self->send(feeder, ack_atom_v, std::vector<int64_t>{id});
  auto done = reply_within(self, 5s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == lease_reply::done);
  self->send_exit(feeder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(
  a_held_lease_is_answered_wait_after_its_hold_and_not_before) {
  cluster_fixture f;
  auto feeder = small_feeder(f, 400ms);
  caf::scoped_actor self{*f.sys};
  self->request(feeder, 5s, pause_atom_v)
    .receive([](feeder_position&) {}, [](caf::error&) {});
  auto sent = std::chrono::steady_clock::now();
  self->send(feeder, lease_atom_v, int32_t{0}, int32_t{1});
  auto r = reply_within(self, 10s);
  auto waited = std::chrono::steady_clock::now() - sent;
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == lease_reply::wait);
  BOOST_TEST((waited >= 400ms));
  // A lost worker's held lease is let go at its requeue, never granted.
  self->send(feeder, lease_atom_v, int32_t{3}, int32_t{1});
  BOOST_TEST(!reply_within(self, 100ms));
  self->request(feeder, 5s, requeue_atom_v, int32_t{3})
    .receive([](int32_t) {}, [](caf::error&) {});
  auto gone = reply_within(self, 100ms);
  BOOST_REQUIRE(gone.has_value());
  BOOST_TEST(gone->status == lease_reply::wait);
  self->send_exit(feeder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(
  a_worker_leases_several_batches_at_once_in_the_plans_order) {
  cluster_fixture f;
  auto feeder = small_feeder(f, 30s);
  caf::scoped_actor self{*f.sys};
  // Three of the four batches, in the order single leases would give.
  auto r = lease_at_once(self, feeder, 0, 3);
  BOOST_TEST(r.status == lease_reply::granted);
  BOOST_REQUIRE_EQUAL(r.more.size(), 2u);
  BOOST_TEST(r.grant.index == 0);
  BOOST_TEST(r.more[0].index == 1);
  BOOST_TEST(r.more[1].index == 2);
  // Asking for more than are left gets what is left; past
  // max_leases_ahead, no more than that.
  auto last = lease_at_once(self, feeder, 1, 1000);
  BOOST_TEST(last.status == lease_reply::granted);
  BOOST_TEST(last.grant.index == 3);
  BOOST_TEST(last.more.empty());
  // A lost worker's batches leased ahead go back with its lease: all
  // three are leased again, and the plan completes once each is acked.
  self->request(feeder, 5s, requeue_atom_v, int32_t{0})
    .receive([](int32_t n) { BOOST_TEST(n == 3); }, [](caf::error&) {});
  auto again = lease_at_once(self, feeder, 2, 8);
  BOOST_REQUIRE_EQUAL(again.more.size(), 2u);
  std::vector<int64_t> batches{again.grant.batch, again.more[0].batch,
                               again.more[1].batch};
  std::sort(batches.begin(), batches.end());
  BOOST_TEST(
    batches
    == (std::vector<int64_t>{r.grant.batch, r.more[0].batch, r.more[1].batch}));
  self->send(feeder, ack_atom_v,
             std::vector<int64_t>{again.grant.id, again.more[0].id,
                                  again.more[1].id, last.grant.id});
  BOOST_TEST(lease_at_once(self, feeder, 2, 4).status == lease_reply::done);
  self->send_exit(feeder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(
  pauses_that_overlap_are_all_answered_once_the_leases_are_in) {
  cluster_fixture f;
  auto feeder = small_feeder(f, 30s);
  caf::scoped_actor self{*f.sys};
  // A worker holds three batches (one leased, two ahead): the user's
  // pause and a checkpoint's wait for all three acks, and both get the
  // same position then.
  auto r = lease_at_once(self, feeder, 0, 3);
  BOOST_REQUIRE_EQUAL(r.more.size(), 2u);
  self->send(feeder, pause_atom_v);
  self->send(feeder, pause_atom_v);
  auto position = [&](caf::timespan within) {
    std::optional<feeder_position> out;
    self->receive([&](feeder_position& p) { out = std::move(p); },
                  [&](caf::error& e) { BOOST_FAIL(to_string(e)); },
                  caf::after(within) >> [] {});
    return out;
  };
  self->send(feeder, ack_atom_v,
             std::vector<int64_t>{r.grant.id, r.more[0].id});
  BOOST_TEST(!position(200ms)); // one batch still out
  self->send(feeder, ack_atom_v, std::vector<int64_t>{r.more[1].id});
  auto first = position(5s);
  auto second = position(5s);
  BOOST_REQUIRE(first.has_value());
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(first->step == 3);
  BOOST_TEST(second->step == 3);
  self->send_exit(feeder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()

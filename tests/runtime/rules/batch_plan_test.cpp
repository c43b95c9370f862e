#include "runtime/rules/batch_plan.hpp"

#include <boost/test/unit_test.hpp>
#include <numeric>
#include <set>

#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(batch_plan)

BOOST_AUTO_TEST_CASE(batches_follow_the_epoch_order) {
  troupe::batch_plan plan{10, 4, 7, 2, 0};
  BOOST_TEST(plan.batches_per_epoch() == 3);
  auto order = epoch_order(10, 7, 0);
  auto a = plan.lease(0);
  BOOST_REQUIRE(a);
  BOOST_TEST(a->samples
             == std::vector<uint32_t>(order.begin(), order.begin() + 4));
  plan.lease(1);
  auto c = plan.lease(0);
  BOOST_TEST(c->samples.size() == 2u); // the short last batch
  auto d = plan.lease(1);
  BOOST_TEST(d->epoch == 1);
  auto order1 = epoch_order(10, 7, 1);
  BOOST_TEST(d->samples
             == std::vector<uint32_t>(order1.begin(), order1.begin() + 4));
}

BOOST_AUTO_TEST_CASE(a_stream_is_trained_in_its_own_order) {
  // training.order "stream": every epoch walks the set from its first
  // sample to its last, whoever leases.
  troupe::batch_plan plan{10, 4, 7, 2, 0, data_partition::shared, 1, {}, true};
  std::vector<uint32_t> seen;
  for (int k = 0; k < 6; ++k) {
    auto b = plan.lease(k % 2);
    BOOST_REQUIRE(b);
    BOOST_TEST(b->epoch == k / 3);
    seen.insert(seen.end(), b->samples.begin(), b->samples.end());
  }
  std::vector<uint32_t> twice;
  for (int e = 0; e < 2; ++e)
    for (uint32_t i = 0; i < 10; ++i)
      twice.push_back(i);
  BOOST_TEST(seen == twice);
}

BOOST_AUTO_TEST_CASE(an_open_plan_leases_whole_batches_as_the_set_grows) {
  // data.follow: the set grows part by part; a batch may span two parts,
  // so the tail of the newest one waits for the next, and only closing
  // the plan leases it as a smaller last batch.
  troupe::batch_plan plan{0, 4, 7, 1, 0, data_partition::shared, 1, {}, true};
  plan.follow();
  BOOST_TEST(!plan.lease(0));
  BOOST_TEST(!plan.complete());
  plan.extend(6); // a part of 6: one whole batch
  std::vector<uint32_t> seen;
  auto take = [&](int worker) {
    auto b = plan.lease(worker);
    if (b) {
      seen.insert(seen.end(), b->samples.begin(), b->samples.end());
      BOOST_TEST(plan.ack(b->id));
    }
    return b.has_value();
  };
  BOOST_TEST(take(0));
  BOOST_TEST(!take(1)); // samples 4 and 5 wait
  BOOST_TEST(!plan.complete());
  plan.extend(11); // a part of 5: samples 4..7, then 8..10 wait
  BOOST_TEST(take(1));
  BOOST_TEST(!take(0));
  BOOST_TEST(plan.position() == 2);
  plan.close();
  BOOST_TEST(take(0)); // the tail: 8, 9, 10
  BOOST_TEST(!take(1));
  BOOST_TEST(plan.complete());
  std::vector<uint32_t> all(11);
  std::iota(all.begin(), all.end(), 0u);
  BOOST_TEST(seen == all);
  // A plan restored at batch 2 (the chief's follow_cover gave it its
  // parts back first) goes on from there.
  troupe::batch_plan again{0, 4, 7, 1, 0, data_partition::shared, 1, {}, true};
  again.follow();
  again.extend(11);
  BOOST_TEST(!again.restore(2));
  BOOST_TEST(!again.lease(0)); // 8..10 wait for the next part
  again.extend(15);
  auto b = again.lease(0);
  BOOST_REQUIRE(b);
  BOOST_TEST(b->samples == (std::vector<uint32_t>{8, 9, 10, 11}));
}

BOOST_AUTO_TEST_CASE(skipped_samples_leave_every_batch_leased_after) {
  // 40 samples in batches of 4 over 3 epochs, shuffled in blocks of 4 (a
  // batch is one block); a file of samples 8..23 changes after the first
  // lease, and that lease is requeued.
  troupe::batch_plan plan{40, 4, 5, 3, 0, data_partition::shared, 4};
  auto before = plan.lease(0);
  BOOST_REQUIRE(before);
  plan.skip(8, 16);
  plan.skip(8, 16); // a second worker reports the same file
  BOOST_TEST(plan.skipped().size() == 1u);
  BOOST_TEST(plan.requeue(0) == 1);
  std::vector<std::multiset<uint32_t>> trained(3);
  int leases = 0;
  while (!plan.complete()) {
    auto g = plan.lease(1);
    if (!g) { // the last batches held skipped samples only
      BOOST_TEST(plan.complete());
      break;
    }
    BOOST_REQUIRE(++leases < 100);
    BOOST_TEST(!g->samples.empty());
    for (auto i : g->samples) {
      BOOST_TEST((i < 8 || i >= 24), "sample " << i << " was skipped");
      trained[static_cast<size_t>(g->epoch)].insert(i);
    }
    BOOST_TEST(plan.ack(g->id));
  }
  // Every other sample once per epoch, and the counts say so.
  for (int e = 0; e < 3; ++e) {
    BOOST_TEST(trained[static_cast<size_t>(e)].size() == 24u);
    BOOST_TEST(std::set<uint32_t>(trained[static_cast<size_t>(e)].begin(),
                                  trained[static_cast<size_t>(e)].end())
                 .size()
               == 24u);
    BOOST_TEST(plan.samples_done(e) == 24);
  }
  // The 4 batches of skipped samples only, per epoch, were done without
  // a lease.
  BOOST_TEST(plan.acked() == 30);
  BOOST_TEST(leases == 30 - 3 * 4);
}

BOOST_AUTO_TEST_CASE(every_sample_once_per_epoch_when_workers_die) {
  troupe::batch_plan plan{103, 8, 3, 3, 0};
  // Per epoch, how often each sample was trained (acked).
  std::vector<std::multiset<uint32_t>> trained(3);
  std::vector<lease_grant> held;
  int round = 0;
  while (!plan.complete()) {
    BOOST_REQUIRE(round++ < 1000);
    for (int32_t w = 0; w < 3; ++w)
      if (auto g = plan.lease(w))
        held.push_back(*g);
    // Worker 1 dies every 5th round holding its leases; the others ack.
    if (round % 5 == 0)
      BOOST_TEST(plan.requeue(1) > 0);
    std::vector<lease_grant> keep;
    for (auto& g : held) {
      if (plan.ack(g.id))
        trained[g.epoch].insert(g.samples.begin(), g.samples.end());
    }
    held = keep;
  }
  for (int e = 0; e < 3; ++e) {
    BOOST_TEST(trained[e].size() == 103u);
    BOOST_TEST(std::set<uint32_t>(trained[e].begin(), trained[e].end()).size()
               == 103u);
    BOOST_TEST(plan.samples_done(e) == 103);
  }
  BOOST_TEST(plan.acked() == 3 * 13);
}

BOOST_AUTO_TEST_CASE(ack_is_once_and_max_batches_stops_the_plan) {
  troupe::batch_plan plan{100, 10, 1, 5, 3};
  auto a = plan.lease(0);
  BOOST_TEST(plan.ack(a->id));
  BOOST_TEST(!plan.ack(a->id));
  BOOST_TEST(!plan.ack(12345));
  plan.lease(0);
  plan.lease(0);
  BOOST_TEST(!plan.lease(0));
  BOOST_TEST(!plan.complete()); // two still out
  BOOST_TEST(plan.outstanding() == 2u);
}

BOOST_AUTO_TEST_CASE(restore_continues_at_the_position) {
  troupe::batch_plan a{50, 10, 9, 2, 0}, b{50, 10, 9, 2, 0};
  for (int i = 0; i < 7; ++i)
    a.ack(a.lease(0)->id);
  b.restore(a.position());
  BOOST_TEST(b.acked() == 7);
  BOOST_TEST(b.samples_done(0) == 50);
  BOOST_TEST(b.samples_done(1) == 20);
  BOOST_TEST(a.lease(0)->samples == b.lease(0)->samples);
}

BOOST_AUTO_TEST_CASE(grants_carry_their_number_in_the_plan) {
  troupe::batch_plan plan{50, 10, 9, 2, 0}; // 5 batches per epoch
  for (int64_t n = 0; n < 7; ++n) {
    auto g = plan.lease(0);
    BOOST_REQUIRE(g);
    BOOST_TEST(g->batch == n);
    BOOST_TEST(g->batch == g->epoch * 5 + g->index);
  }
  // A requeued batch keeps its number.
  plan.requeue(0);
  BOOST_TEST(plan.lease(1)->batch == 0);
}

BOOST_AUTO_TEST_CASE(restore_with_batches_done_after_the_position) {
  // A lost chief's feeder had handed out batches 3..8 of a 5-per-epoch
  // plan after its checkpoint at 3; the live shards applied 3, 5, 6 and 8.
  troupe::batch_plan plan{50, 10, 9, 2, 0};
  BOOST_REQUIRE(!plan.restore(3, {8, 3, 6, 5}));
  BOOST_TEST(plan.acked() == 7);
  BOOST_TEST(plan.position() == 9);
  BOOST_TEST(plan.queued() == 2u);
  BOOST_TEST(plan.samples_done(0) == 40); // 0, 1, 2, 3 of epoch 0
  BOOST_TEST(plan.samples_done(1) == 30); // 5, 6, 8 = epoch 1's 0, 1, 3
  // The holes come first, then the plan goes on after the last done.
  std::vector<int64_t> next;
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto g = plan.lease(0);
    next.push_back(g->batch);
    ids.push_back(g->id);
  }
  BOOST_TEST(next == (std::vector<int64_t>{4, 7, 9}));
  BOOST_TEST(!plan.lease(0)); // nothing else is left
  for (auto id : ids)
    plan.ack(id);
  // Every sample once per epoch, nothing twice.
  BOOST_TEST(plan.complete());
  BOOST_TEST(plan.epoch_samples() == (std::vector<int64_t>{50, 50}));
}

BOOST_AUTO_TEST_CASE(restore_gives_batches_some_shards_applied_first) {
  // Every live shard applied 3 and 4; batch 8 reached some shards only
  // before their chief was lost: it comes first, with 5..7 that none
  // applied, and once trained the plan is whole.
  troupe::batch_plan plan{50, 10, 9, 2, 0};
  BOOST_REQUIRE(!plan.restore(3, {3, 4}, {}, {8}));
  BOOST_TEST(plan.acked() == 5);
  BOOST_TEST(plan.queued() == 4u);
  std::vector<int64_t> next;
  std::vector<int64_t> ids;
  while (auto g = plan.lease(0)) {
    next.push_back(g->batch);
    ids.push_back(g->id);
  }
  BOOST_TEST(next == (std::vector<int64_t>{5, 6, 7, 8, 9}));
  for (auto id : ids)
    plan.ack(id);
  BOOST_TEST(plan.complete());
  BOOST_TEST(plan.epoch_samples() == (std::vector<int64_t>{50, 50}));
  // Named as done and again, or again twice: refused.
  BOOST_TEST(describe(plan.restore(3, {4}, {}, {4}))
             == "feeder restore: batch 4 is named twice");
  BOOST_TEST(describe(plan.restore(3, {}, {}, {2}))
             == "feeder restore: batch 2 is outside [3, 10)");
}

BOOST_AUTO_TEST_CASE(restore_refuses_batches_it_cannot_place) {
  troupe::batch_plan plan{50, 10, 9, 2, 0};
  plan.ack(plan.lease(0)->id);
  auto before = plan.acked();
  auto err = plan.restore(3, {2});
  BOOST_TEST(describe(err) == "feeder restore: batch 2 is outside [3, 10)");
  err = plan.restore(3, {4, 4});
  BOOST_TEST(describe(err) == "feeder restore: batch 4 is named twice");
  BOOST_TEST(static_cast<bool>(plan.restore(3, {10})));
  BOOST_TEST(plan.acked() == before); // unchanged
}

BOOST_AUTO_TEST_SUITE_END()

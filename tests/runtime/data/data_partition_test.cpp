// batch_plan in replicated and sharded mode: what each worker trains per
// epoch, with workers that die holding leases and workers that join
// mid-epoch, and the plan's text in checkpoints.
#include "runtime/rules/batch_plan.hpp"

#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;

namespace {

/// Samples trained (acked), by worker and epoch, each with its count.
using trained_map =
  std::map<int32_t, std::map<int32_t, std::multiset<uint32_t>>>;

/// Drives `plan` the way workers do: each round every live worker leases
/// one batch and acks the one it leased the round before (one step in
/// flight). `before_round(round)` may requeue, join or kill.
struct driver {
  batch_plan& plan;
  std::set<int32_t> live;
  std::map<int32_t, lease_grant> held;
  trained_map trained;
  int rounds = 0;

  void kill(int32_t w) {
    held.erase(w);
    plan.requeue(w);
  }

  template <class F>
  void run(F before_round, int max_rounds = 5000) {
    while (!plan.complete()) {
      BOOST_REQUIRE(rounds < max_rounds);
      before_round(rounds++);
      for (auto w : live) {
        if (auto it = held.find(w); it != held.end()) {
          if (plan.ack(it->second.id))
            trained[w][it->second.epoch].insert(it->second.samples.begin(),
                                                it->second.samples.end());
          held.erase(it);
        }
        if (auto g = plan.lease(w))
          held[w] = std::move(*g);
      }
    }
  }
};

std::set<uint32_t> all_of(size_t n) {
  std::set<uint32_t> s;
  for (uint32_t i = 0; i < n; ++i)
    s.insert(i);
  return s;
}

bool once_each(const std::multiset<uint32_t>& got,
               const std::set<uint32_t>& want) {
  return got.size() == want.size()
         && std::set<uint32_t>(got.begin(), got.end()) == want;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_partition)

BOOST_AUTO_TEST_CASE(steps_per_epoch_follow_the_partition) {
  BOOST_TEST(plan_steps_per_epoch(troupe::data_partition::shared, 103, 10, 3)
             == 11);
  BOOST_TEST(
    plan_steps_per_epoch(troupe::data_partition::replicated, 103, 10, 3) == 33);
  // Parts of 34, 34 and 35 samples: 4 batches each.
  BOOST_TEST(plan_steps_per_epoch(troupe::data_partition::sharded, 103, 10, 3)
             == 12);
}

BOOST_AUTO_TEST_CASE(replicated_workers_each_run_every_epoch_over_the_set) {
  batch_plan plan{103, 8, 3, 3, 0, troupe::data_partition::replicated};
  for (int32_t w : {0, 1, 2})
    plan.join(w);
  BOOST_TEST(plan.total() == 3 * 3 * 13);
  driver d{plan, {0, 1, 2}, {}, {}, 0};
  // Worker 1 dies holding its lease every 7th round and is back at once
  // (the chief restarts it under its id).
  d.run([&](int round) {
    if (round % 7 == 6)
      d.kill(1);
  });
  for (int32_t w : {0, 1, 2})
    for (int32_t e = 0; e < 3; ++e)
      BOOST_TEST(once_each(d.trained[w][e], all_of(103)),
                 "worker " << w << " epoch " << e);
  BOOST_TEST(plan.acked() == 3 * 3 * 13);
  BOOST_TEST(plan.epoch_samples() == (std::vector<int64_t>{309, 309, 309}));
  auto per_worker = plan.worker_samples();
  BOOST_REQUIRE(per_worker.size() == 3u);
  for (auto& w : per_worker)
    BOOST_TEST(w.samples == (std::vector<int64_t>{103, 103, 103}));
}

BOOST_AUTO_TEST_CASE(replicated_workers_visit_the_set_in_their_own_orders) {
  batch_plan plan{100, 100, 5, 1, 0, troupe::data_partition::replicated};
  auto a = plan.lease(0), b = plan.lease(1);
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(b);
  BOOST_TEST(a->samples != b->samples);
  BOOST_TEST(std::set<uint32_t>(a->samples.begin(), a->samples.end())
             == all_of(100));
  // Numbers name the worker's stream: never the same for two workers.
  BOOST_TEST(a->batch != b->batch);
  BOOST_TEST(a->batch == (int64_t{1} << 40));
  BOOST_TEST(b->batch == (int64_t{2} << 40));
}

BOOST_AUTO_TEST_CASE(
  a_worker_added_to_a_replicated_run_starts_at_the_slowest_epoch) {
  batch_plan plan{50, 10, 1, 4, 0, troupe::data_partition::replicated};
  plan.join(0);
  plan.join(1);
  driver d{plan, {0, 1}, {}, {}, 0};
  // Worker 0 trains twice as fast: it leases on every round, worker 1 on
  // every other; worker 2 joins once worker 1 is in epoch 1.
  bool joined = false;
  d.run([&](int round) {
    d.live = round % 2 == 0 ? std::set<int32_t>{0, 1} : std::set<int32_t>{0};
    if (joined)
      d.live.insert(2);
    if (!joined && d.trained[1][1].size() > 0) {
      plan.join(2);
      joined = true;
    }
  });
  BOOST_TEST(d.trained[2].count(0) == 0u); // never trained epoch 0
  for (int32_t e = 1; e < 4; ++e)
    BOOST_TEST(once_each(d.trained[2][e], all_of(50)), "epoch " << e);
  for (int32_t w : {0, 1})
    for (int32_t e = 0; e < 4; ++e)
      BOOST_TEST(once_each(d.trained[w][e], all_of(50)));
  // A worker whose stream is through is done while others still train.
  BOOST_TEST(plan.done_for(0));
}

BOOST_AUTO_TEST_CASE(sharded_workers_each_train_their_own_part_of_every_epoch) {
  batch_plan plan{103, 8, 3, 3, 0, troupe::data_partition::sharded};
  plan.join(0);
  plan.join(1);
  BOOST_TEST(plan.total() == 3 * (7 + 7)); // parts of 51 and 52
  driver d{plan, {0, 1}, {}, {}, 0};
  d.run([&](int round) {
    if (round % 5 == 4)
      d.kill(0); // its leases stay its own: back in its stream
  });
  for (int32_t e = 0; e < 3; ++e) {
    auto order = epoch_order(103, 3, e);
    std::set<uint32_t> part0(order.begin(), order.begin() + 51),
      part1(order.begin() + 51, order.end());
    BOOST_TEST(once_each(d.trained[0][e], part0), "epoch " << e);
    BOOST_TEST(once_each(d.trained[1][e], part1), "epoch " << e);
  }
  BOOST_TEST(plan.epoch_samples() == (std::vector<int64_t>{103, 103, 103}));
}

BOOST_AUTO_TEST_CASE(
  a_worker_added_to_a_sharded_run_takes_a_part_from_the_next_epoch) {
  batch_plan plan{90, 5, 7, 4, 0, troupe::data_partition::sharded};
  plan.join(0);
  plan.join(1);
  driver d{plan, {0, 1}, {}, {}, 0};
  bool joined = false;
  d.run([&](int round) {
    // Mid-epoch 0 (worker 0 has 3 of its 9 batches): worker 2 is added and
    // worker 1 dies once, holding a lease.
    if (!joined && round == 3) {
      plan.join(2);
      d.live.insert(2);
      d.kill(1);
      joined = true;
    }
  });
  BOOST_TEST(d.trained[2].count(0) == 0u);
  for (int32_t e = 0; e < 4; ++e) {
    std::multiset<uint32_t> all;
    for (auto& [w, epochs] : d.trained)
      all.insert(epochs[e].begin(), epochs[e].end());
    BOOST_TEST(once_each(all, all_of(90)), "epoch " << e);
    // Epoch 0 in halves, the later ones in thirds of its order.
    auto order = epoch_order(90, 7, e);
    size_t parts = e == 0 ? 2 : 3;
    for (size_t j = 0; j < parts; ++j) {
      std::set<uint32_t> want(order.begin() + static_cast<long>(j * 90 / parts),
                              order.begin()
                                + static_cast<long>((j + 1) * 90 / parts));
      BOOST_TEST(once_each(d.trained[static_cast<int32_t>(j)][e], want),
                 "epoch " << e << " worker " << j);
    }
  }
  auto per_worker = plan.worker_samples();
  BOOST_REQUIRE(per_worker.size() == 3u);
  BOOST_TEST(per_worker[0].samples == (std::vector<int64_t>{45, 30, 30, 30}));
  BOOST_TEST(per_worker[2].samples == (std::vector<int64_t>{0, 30, 30, 30}));
}

BOOST_AUTO_TEST_CASE(a_saved_plan_goes_on_as_the_original) {
  for (auto mode :
       {troupe::data_partition::replicated, troupe::data_partition::sharded}) {
    BOOST_TEST_CONTEXT(to_string(mode)) {
      batch_plan a{77, 6, 2, 3, 0, mode};
      a.join(0);
      a.join(1);
      for (int i = 0; i < 9; ++i)
        a.ack(a.lease(i % 2)->id);
      a.join(2); // sharded: from epoch 1 (epoch 0 is decided)
      a.lease(1);
      a.requeue(1); // worker 1 away: its batch waits in its stream
      for (int i = 0; i < 4; ++i)
        a.ack(a.lease(2)->id);
      BOOST_REQUIRE(a.quiet());
      auto text = a.save();
      batch_plan b{77, 6, 2, 3, 0, mode};
      BOOST_REQUIRE_MESSAGE(!b.restore(a.position(), {}, text), text);
      BOOST_TEST(b.acked() == a.acked());
      BOOST_TEST(b.total() == a.total());
      BOOST_TEST(b.save() == text);
      BOOST_TEST(b.epoch_samples() == a.epoch_samples());
      for (int i = 0; i < 30; ++i) {
        auto w = i % 3;
        auto ga = a.lease(w), gb = b.lease(w);
        BOOST_REQUIRE(ga.has_value() == gb.has_value());
        if (!ga)
          continue;
        BOOST_TEST(ga->batch == gb->batch);
        BOOST_TEST(ga->epoch == gb->epoch);
        BOOST_TEST(ga->samples == gb->samples);
        a.ack(ga->id);
        b.ack(gb->id);
      }
    }
  }
}

/// A replicated plan of workers 0 and 1 with worker 0's first batch acked,
/// as a checkpoint saves it: its text and position.
static std::pair<std::string, int64_t> checkpointed_two_streams() {
  batch_plan a{60, 10, 4, 2, 0, troupe::data_partition::replicated};
  a.join(0);
  a.join(1);
  a.ack(a.lease(0)->id);
  return {a.save(), a.position()};
}

BOOST_AUTO_TEST_CASE(batches_done_after_a_saved_plan_are_not_leased_again) {
  auto [text, position] = checkpointed_two_streams();
  // After the checkpoint: worker 0's batches 1 and 3 and worker 1's 0 were
  // applied by the shards; worker 0's 2 was not.
  std::vector<int64_t> done{(int64_t{1} << 40) | 1, (int64_t{1} << 40) | 3,
                            int64_t{2} << 40};
  batch_plan b{60, 10, 4, 2, 0, troupe::data_partition::replicated};
  BOOST_REQUIRE(!b.restore(position, done, text));
  BOOST_TEST(b.acked() == 4);
  auto g = b.lease(0);
  BOOST_TEST(g->batch == ((int64_t{1} << 40) | 2)); // the hole first
  BOOST_TEST(b.lease(0)->batch == ((int64_t{1} << 40) | 4));
  BOOST_TEST(b.lease(1)->batch == ((int64_t{2} << 40) | 1));
  // A batch the checkpoint already counts is refused, the plan unchanged.
  auto err = b.restore(position, {int64_t{1} << 40}, text);
  BOOST_TEST((err == errc::invalid_argument));
  BOOST_TEST(b.acked() == 4);
}

BOOST_AUTO_TEST_CASE(batches_some_shards_applied_come_first_in_their_stream) {
  auto [text, position] = checkpointed_two_streams();
  // Worker 0's batch 1 is done everywhere; its batch 3 and worker 1's 0
  // reached some shards only: they come first, with worker 0's 2 that
  // none applied.
  batch_plan b{60, 10, 4, 2, 0, troupe::data_partition::replicated};
  BOOST_REQUIRE(!b.restore(position, {(int64_t{1} << 40) | 1}, text,
                           {(int64_t{1} << 40) | 3, int64_t{2} << 40}));
  BOOST_TEST(b.acked() == 2);
  BOOST_TEST(b.lease(0)->batch == ((int64_t{1} << 40) | 2));
  BOOST_TEST(b.lease(0)->batch == ((int64_t{1} << 40) | 3));
  BOOST_TEST(b.lease(0)->batch == ((int64_t{1} << 40) | 4));
  BOOST_TEST(b.lease(1)->batch == (int64_t{2} << 40));
  // Named done and again: refused.
  auto err = b.restore(position, {(int64_t{1} << 40) | 1}, text,
                       {(int64_t{1} << 40) | 1});
  BOOST_TEST((err == errc::invalid_argument));
}

BOOST_AUTO_TEST_CASE(bad_plan_texts_are_refused_by_what_is_wrong) {
  batch_plan plan{60, 10, 4, 2, 0, troupe::data_partition::sharded};
  plan.join(0);
  plan.ack(plan.lease(0)->id);
  auto good = plan.save();
  struct bad_case {
    std::string text;
    std::string says;
  };
  std::vector<bad_case> cases{
    {"nonsense", "not a troupe plan"},
    {"troupe-plan 2 sharded 0 0\n", "not a troupe plan"},
    {"troupe-plan 1 replicated 0 0\n", "data partition \"replicated\""},
    {"troupe-plan 1 sharded 5 2\n", "bad batch counts"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 2 0\ndecided -1\n",
     "do not add up"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\nstream 0 0 0 0\n",
     "two streams"},
    {"troupe-plan 1 sharded 0 1\nstream 0 0 1 1 5\n", "requeued batch"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\nrun 0 1 7\ndecided 0\n",
     "no stream"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\nrun 0 2 1 0\ndecided 0\n",
     "not ascending"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\nrun 0 1 0\ndecided -1\n",
     "disagree"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\n", "goes past"},
    {"troupe-plan 1 sharded 9 9\nstream 0 0 9 0\nrun 0 1 0\ndecided 0\n",
     "goes past"},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1 0\nshard 3\n",
     "unexpected \"shard\""},
    {"troupe-plan 1 sharded 1 1\nstream 0 0 1x 0\n", "bad stream line"},
    {"troupe-plan 1 sharded 1 1\nstream -1 0 1 0\n", "bad stream line"},
  };
  for (auto& c : cases) {
    auto err = plan.restore(1, {}, c.text);
    BOOST_TEST((err == errc::bad_format), c.text);
    BOOST_TEST(describe(err).find(c.says) != std::string::npos,
               c.text << " -> " << describe(err));
    BOOST_TEST(plan.save() == good); // unchanged
  }
  // A step that does not match the plan's count.
  BOOST_TEST(describe(plan.restore(5, {}, good)).find("is not its feeder plan")
             != std::string::npos);
  // A shared run refuses a worker plan, and the reverse.
  batch_plan shared{60, 10, 4, 2, 0};
  BOOST_TEST((shared.restore(1, {}, good) == errc::bad_format));
  BOOST_TEST((plan.restore(3, {}, "") == errc::bad_format));
}

BOOST_AUTO_TEST_SUITE_END()

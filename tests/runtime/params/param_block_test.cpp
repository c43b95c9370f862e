#include "runtime/params/param_block.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

#include "runtime/base/errc.hpp"
#include "runtime/base/process_usage.hpp"

using namespace troupe;
using mode = consistency_mode;
using block = troupe::param_block;

namespace {

block make_block(mode m, int aggregate = 1, int staleness = 0,
                 stale_rate stale_lr = stale_rate::none) {
  block::options o;
  o.mode = m;
  o.stale_lr = stale_lr;
  o.optimizer.type = optimizer_config::kind::sgd;
  o.optimizer.learning_rate = 0.5;
  o.aggregate = aggregate;
  o.staleness = staleness;
  o.elastic_rate = 0.25;
  block b{o, {1.f, 2.f, 3.f}};
  b.add_worker(0);
  b.add_worker(1);
  b.add_worker(2);
  return b;
}

std::vector<float> values_of(const block& b) {
  return *b.values();
}

} // namespace

BOOST_AUTO_TEST_SUITE(param_block)

BOOST_AUTO_TEST_CASE(async_applies_every_push_once) {
  auto b = make_block(mode::async);
  std::vector<float> g{1.f, 1.f, 1.f};
  for (int i = 0; i < 4; ++i) {
    auto r = b.push(i % 3, 0, g.data(), g.size());
    BOOST_REQUIRE(r);
    BOOST_TEST((*r == block::outcome::applied));
  }
  BOOST_TEST(b.version() == 4);
  BOOST_TEST(b.stats().accepted == 4);
  BOOST_TEST(values_of(b) == (std::vector<float>{-1.f, 0.f, 1.f}));
}

BOOST_AUTO_TEST_CASE(refused_pushes_leave_the_block_unchanged) {
  auto b = make_block(mode::async);
  auto before = values_of(b);
  std::vector<float> short_push{1.f, 1.f};
  auto r = b.push(0, 0, short_push.data(), short_push.size());
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::wrong_size));
  BOOST_TEST(describe(r.error())
             == "push from worker 0 has 2 values, the shard holds 3");
  std::vector<float> g{1.f, 1.f, 1.f};
  r = b.push(7, 0, g.data(), g.size());
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()) == "push from unknown worker 7");
  std::vector<float> nan{1.f, std::numeric_limits<float>::quiet_NaN(), 1.f};
  r = b.push(1, 0, nan.data(), nan.size());
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::non_finite));
  std::vector<float> inf{std::numeric_limits<float>::infinity(), 0.f, 0.f};
  BOOST_TEST(!b.push(1, 0, inf.data(), inf.size()));
  BOOST_TEST(b.stats().refused == 4);
  BOOST_TEST(b.version() == 0);
  BOOST_TEST(values_of(b) == before);
}

BOOST_AUTO_TEST_CASE(sync_averages_then_drops_stale_pushes) {
  auto b = make_block(mode::sync, 2);
  std::vector<float> g0{2.f, 0.f, 0.f}, g1{0.f, 2.f, 0.f};
  auto r = b.push(0, 0, g0.data(), 3);
  BOOST_TEST((*r == block::outcome::aggregated));
  BOOST_TEST(b.version() == 0);
  BOOST_TEST(!b.pull_ready(0, 1)); // waits for the update
  // A second push of the same worker for the same version does not count.
  BOOST_TEST((*b.push(0, 0, g0.data(), 3) == block::outcome::stale));
  r = b.push(1, 0, g1.data(), 3);
  BOOST_TEST((*r == block::outcome::applied));
  BOOST_TEST(b.version() == 1);
  BOOST_TEST(b.pull_ready(0, 1));
  // mean = (1, 1, 0); lr 0.5
  BOOST_TEST(values_of(b) == (std::vector<float>{0.5f, 1.5f, 3.f}));
  // The backup worker's push for version 0 is stale now.
  BOOST_TEST((*b.push(2, 0, g1.data(), 3) == block::outcome::stale));
  BOOST_TEST(b.stats().stale == 2);
  // A push from the future is a protocol error.
  BOOST_TEST(!b.push(2, 5, g1.data(), 3));
  BOOST_TEST(values_of(b) == (std::vector<float>{0.5f, 1.5f, 3.f}));
}

BOOST_AUTO_TEST_CASE(
  sync_refuses_non_finite_pushes_at_every_place_in_an_update) {
  // The first push of an update is copied into the sum as it is checked,
  // a lone one applied straight from the push, later ones checked before
  // they are added: a refused push at any of these places leaves the sum
  // and the values as they were.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> bad{1.f, 1.f, nan}, g0{2.f, 0.f, 0.f}, g1{0.f, 2.f, 0.f};
  auto b = make_block(mode::sync, 2);
  auto r = b.push(0, 0, bad.data(), 3); // first of two
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error())
             == "push from worker 0 holds a non-finite value at offset 2");
  BOOST_TEST((*b.push(0, 0, g0.data(), 3) == block::outcome::aggregated));
  BOOST_TEST(!b.push(1, 0, bad.data(), 3)); // second of two
  BOOST_TEST((*b.push(1, 0, g1.data(), 3) == block::outcome::applied));
  BOOST_TEST(values_of(b) == (std::vector<float>{0.5f, 1.5f, 3.f}));
  // Pushes the update would not take are refused as non-finite all the same.
  r = b.push(2, 0, bad.data(), 3); // stale
  BOOST_TEST((!r && r.error() == errc::non_finite));
  r = b.push(2, 9, bad.data(), 3); // from the future
  BOOST_TEST((!r && r.error() == errc::non_finite));
  // Aggregate 1: each push is a whole update, applied from the push.
  auto lone = make_block(mode::sync, 1);
  BOOST_TEST(!lone.push(0, 0, bad.data(), 3));
  BOOST_TEST(lone.version() == 0);
  BOOST_TEST((*lone.push(0, 0, g0.data(), 3) == block::outcome::applied));
  BOOST_TEST(lone.version() == 1);
  BOOST_TEST(lone.last_update() == (std::set<int32_t>{0}));
  BOOST_TEST(!lone.in_update(0));
  BOOST_TEST((*lone.push(1, 1, g1.data(), 3) == block::outcome::applied));
  BOOST_TEST(values_of(lone) == (std::vector<float>{0.f, 1.f, 3.f}));
  BOOST_TEST(lone.stats().refused == 1);
  BOOST_TEST(b.stats().refused == 4);
}

BOOST_AUTO_TEST_CASE(sync_caps_the_aggregate_by_the_workers_left) {
  auto b = make_block(mode::sync, 3);
  std::vector<float> g{2.f, 2.f, 2.f};
  BOOST_TEST((*b.push(0, 0, g.data(), 3) == block::outcome::aggregated));
  b.remove_worker(2);
  BOOST_TEST(b.version() == 0); // two workers left, one push in
  b.remove_worker(1);           // only worker 0 left: its push is the update
  BOOST_TEST(b.version() == 1);
  BOOST_TEST(values_of(b) == (std::vector<float>{0.f, 1.f, 2.f}));
}

BOOST_AUTO_TEST_CASE(steering_changes_lr_and_aggregate_or_nothing) {
  auto b = make_block(mode::sync, 2);
  std::vector<float> g{2.f, 2.f, 2.f};
  BOOST_TEST((*b.push(0, 0, g.data(), 3) == block::outcome::aggregated));
  BOOST_TEST(
    static_cast<bool>(b.set_aggregate(0))); // an error, nothing changed
  BOOST_TEST(b.version() == 0);
  BOOST_TEST(!static_cast<bool>(
    b.set_aggregate(1))); // the push in is now a whole update
  BOOST_TEST(b.version() == 1);
  BOOST_TEST(values_of(b) == (std::vector<float>{0.f, 1.f, 2.f}));
  BOOST_TEST(static_cast<bool>(b.set_learning_rate(-1)));
  BOOST_TEST(static_cast<bool>(
    b.set_learning_rate(std::numeric_limits<double>::quiet_NaN())));
  BOOST_TEST(!static_cast<bool>(b.set_learning_rate(0.25)));
  BOOST_TEST(b.opts().optimizer.learning_rate == 0.25);
  BOOST_TEST(!static_cast<bool>(
    b.set_aggregate(3))); // workers were added: wait for three
  BOOST_TEST((*b.push(0, 1, g.data(), 3) == block::outcome::aggregated));
  BOOST_TEST((*b.push(1, 1, g.data(), 3) == block::outcome::aggregated));
  BOOST_TEST(b.version() == 1);
  BOOST_TEST((*b.push(2, 1, g.data(), 3) == block::outcome::applied));
  BOOST_TEST(b.version() == 2);
  BOOST_TEST(values_of(b) == (std::vector<float>{-0.5f, 0.5f, 1.5f}));
}

BOOST_AUTO_TEST_CASE(ssp_holds_pulls_of_workers_too_far_ahead) {
  auto b = make_block(mode::ssp, 1, 2);
  std::vector<float> g{0.f, 0.f, 0.f};
  for (int i = 0; i < 2; ++i)
    BOOST_REQUIRE(b.push(0, 0, g.data(), 3));
  BOOST_TEST(b.pull_ready(0, 0)); // clock 2, slowest 0: 2 ahead
  BOOST_REQUIRE(b.push(0, 0, g.data(), 3));
  BOOST_TEST(!b.pull_ready(0, 0)); // 3 ahead
  BOOST_TEST(b.pull_ready(1, 0));
  BOOST_REQUIRE(b.push(1, 0, g.data(), 3));
  BOOST_TEST(!b.pull_ready(0, 0)); // worker 2 is still at 0
  BOOST_REQUIRE(b.push(2, 0, g.data(), 3));
  BOOST_TEST(b.pull_ready(0, 0));
  BOOST_TEST(b.min_clock() == 1);
  BOOST_TEST(b.clock(0) == 3);
}

BOOST_AUTO_TEST_CASE(easgd_moves_the_center_by_the_elastic_rate) {
  auto b = make_block(mode::easgd);
  std::vector<float> diff{4.f, -4.f, 0.f};
  BOOST_REQUIRE(b.push(0, 0, diff.data(), 3));
  BOOST_TEST(values_of(b) == (std::vector<float>{2.f, 1.f, 3.f}));
  BOOST_TEST(b.version() == 1);
}

BOOST_AUTO_TEST_CASE(pulled_values_are_not_changed_by_later_updates) {
  auto b = make_block(mode::async);
  auto held = b.values();
  std::vector<float> g{1.f, 1.f, 1.f};
  BOOST_REQUIRE(b.push(0, 0, g.data(), 3));
  BOOST_TEST(*held == (std::vector<float>{1.f, 2.f, 3.f}));
  BOOST_TEST(values_of(b) == (std::vector<float>{0.5f, 1.5f, 2.5f}));
}

BOOST_AUTO_TEST_CASE(restore_checks_sizes_and_slots) {
  block::options o;
  o.optimizer.type = optimizer_config::kind::momentum;
  block b{o, {1.f, 2.f}};
  BOOST_TEST(static_cast<bool>(b.restore({1.f}, {}, 3)));
  BOOST_TEST(static_cast<bool>(b.restore({1.f, 1.f}, {}, 3)));
  BOOST_TEST(
    static_cast<bool>(b.restore({1.f, 1.f}, {{"adam_m", {0.f, 0.f}}}, 3)));
  BOOST_TEST(b.version() == 0);
  BOOST_TEST(!b.restore({5.f, 6.f}, {{"momentum", {0.1f, 0.2f}}}, 3));
  BOOST_TEST(b.version() == 3);
  BOOST_TEST(values_of(b) == (std::vector<float>{5.f, 6.f}));
  BOOST_TEST(b.slots()[0].second == (std::vector<float>{0.1f, 0.2f}));
}

BOOST_AUTO_TEST_CASE(a_batch_is_applied_once_whoever_pushes_it) {
  auto b = make_block(mode::async);
  std::vector<float> g{1.f, 1.f, 1.f};
  BOOST_TEST((*b.push(0, 0, g.data(), g.size(), 7) == block::outcome::applied));
  auto before = values_of(b);
  // Worker 0 was lost after this push; worker 1 trains batch 7 again.
  BOOST_TEST(
    (*b.push(1, 0, g.data(), g.size(), 7) == block::outcome::duplicate));
  BOOST_TEST(values_of(b) == before);
  BOOST_TEST(b.version() == 1);
  BOOST_TEST(b.stats().stale == 1);
  BOOST_TEST(b.clock(1) == 1); // still the worker's step (ssp)
  // Pushes that name no batch are always applied.
  b.push(1, 0, g.data(), g.size());
  b.push(1, 0, g.data(), g.size());
  BOOST_TEST(b.version() == 3);
}

BOOST_AUTO_TEST_CASE(the_applied_log_names_the_batches_since_a_version) {
  auto b = make_block(mode::ssp, 1, 100);
  std::vector<float> g{1.f, 1.f, 1.f};
  for (int64_t batch : {4, 2, 3, 9})
    b.push(0, 0, g.data(), g.size(), batch);
  BOOST_TEST(b.version() == 4);
  BOOST_TEST(*b.applied_since(0) == (std::vector<int64_t>{2, 3, 4, 9}));
  BOOST_TEST(*b.applied_since(2) == (std::vector<int64_t>{3, 9}));
  BOOST_TEST(b.applied_since(4)->empty());
  BOOST_TEST(!b.applied_since(5)); // not reached
  // A checkpoint at update 2: the log forgets batches 4 and 2, which can
  // then be pushed again (they never are unless the checkpoint is
  // restored, which clears the log).
  b.forget_through(2);
  BOOST_TEST(!b.applied_since(1));
  BOOST_TEST(*b.applied_since(2) == (std::vector<int64_t>{3, 9}));
  BOOST_TEST(
    (*b.push(0, 0, g.data(), g.size(), 3) == block::outcome::duplicate));
  BOOST_TEST((*b.push(0, 0, g.data(), g.size(), 4) == block::outcome::applied));
  // A push without a batch: the log cannot vouch for the updates up to it.
  b.push(0, 0, g.data(), g.size());
  BOOST_TEST(!b.applied_since(2));
  BOOST_TEST(b.applied_since(6)->empty());
  // A restore starts the log at the restored version.
  auto v = values_of(b);
  BOOST_REQUIRE(!b.restore(v, {}, 40));
  BOOST_TEST(b.applied_since(40)->empty());
  BOOST_TEST(!b.applied_since(39));
  BOOST_TEST((*b.push(0, 0, g.data(), g.size(), 3) == block::outcome::applied));
}

BOOST_AUTO_TEST_CASE(ordered_batches_below_a_checkpoint_stay_done) {
  block::options o;
  o.mode = mode::async;
  o.optimizer.type = optimizer_config::kind::sgd;
  o.optimizer.learning_rate = 0.5;
  o.ordered_batches = true;
  block b{o, {1.f, 2.f, 3.f}};
  b.add_worker(0);
  std::vector<float> g{1.f, 1.f, 1.f};
  for (int64_t batch : {0, 2, 1})
    b.push(0, 0, g.data(), g.size(), batch);
  // A checkpoint holds updates 1..3 (batches 0..2): the log forgets them,
  // and a push of batch 1 held back in a cut link is still a duplicate.
  b.forget_through(3);
  BOOST_TEST(
    (*b.push(0, 0, g.data(), g.size(), 1) == block::outcome::duplicate));
  BOOST_TEST((*b.push(0, 0, g.data(), g.size(), 3) == block::outcome::applied));
  // A replica's copy holds the same horizon.
  block copy{o, {0.f, 0.f, 0.f}};
  BOOST_REQUIRE(!copy.load(b.image()));
  BOOST_TEST(
    (*copy.push(0, 0, g.data(), g.size(), 2) == block::outcome::duplicate));
  // A restore trains the batches after its checkpoint again.
  BOOST_REQUIRE(!b.restore(values_of(b), {}, 3));
  BOOST_TEST((*b.push(0, 0, g.data(), g.size(), 1) == block::outcome::applied));
}

BOOST_AUTO_TEST_CASE(the_log_gives_back_a_long_stretch_at_the_next_checkpoint) {
  auto b = make_block(mode::async);
  std::vector<float> g{1.f, 1.f, 1.f};
  int64_t batch = 0;
  auto stretch = [&](int64_t updates) {
    for (int64_t i = 0; i < updates; ++i)
      b.push(0, b.version(), g.data(), g.size(), batch++);
    b.forget_through(b.version());
  };
  stretch(2000);
  const auto before = own_process_usage().heap_bytes;
  // A chief lost before its checkpoint: 300,000 updates between two, 16
  // bytes each in the log.
  stretch(300'000);
  BOOST_TEST(own_process_usage().heap_bytes - before > 4'000'000);
  // The next stretch is short again, and the heap follows it down.
  stretch(2000);
  BOOST_TEST(own_process_usage().heap_bytes - before < 200'000);
  // The log still does its work after giving its room back.
  b.push(0, b.version(), g.data(), g.size(), batch);
  BOOST_TEST((*b.push(0, b.version(), g.data(), g.size(), batch)
              == block::outcome::duplicate));
}

BOOST_AUTO_TEST_CASE(sync_and_easgd_keep_no_log) {
  for (auto m : {mode::sync, mode::easgd}) {
    auto b = make_block(m);
    std::vector<float> g{1.f, 1.f, 1.f};
    BOOST_REQUIRE(b.push(0, 0, g.data(), g.size(), 5));
    BOOST_TEST(!b.applied_since(0));
  }
}

BOOST_AUTO_TEST_CASE(forgetting_workers_refuses_their_pushes) {
  auto b = make_block(mode::ssp, 1, 2);
  std::vector<float> g{1.f, 1.f, 1.f};
  b.push(0, 0, g.data(), g.size(), 1);
  b.forget_workers();
  BOOST_TEST(!b.knows(0));
  auto r = b.push(0, 0, g.data(), g.size(), 2);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::invalid_argument));
  BOOST_TEST(b.version() == 1);
  b.add_worker(0);
  BOOST_TEST(b.clock(0) == 0);
  BOOST_TEST(b.pull_ready(0, 0));
}

BOOST_AUTO_TEST_CASE(divide_scales_a_push_by_the_updates_since_its_pull) {
  auto b = make_block(mode::async, 1, 0, stale_rate::divide);
  std::vector<float> g{1.f, 1.f, 1.f};
  auto moved = [&] { return 1.f - values_of(b)[0]; }; // SGD at rate 0.5
  // Pulled at version 0, pushed at versions 0, 1, 2 and 4: stale 0 and 1
  // keep the full rate (1 is a lone worker with prefetch), 2 halves it, 4
  // quarters it.
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(b.push(0, 0, g.data(), g.size()));
  BOOST_TEST(moved() == 0.5f + 0.5f + 0.25f);
  BOOST_REQUIRE(b.push(0, 3, g.data(), g.size())); // stale 0
  BOOST_REQUIRE(b.push(0, 0, g.data(), g.size())); // stale 4
  BOOST_TEST(moved() == 1.25f + 0.5f + 0.125f);
  BOOST_TEST(b.stats().staleness_sum == 0 + 1 + 2 + 0 + 4);
  BOOST_TEST(b.stats().staleness_max == 4);
  // A tag past the version (values from before a restore to an older
  // checkpoint) counts as fresh.
  BOOST_REQUIRE(b.push(0, 99, g.data(), g.size()));
  BOOST_TEST(moved() == 1.875f + 0.5f);
  BOOST_TEST(b.stats().staleness_max == 4);
}

// stale_momentum reduce: the pushes' recent mean staleness s (a moving
// average over about 32 pushes) lowers the momentum by 1 - 1/s once s
// passes 1; none keeps it. Momentum optimizer, rate 1, m 0.9, gradient 1,
// no lr division, every push 4 updates stale (after the first four).
BOOST_AUTO_TEST_CASE(reduce_lowers_momentum_by_the_mean_staleness) {
  auto run = [](stale_momentum_rule rule) {
    block::options o;
    o.mode = mode::async;
    o.stale_momentum = rule;
    o.optimizer.type = optimizer_config::kind::momentum;
    o.optimizer.learning_rate = 1;
    o.optimizer.momentum = 0.9;
    block b{o, {0.f}};
    b.add_worker(0);
    std::vector<float> g{1.f};
    for (int i = 0; i < 100; ++i)
      BOOST_REQUIRE(
        b.push(0, std::max<int64_t>(0, b.version() - 4), g.data(), 1));
    return values_of(b)[0];
  };
  double mean = 0, acc = 0, reduced = 0, kept = 0, kept_acc = 0;
  for (int i = 0; i < 100; ++i) {
    mean += (std::min(i, 4) - mean) / 32.0;
    double m = mean > 1 ? std::max(0.0, 0.9 - (1 - 1 / mean)) : 0.9;
    acc = m * acc + 1;
    reduced -= acc;
    kept_acc = 0.9 * kept_acc + 1;
    kept -= kept_acc;
  }
  BOOST_TEST(run(stale_momentum_rule::reduce) == static_cast<float>(reduced),
             boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(run(stale_momentum_rule::none) == static_cast<float>(kept),
             boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(reduced > kept / 2); // the rule made a difference
}

BOOST_AUTO_TEST_CASE(none_applies_a_stale_push_at_the_full_rate) {
  auto b = make_block(mode::ssp, 1, 100, stale_rate::none);
  std::vector<float> g{1.f, 1.f, 1.f};
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(b.push(0, 0, g.data(), g.size()));
  BOOST_TEST(values_of(b) == (std::vector<float>{-1.f, 0.f, 1.f}));
  BOOST_TEST(b.stats().staleness_max == 3);
}

BOOST_AUTO_TEST_CASE(sync_rules_scale_the_rate_of_k_pushes_after_the_warm_up) {
  // What the shards apply and the chief's status reports alike.
  BOOST_TEST(sync_rate_scale(sync_rate::none, 8, 100, 0) == 1.0);
  BOOST_TEST(sync_rate_scale(sync_rate::sqrt, 16, 100, 0) == 4.0);
  BOOST_TEST(sync_rate_scale(sync_rate::linear, 6, 100, 30) == 6.0);
  // Over the first 30 updates, from 1 to k: update 15 (after version 14)
  // is halfway.
  BOOST_TEST(sync_rate_scale(sync_rate::linear, 7, 14, 30) == 4.0);
  BOOST_TEST(sync_rate_scale(sync_rate::linear, 7, 0, 30) == 1.0 + 6.0 / 30);
  BOOST_TEST(sync_rate_scale(sync_rate::linear, 7, 29, 30) == 7.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(param_block_image)

namespace {

block adam_block(mode m, int aggregate = 1) {
  block::options o;
  o.mode = m;
  o.optimizer.type = optimizer_config::kind::adam;
  o.optimizer.learning_rate = 0.01;
  o.aggregate = aggregate;
  o.stale_momentum = stale_momentum_rule::reduce;
  block b{o, {1.f, 2.f, 3.f, 4.f}};
  b.add_worker(0);
  b.add_worker(1);
  return b;
}

/// Pushes worker w's gradient for batch `batch`, tagged `tag`.
void push(block& b, int32_t w, int64_t tag, int64_t batch, float g) {
  std::vector<float> grads{g, -g, 2 * g, 0.5f * g};
  BOOST_REQUIRE(b.push(w, tag, grads.data(), grads.size(), batch));
}

/// The two blocks go on identically from here: the same pushes give the
/// same values, bitwise, and the same outcomes.
void require_same_future(block& a, block& b, mode m) {
  for (int k = 0; k < 6; ++k) {
    auto w = k % 2;
    auto tag = m == mode::sync ? a.version() : a.version() - k % 3;
    std::vector<float> grads{0.1f * k, -0.2f, 0.3f, 0.05f * k};
    auto ra = a.push(w, tag, grads.data(), grads.size(), 100 + k / 2);
    auto rb = b.push(w, tag, grads.data(), grads.size(), 100 + k / 2);
    BOOST_REQUIRE(static_cast<bool>(ra) == static_cast<bool>(rb));
    if (ra)
      BOOST_TEST((*ra == *rb));
    BOOST_TEST(a.version() == b.version());
    BOOST_TEST(values_of(a) == values_of(b));
  }
  BOOST_TEST(a.stats().accepted == b.stats().accepted);
  BOOST_TEST(a.stats().stale == b.stats().stale);
  BOOST_TEST((a.applied_since(0) == b.applied_since(0)));
}

} // namespace

BOOST_AUTO_TEST_CASE(an_async_copy_goes_on_bitwise_and_knows_its_batches) {
  auto a = adam_block(mode::async);
  for (int k = 0; k < 5; ++k)
    push(a, k % 2, a.version() - k % 2, k, 0.1f * (k + 1));
  auto b = adam_block(mode::async);
  b.forget_workers(); // the copy brings its workers
  BOOST_REQUIRE(!b.load(a.image()));
  BOOST_TEST(b.version() == 5);
  BOOST_TEST(values_of(a) == values_of(b));
  // A batch the original applied is a duplicate in the copy too.
  std::vector<float> g{1, 1, 1, 1};
  auto r = b.push(0, b.version(), g.data(), g.size(), 3);
  BOOST_REQUIRE(r);
  BOOST_TEST((*r == block::outcome::duplicate));
  BOOST_TEST(b.version() == 5);
  b = adam_block(mode::async);
  BOOST_REQUIRE(!b.load(a.image()));
  require_same_future(a, b, mode::async);
}

BOOST_AUTO_TEST_CASE(a_sync_copy_takes_the_pushes_of_the_update_under_way) {
  auto a = adam_block(mode::sync, 2);
  push(a, 0, 0, -1, 0.5f);
  push(a, 1, 0, -1, 0.25f); // update 1 applied
  push(a, 0, 1, -1, 0.75f); // update 2 under way: worker 0 is in
  auto b = adam_block(mode::sync, 2);
  BOOST_REQUIRE(!b.load(a.image()));
  BOOST_TEST(b.in_update(0));
  BOOST_TEST(!b.in_update(1));
  require_same_future(a, b, mode::sync);
}

BOOST_AUTO_TEST_CASE(a_copy_that_does_not_fit_is_refused_and_changes_nothing) {
  auto a = adam_block(mode::async);
  push(a, 0, 0, 0, 0.5f);
  block::options o;
  o.mode = mode::async;
  o.optimizer.type = optimizer_config::kind::adam;
  block shorter{o, {1.f, 2.f}};
  auto err = shorter.load(a.image());
  BOOST_TEST((err == errc::wrong_size));
  BOOST_TEST(values_of(shorter) == (std::vector<float>{1.f, 2.f}));
  auto sgd = make_block(mode::async);
  sgd = block{sgd.opts(), {1.f, 2.f, 3.f, 4.f}};
  BOOST_TEST((sgd.load(a.image()) == errc::layout_mismatch));
  auto img = a.image();
  img.clocks.pop_back();
  auto b = adam_block(mode::async);
  BOOST_TEST((b.load(img) == errc::invalid_argument));
  BOOST_TEST(b.version() == 0);
}

BOOST_AUTO_TEST_CASE(buffers_take_the_pushed_change_without_the_optimizer) {
  // Adam with weight decay on [0, 2); a buffer on [2, 4): its pushes
  // carry old - new, which the block subtracts as it is.
  block::options o;
  o.mode = mode::async;
  o.optimizer.type = optimizer_config::kind::adam;
  o.optimizer.learning_rate = 0.1;
  o.optimizer.weight_decay = 0.5;
  o.buffers = {flat_range{2, 4}};
  block b{o, {1.f, 1.f, 10.f, 0.f}};
  b.add_worker(0);
  b.add_worker(1);
  std::vector<float> g0 = {0.5f, -0.5f, 1.f, -1.f}; // buffer: 10 -> 9, 0 -> 1
  BOOST_REQUIRE(b.push(0, 0, g0.data(), 4, 0));
  std::vector<float> g1 = {0.5f, -0.5f, 0.25f, -1.f};
  BOOST_REQUIRE(b.push(1, 0, g1.data(), 4, 1)); // stale: the change adds up
  auto v = values_of(b);
  BOOST_TEST(v[0] != 1.f); // the optimizer moved the parameters
  BOOST_TEST(v[2] == 8.75f);
  BOOST_TEST(v[3] == 2.f);
  // sync: the mean of the update's changes.
  o.mode = mode::sync;
  o.aggregate = 2;
  block s{o, {1.f, 1.f, 10.f, 0.f}};
  s.add_worker(0);
  s.add_worker(1);
  BOOST_REQUIRE(s.push(0, 0, g0.data(), 4));
  BOOST_REQUIRE(s.push(1, 0, g1.data(), 4));
  auto w = values_of(s);
  BOOST_TEST(w[2] == 10.f - 0.625f);
  BOOST_TEST(w[3] == 1.f);
  BOOST_CHECK_THROW((block{o, {1.f, 2.f}}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

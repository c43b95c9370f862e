#include "runtime/params/stale_compensation.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <tuple>

#include "runtime/params/block_reslice.hpp"
#include "runtime/params/param_block.hpp"

using namespace troupe;
using block = troupe::param_block;

namespace {

/// An async block of two values, SGD at rate 1 (each step is the applied
/// gradient), workers 0 and 1.
block sgd_block(stale_rate rule, double lambda = 0, size_t history = 8,
                double lookahead = 0) {
  block::options o;
  o.mode = consistency_mode::async;
  o.stale_lr = rule;
  o.delay_compensation = lambda;
  o.lookahead = lookahead;
  o.history = history;
  o.optimizer.type = optimizer_config::kind::sgd;
  o.optimizer.learning_rate = 1;
  block b{o, {0.f, 0.f}};
  b.add_worker(0);
  b.add_worker(1);
  return b;
}

/// A sync block of one value, SGD at rate `lr`, updates of `workers`
/// pushes, workers 0 to workers - 1.
block sync_block(sync_rate rule, int workers, double lr, int64_t warmup = 0) {
  block::options o;
  o.mode = consistency_mode::sync;
  o.sync_lr = rule;
  o.sync_warmup = warmup;
  o.aggregate = workers;
  o.optimizer.type = optimizer_config::kind::sgd;
  o.optimizer.learning_rate = lr;
  block b{o, {0.f}};
  for (int32_t w = 0; w < workers; ++w)
    b.add_worker(w);
  return b;
}

void push(block& b, int32_t worker, int64_t tag, std::vector<float> g) {
  BOOST_REQUIRE(b.push(worker, tag, g.data(), g.size()));
}

std::vector<float> values_of(const block& b) {
  return *b.values();
}

} // namespace

BOOST_AUTO_TEST_SUITE(stale_compensation)

// Coordinate 0 moves on steadily, coordinate 1 goes back and forth: a push
// four updates stale is slowed by the gap on 0 and keeps its full step on
// 1, where divide would slow both alike.
BOOST_AUTO_TEST_CASE(gap_slows_the_coordinates_that_moved_since_the_pull) {
  auto b = sgd_block(stale_rate::gap);
  // Fresh pushes: steps of 1 on both, coordinate 1 alternating.
  for (int k = 0; k < 4; ++k)
    push(b, 0, b.version(), {-1.f, k % 2 == 0 ? -1.f : 1.f});
  BOOST_TEST(values_of(b) == (std::vector<float>{4.f, 0.f}));
  // Every step was 1 on both, so the step means are 1; since version 0
  // coordinate 0 moved 4 (gap 4), coordinate 1 moved 0 (gap 0).
  push(b, 1, 0, {-1.f, -1.f});
  BOOST_TEST(values_of(b) == (std::vector<float>{4.25f, 1.f}));
  BOOST_TEST(b.stats().staleness_max == 4);
  BOOST_TEST(b.stats().uncompensated == 0);
}

BOOST_AUTO_TEST_CASE(gap_falls_back_to_divide_past_the_versions_it_keeps) {
  auto b = sgd_block(stale_rate::gap, 0, 2);
  for (int k = 0; k < 4; ++k)
    push(b, 0, b.version(), {-1.f, -1.f});
  // Version 0 is gone (2 kept: 3 and 4): divided by the staleness 4.
  push(b, 1, 0, {-1.f, -1.f});
  BOOST_TEST(values_of(b) == (std::vector<float>{4.25f, 4.25f}));
  BOOST_TEST(b.stats().uncompensated == 1);
  // A fresh push is neither compensated nor counted.
  push(b, 0, b.version(), {-1.f, -1.f});
  BOOST_TEST(b.stats().uncompensated == 1);
}

// DC-ASGD-a: g + lambda * g*g / sqrt(ms + 1e-7) * (w_now - w_used), ms the
// moving mean (0.95) of g*g, taken over the pushes it compensates.
BOOST_AUTO_TEST_CASE(delay_compensation_corrects_the_gradient_to_first_order) {
  auto b = sgd_block(stale_rate::none, 0.5);
  push(b, 0, 0, {-2.f, 0.f}); // fresh: applied as it is
  push(b, 0, 1, {-2.f, 0.f});
  BOOST_TEST(values_of(b) == (std::vector<float>{4.f, 0.f}));
  push(b, 1, 0, {1.f, 3.f}); // stale 2, w_now - w_used = (4, 0)
  float ms = 0.05f * 1.f;
  float g0 = 1.f + 0.5f * 1.f / std::sqrt(ms + 1e-7f) * 4.f;
  auto v = values_of(b);
  BOOST_TEST(v[0] == 4.f - g0, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(v[1] == -3.f); // it did not move: no correction
}

// Adam's step is scaled after its normalisation: a gradient scaled by the
// gap would come out of Adam the same.
BOOST_AUTO_TEST_CASE(adam_scales_each_coordinates_step) {
  optimizer_config c;
  c.type = optimizer_config::kind::adam;
  c.learning_rate = 0.1;
  optimizer plain{c, 2}, scaled{c, 2};
  std::vector<float> p{0.f, 0.f}, q{0.f, 0.f}, g{1.f, -2.f}, s{0.5f, 1.f};
  plain.apply(p.data(), g.data(), 0);
  scaled.apply(q.data(), g.data(), 0, 1.0, 0, s.data());
  BOOST_TEST(q[0] == 0.5f * p[0], boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(q[1] == p[1]);
}

// The pushes' mean staleness moves by 1/32 of each push's: after pushes
// 0, 1 and 2 updates stale it is (1/32 + 2/32 - 1/32^2) (the second
// push's share of the first decays). Workers then pull the values
// carried on along the last update by lookahead times that; the block's
// values, which evaluation and checkpoints read, stay as they are.
BOOST_AUTO_TEST_CASE(lookahead_pulls_the_values_carried_on_by_the_staleness) {
  auto b = sgd_block(stale_rate::none, 0, 8, 2.0);
  push(b, 0, 0, {-1.f, 2.f}); // fresh: nothing to carry on
  BOOST_TEST(*b.values_for_workers() == (std::vector<float>{1.f, -2.f}));
  BOOST_TEST(b.values_for_workers() == b.values());
  push(b, 1, 0, {-1.f, 0.f});  // 1 stale: (2, -2)
  push(b, 0, 0, {-0.5f, 1.f}); // 2 stale: (2.5, -3), the last step (0.5, -1)
  BOOST_TEST(values_of(b) == (std::vector<float>{2.5f, -3.f}));
  double mean = 1.0 / 32;
  mean += (2 - mean) / 32;
  auto k = static_cast<float>(2.0 * mean);
  auto ahead = b.values_for_workers();
  BOOST_TEST((*ahead)[0] == 2.5f + k * 0.5f,
             boost::test_tools::tolerance(1e-6f));
  BOOST_TEST((*ahead)[1] == -3.f - k, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(values_of(b) == (std::vector<float>{2.5f, -3.f}));
  // Made once per version, for every worker that pulls it.
  BOOST_TEST(b.values_for_workers() == ahead);
  push(b, 1, 3, {0.f, 0.f});
  BOOST_TEST(b.values_for_workers() != ahead);
}

// With the gap, a push computed on an extrapolated version is measured
// from that point, where its worker was: a coordinate that went on as
// extrapolated has no gap and keeps its full step.
BOOST_AUTO_TEST_CASE(the_gap_is_taken_from_where_the_worker_looked_ahead_to) {
  auto ahead = sgd_block(stale_rate::gap, 0, 8, 1.0);
  auto plain = sgd_block(stale_rate::gap);
  for (auto* b : {&ahead, &plain}) {
    for (int k = 0; k < 3; ++k) // steady steps of 1 on coordinate 0
      push(*b, 0, b->version(), {-1.f, 0.f});
    push(*b, 1, 2, {-1.f, 0.f}); // 1 stale: full steps, (4, 0)
  }
  // Two fresh pushes, then one computed on version 4 ((4, 0), the last
  // step 1), 2 stale: the mean staleness m is now
  // (1/32 (31/32)^2 + (2 - that) / 32), and its worker had pulled
  // (4 + m, 0). The values are at (6, 0): the gap is 2 - m from there, 2
  // from version 4 itself.
  for (auto* b : {&ahead, &plain}) {
    push(*b, 0, 4, {-1.f, 0.f});
    push(*b, 0, 5, {-1.f, 0.f});
    push(*b, 1, 4, {-1.f, 0.f});
  }
  double m = 1.0 / 32 * (31.0 / 32) * (31.0 / 32);
  m += (2 - m) / 32;
  BOOST_TEST(values_of(plain)[0] == 6.5f);
  BOOST_TEST(values_of(ahead)[0] == static_cast<float>(6 + 1 / (2 - m)),
             boost::test_tools::tolerance(1e-5f));
}

// A replica loads the primary's image and must apply every later push
// bitwise alike, stale ones too: the kept versions and the means travel.
BOOST_AUTO_TEST_CASE(a_copy_compensates_as_the_original_does) {
  for (auto [lambda, lookahead] : {std::pair{0.0, 0.0}, std::pair{0.3, 0.0},
                                   std::pair{0.0, 1.0}, std::pair{0.3, 1.5}}) {
    auto a = sgd_block(stale_rate::gap, lambda, 8, lookahead);
    for (int k = 0; k < 5; ++k)
      push(a, k % 2, a.version() - k % 3, {-0.5f * k, 0.25f * k - 1});
    auto b = sgd_block(stale_rate::gap, lambda, 8, lookahead);
    b.forget_workers();
    BOOST_REQUIRE(!b.load(a.image()));
    for (int k = 0; k < 6; ++k) {
      std::vector<float> g{0.1f * k - 0.3f, 1.f - 0.2f * k};
      auto tag = a.version() - 1 - k % 4;
      push(a, k % 2, tag, g);
      push(b, k % 2, tag, g);
      BOOST_TEST(values_of(a) == values_of(b));
      BOOST_TEST(*a.values_for_workers() == *b.values_for_workers());
    }
    BOOST_TEST(a.stats().uncompensated == b.stats().uncompensated);
    // An image whose kept versions do not fit is refused.
    auto img = a.image();
    img.compensation.values[0].push_back(1.f);
    auto c = sgd_block(stale_rate::gap, lambda);
    BOOST_TEST(static_cast<bool>(c.load(img)));
    BOOST_TEST(values_of(c) == (std::vector<float>{0.f, 0.f}));
  }
}

// Reshaping the shards cuts the step means and starts the kept versions
// over: both halves then compensate from the new slices on.
BOOST_AUTO_TEST_CASE(a_reslice_cuts_the_means_and_drops_the_versions) {
  auto a = sgd_block(stale_rate::gap);
  for (int k = 0; k < 3; ++k)
    push(a, 0, a.version(), {-1.f, -2.f});
  auto parts = reslice({a.image()}, {1, 1});
  BOOST_REQUIRE(parts);
  BOOST_TEST((*parts)[0].compensation.step_mean == std::vector<float>{1.f});
  BOOST_TEST((*parts)[1].compensation.step_mean == std::vector<float>{2.f});
  BOOST_TEST((*parts)[0].compensation.versions.empty());
}

// sync_lr: the mean of k pushes is applied at sqrt(k) (sqrt) or k (linear)
// times the rate, and one worker's update at the rate given.
BOOST_AUTO_TEST_CASE(sync_rules_scale_an_update_of_k_pushes) {
  for (auto [rule, four, alone] : {std::tuple{sync_rate::sqrt, 1.f, 1.5f},
                                   std::tuple{sync_rate::linear, 2.f, 2.5f},
                                   std::tuple{sync_rate::none, 0.5f, 1.f}}) {
    auto b = sync_block(rule, 4, 0.5);
    for (int32_t w = 0; w < 4; ++w)
      push(b, w, 0, {-1.f});
    BOOST_TEST(values_of(b)[0] == four);
    for (int32_t w = 1; w < 4; ++w)
      b.remove_worker(w);
    push(b, 0, 1, {-1.f}); // alone: the rate given
    BOOST_TEST(values_of(b)[0] == alone);
  }
}

// sync_warmup: the scaled rate is reached over the first updates, in equal
// steps from the rate given.
BOOST_AUTO_TEST_CASE(sync_warmup_rises_to_the_scaled_rate) {
  auto b = sync_block(sync_rate::linear, 3, 1, 2);
  std::vector<float> after;
  for (int64_t update = 0; update < 3; ++update) {
    for (int32_t w = 0; w < 3; ++w)
      push(b, w, update, {-1.f});
    after.push_back(values_of(b)[0]);
  }
  // Rates 1 + 2 * 1/2, then 3 (reached at update 2 of 2), then 3.
  BOOST_TEST(after == (std::vector<float>{2.f, 5.f, 8.f}));
}

BOOST_AUTO_TEST_CASE(history_follows_the_workers_within_its_bounds) {
  BOOST_TEST(compensation_history(1, 100) == 4u);
  BOOST_TEST(compensation_history(16, 100) == 34u);
  BOOST_TEST(compensation_history(100, 100) == 64u);
  // 256 MiB of 64 MiB blocks: 4, however many workers.
  BOOST_TEST(compensation_history(16, size_t{16} << 20) == 4u);
  BOOST_TEST(compensation_history(16, size_t{1} << 30) == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

#include "runtime/params/optimizer.hpp"

#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <limits>

using namespace troupe;

namespace {

/// Momentum as the cases that follow TensorFlow's update use it: learning
/// rate 0.1, momentum 0.9.
optimizer_config momentum_config() {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::momentum;
  cfg.learning_rate = 0.1;
  cfg.momentum = 0.9;
  return cfg;
}

/// Adam at learning rate 0.01, as the hand computations use it.
optimizer_config adam_config() {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::adam;
  cfg.learning_rate = 0.01;
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(optimizer)

BOOST_AUTO_TEST_CASE(sgd_with_weight_decay) {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::sgd;
  cfg.learning_rate = 0.5;
  cfg.weight_decay = 0.1;
  troupe::optimizer opt{cfg, 2};
  float p[2] = {1.f, -2.f};
  float g[2] = {0.2f, 0.4f};
  opt.apply(p, g, 0);
  // p -= 0.5 * (g + 0.1 p)
  BOOST_TEST(p[0] == 1.f - 0.5f * (0.2f + 0.1f),
             boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(p[1] == -2.f - 0.5f * (0.4f - 0.2f),
             boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(opt.slots().empty());
}

BOOST_AUTO_TEST_CASE(momentum_matches_tf_update) {
  troupe::optimizer opt{momentum_config(), 1};
  float p = 1.f, g = 1.f;
  opt.apply(&p, &g, 0); // acc = 1, p = 0.9
  opt.apply(&p, &g, 1); // acc = 1.9, p = 0.71
  BOOST_TEST(p == 0.71f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST((*opt.slots()[0].second)[0] == 1.9f,
             boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(adam_matches_hand_computation) {
  troupe::optimizer opt{adam_config(), 1};
  float p = 0.5f;
  double m = 0, v = 0, ref = 0.5;
  const float grads[3] = {0.1f, -0.3f, 0.2f};
  for (int t = 0; t < 3; ++t) {
    float g = grads[t];
    opt.apply(&p, &g, t);
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double mhat = m / (1 - std::pow(0.9, t + 1));
    double vhat = v / (1 - std::pow(0.999, t + 1));
    ref -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
  }
  BOOST_TEST(p == static_cast<float>(ref), boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(opt.slots().size() == 2u);
}

// A stale push's implicit momentum lowers beta1 for its step alone, and the
// bias correction divides m by 1 - (the product of the betas it was built
// with), as Adam's derivation does for a beta1 that varies.
BOOST_AUTO_TEST_CASE(adam_lowers_beta1_by_implicit_momentum) {
  troupe::optimizer opt{adam_config(), 1};
  float p = 0.5f;
  double m = 0, v = 0, ref = 0.5, product = 1;
  const float grads[4] = {0.1f, -0.3f, 0.2f, 0.05f};
  const double implicit[4] = {0, 0.75, 0.5, 0.95}; // beta1 .9 .15 .4 0
  for (int t = 0; t < 4; ++t) {
    float g = grads[t];
    opt.apply(&p, &g, t, 1.0, implicit[t]);
    double b1 = std::max(0.0, 0.9 - implicit[t]);
    product *= b1;
    m = b1 * m + (1 - b1) * g;
    v = 0.999 * v + 0.001 * g * g;
    double mhat = m / (1 - product);
    double vhat = v / (1 - std::pow(0.999, t + 1));
    ref -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    BOOST_TEST(p == static_cast<float>(ref),
               boost::test_tools::tolerance(1e-5f));
    BOOST_TEST((*opt.slots()[0].second)[0] == static_cast<float>(m),
               boost::test_tools::tolerance(1e-5f));
  }
  // A new run (step 0) starts the product over: the same as a fresh one.
  troupe::optimizer fresh{adam_config(), 1};
  float a = 0.5f, b = 0.5f, g = 0.1f;
  troupe::optimizer again{adam_config(), 1};
  again.apply(&a, &g, 0, 1.0, 0.5);
  again.apply(&a, &g, 1, 1.0, 0.5);
  a = 0.5f;
  again.slots()[0].second->assign(1, 0.f);
  again.slots()[1].second->assign(1, 0.f);
  again.apply(&a, &g, 0);
  fresh.apply(&b, &g, 0);
  BOOST_TEST(a == b);
}

BOOST_AUTO_TEST_CASE(momentum_lowers_its_momentum_by_implicit_momentum) {
  troupe::optimizer opt{momentum_config(), 1};
  float p = 1.f, g = 1.f;
  opt.apply(&p, &g, 0);           // acc = 1, p = 0.9
  opt.apply(&p, &g, 1, 1.0, 0.5); // acc = 0.4 * 1 + 1 = 1.4, p = 0.76
  BOOST_TEST(p == 0.76f, boost::test_tools::tolerance(1e-6f));
  opt.apply(&p, &g, 2, 1.0, 0.99); // momentum 0: acc = 1, p = 0.66
  BOOST_TEST(p == 0.66f, boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(exponential_decay_like_tf1) {
  optimizer_config cfg;
  cfg.learning_rate = 0.1;
  cfg.schedule.type = lr_schedule::kind::exponential;
  cfg.schedule.decay_steps = 100;
  cfg.schedule.decay_rate = 0.5;
  BOOST_TEST(learning_rate_at(cfg, 0) == 0.1);
  BOOST_TEST(learning_rate_at(cfg, 150) == 0.1 * std::pow(0.5, 1.5),
             boost::test_tools::tolerance(1e-12));
  cfg.schedule.staircase = true;
  BOOST_TEST(learning_rate_at(cfg, 150) == 0.05,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(learning_rate_at(cfg, 200) == 0.025,
             boost::test_tools::tolerance(1e-12));
  cfg.schedule.type = lr_schedule::kind::constant;
  BOOST_TEST(learning_rate_at(cfg, 1000) == 0.1);
}

// A shard optimizes its slice alone: the result must equal the whole.
BOOST_AUTO_TEST_CASE(slices_equal_the_whole) {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::adam;
  std::vector<float> whole(10), parts(10), g(10);
  for (int i = 0; i < 10; ++i) {
    whole[i] = parts[i] = 0.1f * i;
    g[i] = 0.05f * (i - 5);
  }
  troupe::optimizer all{cfg, 10}, lo{cfg, 4}, hi{cfg, 6};
  for (int t = 0; t < 5; ++t) {
    all.apply(whole.data(), g.data(), t);
    lo.apply(parts.data(), g.data(), t);
    hi.apply(parts.data() + 4, g.data() + 4, t);
  }
  BOOST_TEST(whole == parts);
}

// A gradient that turns zero (a blank pixel's weights, a dead unit's) lets
// Adam's m decay by beta1 a step. Rounded to nearest it would stop in the
// denormals for ever (0.9 * 4 * 2^-149 rounds back to 4 * 2^-149), and
// every update would then pay for denormal arithmetic; flushed, it
// reaches 0.
BOOST_AUTO_TEST_CASE(a_decaying_slot_reaches_zero_instead_of_a_denormal) {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::adam;
  auto m_after_decay = [&](bool flush) {
    cfg.flush_denormals = flush;
    troupe::optimizer opt{cfg, 1};
    float p = 0.5f, g = 1.f;
    opt.apply(&p, &g, 0);
    g = 0.f;
    for (int t = 1; t <= 1100; ++t)
      opt.apply(&p, &g, t);
    return (*opt.slots()[0].second)[0];
  };
  BOOST_TEST(m_after_decay(true) == 0.f);
  const float kept = m_after_decay(false);
  BOOST_TEST(kept > 0.f);
  BOOST_TEST(kept < std::numeric_limits<float>::min());
}

// The flush holds for the update only: code after it on the same thread
// (a worker's BLAS, an actor) still computes with denormals.
BOOST_AUTO_TEST_CASE(the_update_leaves_the_threads_float_mode_as_it_was) {
  optimizer_config cfg;
  cfg.type = optimizer_config::kind::adam;
  troupe::optimizer opt{cfg, 3};
  float p[3] = {1.f, 2.f, 3.f}, g[3] = {1e-40f, 0.f, 1.f};
  opt.apply(p, g, 0);
  volatile float tiny = std::numeric_limits<float>::min();
  const float half = tiny / 2.f; // a denormal unless flushed
  BOOST_TEST(half > 0.f);
}

BOOST_AUTO_TEST_SUITE_END()

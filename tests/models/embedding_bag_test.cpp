// Embedding lookups over click logs (models/embedding_bag): each row once
// per batch, mean pooling per (sample, field) bag, and its gradient
// against finite differences.
#include "models/embedding_bag.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>

#include "runtime/base/random.hpp"

using namespace troupe;

namespace {

/// 3 samples, 2 categorical fields: s0 {5, 7} {5}; s1 {} {9}; s2 {7, 7} {1}.
click_data three_samples() {
  click_data d;
  d.schema = {0, 2, 100};
  d.count = 3;
  d.labels = {1, 0, 1};
  d.ids = {5, 7, 5, 9, 7, 7, 1};
  d.offsets = {0, 2, 3, 3, 4, 6, 7};
  return d;
}

} // namespace

BOOST_AUTO_TEST_SUITE(embedding_bag)

BOOST_AUTO_TEST_CASE(a_batch_pulls_each_row_once_and_pools_the_mean) {
  auto d = three_samples();
  id_index scratch;
  bag_lookup lookup;
  uint32_t batch[] = {2, 0};
  plan_lookup(d, batch, 2, scratch, lookup);
  BOOST_TEST((lookup.unique == std::vector<uint64_t>{7, 1, 5}));
  BOOST_TEST((lookup.position == std::vector<uint32_t>{0, 0, 1, 2, 0, 2}));
  BOOST_TEST((lookup.bags == std::vector<uint32_t>{0, 2, 3, 5, 6}));
  // Row of id i: (i, 2i).
  std::vector<float> rows;
  for (auto id : lookup.unique) {
    rows.push_back(static_cast<float>(id));
    rows.push_back(static_cast<float>(2 * id));
  }
  std::vector<float> out(2 * 2 * 2, -1.f);
  pool_forward(lookup, rows.data(), 2, out.data());
  BOOST_TEST((out == std::vector<float>{7, 14, 1, 2, 6, 12, 5, 10}));
  // An empty bag pools to zeros.
  uint32_t second[] = {1};
  plan_lookup(d, second, 1, scratch, lookup);
  BOOST_TEST((lookup.unique == std::vector<uint64_t>{9}));
  std::vector<float> nine{9, 18}, pooled(4, -1.f);
  pool_forward(lookup, nine.data(), 2, pooled.data());
  BOOST_TEST((pooled == std::vector<float>{0, 0, 9, 18}));
}

BOOST_AUTO_TEST_CASE(the_pooling_gradient_matches_finite_differences) {
  auto d = three_samples();
  id_index scratch;
  bag_lookup lookup;
  uint32_t batch[] = {0, 1, 2};
  plan_lookup(d, batch, 3, scratch, lookup);
  const int dim = 3;
  splitmix64 rng{11};
  std::vector<double> rows(lookup.unique.size() * dim);
  for (auto& r : rows)
    r = rng.normal();
  std::vector<float> w(3 * 2 * dim); // loss = sum(out * w)
  for (auto& x : w)
    x = static_cast<float>(rng.normal());
  auto loss = [&](const std::vector<double>& r) {
    std::vector<float> rf(r.begin(), r.end()), out(w.size());
    pool_forward(lookup, rf.data(), dim, out.data());
    double l = 0;
    for (size_t i = 0; i < w.size(); ++i)
      l += static_cast<double>(out[i]) * w[i];
    return l;
  };
  std::vector<float> grad(rows.size());
  pool_backward(lookup, w.data(), dim, grad.data());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto up = rows, down = rows;
    up[i] += 1e-2;
    down[i] -= 1e-2;
    double numeric = (loss(up) - loss(down)) / 2e-2;
    BOOST_TEST(std::abs(numeric - grad[i]) < 1e-3, i);
  }
}

BOOST_AUTO_TEST_SUITE_END()

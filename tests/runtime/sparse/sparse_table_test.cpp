// Sparse embedding tables (runtime/sparse/sparse_table): pulls and pushes
// against a dense reference, the row-wise optimizers against hand-computed
// updates, rows made from their id alone, refused ids, hash placement, and a
// table copied row by row (what a checkpoint streams).
#include "runtime/sparse/sparse_table.hpp"

#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/base/errc.hpp"
#include "runtime/params/optimizer.hpp"
#include "runtime/base/random.hpp"
#include "test_util.hpp"

using namespace troupe;

namespace {

embedding_table_config small_table(uint64_t vocabulary, int dim,
                                   embedding_table_config::rows create =
                                     embedding_table_config::rows::on_touch) {
  embedding_table_config t;
  t.name = "users";
  t.vocabulary = vocabulary;
  t.dim = dim;
  t.create = create;
  t.seed = 7;
  return t;
}

sparse_optimizer_config opt_of(sparse_optimizer_config::kind k, double lr) {
  sparse_optimizer_config o;
  o.type = k;
  o.learning_rate = lr;
  return o;
}

std::vector<float> row_of(const sparse_table& t, uint64_t id) {
  auto* r = t.row(id);
  BOOST_REQUIRE(r != nullptr);
  return {r, r + t.dim()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(sparse_table)

BOOST_AUTO_TEST_CASE(ids_dedup_and_index_through_growth) {
  id_index index{4};
  bool inserted = false;
  for (uint32_t i = 0; i < 100000; ++i)
    BOOST_REQUIRE(index.find_or_insert(uint64_t{i} * 7919, i, inserted) == i
                  && inserted);
  BOOST_TEST(index.size() == 100000u);
  for (uint32_t i = 0; i < 100000; ++i)
    BOOST_REQUIRE(index.find(uint64_t{i} * 7919) == i);
  BOOST_TEST(index.find(1) == id_index::absent);
  BOOST_TEST(index.find_or_insert(7919, 5, inserted) == 1u);
  BOOST_TEST(!inserted);

  id_index scratch;
  std::vector<uint64_t> unique;
  std::vector<uint32_t> position;
  uint64_t ids[] = {9, 4, 9, 9, 1, 4};
  dedup_ids(ids, 6, scratch, unique, position);
  BOOST_TEST((unique == std::vector<uint64_t>{9, 4, 1}));
  BOOST_TEST((position == std::vector<uint32_t>{0, 1, 0, 0, 2, 1}));
  uint64_t again[] = {4};
  dedup_ids(again, 1, scratch, unique, position); // the scratch starts over
  BOOST_TEST((unique == std::vector<uint64_t>{4}));
  BOOST_TEST((position == std::vector<uint32_t>{0}));
}

// Row-wise SGD and Adagrad touch only the pushed rows, and a row not
// pushed has a zero gradient, which leaves it (and its accumulator) as it
// is: so the lazy sparse update equals the dense update of the whole table
// with the pushed gradients scattered into it, duplicates summed.
BOOST_AUTO_TEST_CASE(sparse_pull_push_matches_a_dense_reference) {
  const uint64_t vocabulary = 50;
  const int dim = 4;
  for (auto kind : {sparse_optimizer_config::kind::sgd,
                    sparse_optimizer_config::kind::adagrad}) {
    auto opt = opt_of(kind, 0.1);
    troupe::sparse_table lazy{small_table(vocabulary, dim), opt};
    troupe::sparse_table fixed{
      small_table(vocabulary, dim, embedding_table_config::rows::fixed), opt};
    BOOST_TEST(fixed.rows() == vocabulary);
    // The dense reference starts from the rows as they are made.
    std::vector<float> dense(vocabulary * dim);
    for (uint64_t id = 0; id < vocabulary; ++id)
      std::copy_n(fixed.row(id), dim, dense.begin() + id * dim);
    std::vector<float> acc(dense.size(), 0.1f);
    optimizer_config sgd;
    sgd.type = optimizer_config::kind::sgd;
    sgd.learning_rate = 0.1;
    troupe::optimizer dense_sgd{sgd, dense.size()};

    splitmix64 rng{3};
    for (int step = 0; step < 40; ++step) {
      std::vector<uint64_t> ids(8);
      for (auto& id : ids)
        id = rng.below(vocabulary / 2) * 2; // odd rows are never touched
      ids[1] = ids[0];                      // a duplicate in every push
      std::vector<float> pulled(ids.size() * dim);
      BOOST_REQUIRE(!lazy.pull(ids.data(), ids.size(), pulled.data()));
      for (size_t i = 0; i < ids.size(); ++i)
        for (int j = 0; j < dim; ++j)
          BOOST_REQUIRE(std::abs(pulled[i * dim + j] - dense[ids[i] * dim + j])
                        < 1e-6);
      std::vector<float> grads(ids.size() * dim);
      for (auto& g : grads)
        g = static_cast<float>(rng.normal());
      std::vector<float> scattered(dense.size(), 0.f);
      for (size_t i = 0; i < ids.size(); ++i)
        for (int j = 0; j < dim; ++j)
          scattered[ids[i] * dim + j] += grads[i * dim + j];
      BOOST_REQUIRE(!lazy.push(ids.data(), ids.size(), grads.data()));
      BOOST_REQUIRE(!fixed.push(ids.data(), ids.size(), grads.data()));
      if (kind == sparse_optimizer_config::kind::sgd) {
        dense_sgd.apply(dense.data(), scattered.data(), step);
      } else {
        for (size_t k = 0; k < dense.size(); ++k) {
          acc[k] += scattered[k] * scattered[k];
          dense[k] -= 0.1f * scattered[k] / std::sqrt(acc[k]);
        }
      }
    }
    size_t compared = 0;
    for (uint64_t id = 0; id < vocabulary; ++id) {
      auto* r = lazy.row(id);
      BOOST_TEST((r == nullptr) == (id % 2 == 1), id); // made on touch only
      for (int j = 0; j < dim; ++j) {
        BOOST_TEST(fixed.row(id)[j] == dense[id * dim + j],
                   boost::test_tools::tolerance(1e-6f));
        if (r != nullptr) {
          BOOST_TEST(r[j] == dense[id * dim + j],
                     boost::test_tools::tolerance(1e-6f));
          ++compared;
        }
      }
    }
    BOOST_TEST(compared > 40u);
    BOOST_TEST(lazy.rows_pulled() == 40 * 8);
    BOOST_TEST(lazy.rows_pushed() == 40 * 8);
    BOOST_TEST(lazy.pushes() == 40);
  }
}

BOOST_AUTO_TEST_CASE(adagrad_and_adam_rows_match_hand_computed_updates) {
  // Adagrad (TF): acc += g^2; w -= lr g / sqrt(acc), acc from 0.1.
  {
    troupe::sparse_table t{small_table(10, 2),
                           opt_of(sparse_optimizer_config::kind::adagrad, 0.5)};
    uint64_t id = 3;
    float w0[2];
    BOOST_REQUIRE(!t.pull(&id, 1, w0));
    float g1[] = {0.2f, -1.f}, g2[] = {0.4f, 0.5f};
    BOOST_REQUIRE(!t.push(&id, 1, g1));
    BOOST_REQUIRE(!t.push(&id, 1, g2));
    for (int j = 0; j < 2; ++j) {
      double acc1 = 0.1 + g1[j] * g1[j];
      double w1 = w0[j] - 0.5 * g1[j] / std::sqrt(acc1);
      double acc2 = acc1 + g2[j] * g2[j];
      double w2 = w1 - 0.5 * g2[j] / std::sqrt(acc2);
      BOOST_TEST(std::abs(t.row(id)[j] - w2) < 1e-6);
    }
  }
  // LazyAdam: m, v of the pushed row only; the bias correction counts the
  // table's pushes, so row 5 pushed second gets t = 2; row 3 stays put.
  {
    troupe::sparse_table t{small_table(10, 2),
                           opt_of(sparse_optimizer_config::kind::adam, 0.01)};
    uint64_t a = 3, b = 5;
    float wa[2], wb[2];
    BOOST_REQUIRE(!t.pull(&a, 1, wa));
    BOOST_REQUIRE(!t.pull(&b, 1, wb));
    float ga[] = {1.f, -2.f}, gb[] = {0.5f, 0.25f};
    BOOST_REQUIRE(!t.push(&a, 1, ga));
    auto after_a = row_of(t, a);
    BOOST_REQUIRE(!t.push(&b, 1, gb));
    BOOST_TEST((row_of(t, a) == after_a)); // not pushed: not moved
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int j = 0; j < 2; ++j) {
      double alpha1 = 0.01 * std::sqrt(1 - b2) / (1 - b1);
      double m = (1 - b1) * ga[j], v = (1 - b2) * ga[j] * ga[j];
      // To 1e-6 absolute: the table computes in float.
      BOOST_TEST(
        std::abs(after_a[j] - (wa[j] - alpha1 * m / (std::sqrt(v) + eps)))
        < 1e-6);
      double alpha2 = 0.01 * std::sqrt(1 - b2 * b2) / (1 - b1 * b1);
      m = (1 - b1) * gb[j];
      v = (1 - b2) * gb[j] * gb[j];
      BOOST_TEST(
        std::abs(t.row(b)[j] - (wb[j] - alpha2 * m / (std::sqrt(v) + eps)))
        < 1e-6);
    }
    BOOST_TEST((t.slot_names() == std::vector<std::string>{"m", "v"}));
  }
}

BOOST_AUTO_TEST_CASE(rows_are_made_on_first_touch_from_their_id_alone) {
  auto opt = opt_of(sparse_optimizer_config::kind::sgd, 0.1);
  troupe::sparse_table a{small_table(uint64_t{1} << 40, 8), opt};
  troupe::sparse_table b{small_table(uint64_t{1} << 40, 8), opt};
  std::vector<uint64_t> ids{12, uint64_t{1} << 39, 0, 77};
  std::vector<uint64_t> reversed(ids.rbegin(), ids.rend());
  std::vector<float> out(ids.size() * 8);
  BOOST_REQUIRE(!a.pull(ids.data(), ids.size(), out.data()));
  BOOST_REQUIRE(!b.pull(reversed.data(), reversed.size(), out.data()));
  BOOST_TEST(a.rows() == 4u);
  for (auto id : ids) {
    BOOST_TEST((row_of(a, id) == row_of(b, id)));
    for (float x : row_of(a, id))
      BOOST_TEST(std::abs(x) <= 0.05f);
  }
  BOOST_TEST((row_of(a, 12) != row_of(a, 77)));
  auto other = small_table(uint64_t{1} << 40, 8);
  other.seed = 8;
  troupe::sparse_table c{other, opt};
  BOOST_REQUIRE(!c.pull(ids.data(), 1, out.data()));
  BOOST_TEST((row_of(c, 12) != row_of(a, 12)));
  BOOST_TEST(a.row(13) == nullptr);
  // A 2^40 vocabulary holds only what was touched.
  BOOST_TEST(a.memory_bytes() < 20u << 20);
}

BOOST_AUTO_TEST_CASE(ids_outside_the_vocabulary_are_refused_before_any_change) {
  troupe::sparse_table t{small_table(50, 4),
                         opt_of(sparse_optimizer_config::kind::adagrad, 0.1)};
  uint64_t ids[] = {1, 50};
  float buf[8] = {};
  auto err = t.pull(ids, 2, buf);
  BOOST_TEST(describe(err)
             == "table users: id 50 is not below its vocabulary (50)");
  BOOST_TEST((t.push(ids, 2, buf) == err));
  BOOST_TEST(t.rows() == 0u);
  BOOST_TEST(t.rows_pulled() == 0);
  BOOST_TEST(t.pushes() == 0);
}

// Readers number a field's values by frequency, so a Zipf field's hottest
// ids are the smallest: ranges of ids would put most of the traffic on the
// first shard; the hash spreads it.
BOOST_AUTO_TEST_CASE(hash_placement_spreads_zipf_ids_over_shards) {
  const int shards = 4;
  std::vector<double> hashed(shards, 0), ranged(shards, 0);
  double total = 0;
  for (uint64_t id = 0; id < 100000; ++id) {
    double weight = 1.0 / static_cast<double>(id + 1);
    hashed[shard_of_row(id, shards)] += weight;
    ranged[id * shards / 100000] += weight;
    total += weight;
  }
  for (int s = 0; s < shards; ++s) {
    BOOST_TEST(hashed[s] / total > 0.1, s);
    BOOST_TEST(hashed[s] / total < 0.45, s);
  }
  BOOST_TEST(ranged[0] / total > 0.8); // what ranges would do
  // Every id has one shard, the same every time.
  BOOST_TEST(shard_of_row(12345, 3) == shard_of_row(12345, 3));
}

// What a checkpoint does: stream every row with its optimizer state into
// another table; both then train alike.
BOOST_AUTO_TEST_CASE(a_table_copied_row_by_row_trains_on_alike) {
  auto opt = opt_of(sparse_optimizer_config::kind::adam, 0.01);
  troupe::sparse_table a{small_table(1000, 3), opt};
  splitmix64 rng{5};
  auto push_some = [&](troupe::sparse_table& t, uint64_t seed) {
    splitmix64 r{seed};
    std::vector<uint64_t> ids(20);
    std::vector<float> g(ids.size() * 3);
    for (auto& id : ids)
      id = r.below(1000);
    for (auto& x : g)
      x = static_cast<float>(r.normal());
    BOOST_REQUIRE(!t.push(ids.data(), ids.size(), g.data()));
  };
  for (int i = 0; i < 10; ++i)
    push_some(a, rng.next());
  troupe::sparse_table b{small_table(1000, 3), opt};
  size_t streamed = 0;
  a.for_each_row(
    [&](uint64_t id, const float* values, const float* const* slots) {
      BOOST_REQUIRE(!b.restore_row(id, values, slots));
      ++streamed;
    });
  b.set_pushes(a.pushes());
  BOOST_TEST(streamed == a.rows());
  BOOST_TEST(b.rows() == a.rows());
  for (int i = 0; i < 5; ++i) {
    auto seed = rng.next();
    push_some(a, seed);
    push_some(b, seed);
  }
  a.for_each_row([&](uint64_t id, const float* values, const float* const*) {
    BOOST_REQUIRE(b.row(id) != nullptr);
    BOOST_TEST(std::equal(values, values + 3, b.row(id)));
  });
}

BOOST_AUTO_TEST_SUITE_END()

// Tables that stay bounded (runtime/sparse/sparse_table with admission and
// eviction): the id index's deletion against a reference map, the counting
// filter's counts and its stated false-positive rate, admission by count
// and by probability, eviction by time to live and by capacity (lru and
// lfu), a slot reused after an eviction starting clean, pulls that make no
// row (so a replica evicts alike), and rows restored without their ages
// not evicted for an age they did not have.
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "runtime/base/random.hpp"
#include "runtime/sparse/admission_filter.hpp"
#include "runtime/sparse/sparse_table.hpp"

using namespace troupe;

namespace {

embedding_table_config table_of(int dim = 4) {
  embedding_table_config t;
  t.name = "items";
  t.vocabulary = uint64_t{1} << 40;
  t.dim = dim;
  t.seed = 11;
  return t;
}

sparse_optimizer_config sgd(double lr = 0.5) {
  sparse_optimizer_config o;
  o.type = sparse_optimizer_config::kind::sgd;
  o.learning_rate = lr;
  return o;
}

/// Pushes a gradient of ones for each of `ids` (one push).
void push_ones(troupe::sparse_table& t, const std::vector<uint64_t>& ids) {
  std::vector<float> g(ids.size() * static_cast<size_t>(t.dim()), 1.f);
  BOOST_REQUIRE(!t.push(ids.data(), ids.size(), g.data()));
}

std::vector<float> pulled(troupe::sparse_table& t, uint64_t id) {
  std::vector<float> out(static_cast<size_t>(t.dim()));
  BOOST_REQUIRE(!t.pull(&id, 1, out.data()));
  return out;
}

bool all_zero(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; });
}

} // namespace

BOOST_AUTO_TEST_SUITE(bounded_table)

BOOST_AUTO_TEST_CASE(the_index_erases_as_a_map_does) {
  id_index index{8};
  std::unordered_map<uint64_t, uint32_t> reference;
  splitmix64 rng{5};
  bool inserted = false;
  // Few distinct ids, many operations: long probe runs that erase breaks
  // and must close again.
  for (int op = 0; op < 200000; ++op) {
    uint64_t id = rng.below(3000);
    switch (rng.below(3)) {
      case 0: {
        auto slot = static_cast<uint32_t>(rng.below(1u << 20));
        auto got = index.find_or_insert(id, slot, inserted);
        auto [it, fresh] = reference.emplace(id, slot);
        BOOST_REQUIRE(inserted == fresh);
        BOOST_REQUIRE(got == it->second);
        break;
      }
      case 1:
        BOOST_REQUIRE(index.erase(id) == (reference.erase(id) == 1));
        break;
      default:
        if (auto it = reference.find(id); it != reference.end()) {
          it->second = static_cast<uint32_t>(op);
          index.set_slot(id, it->second);
        }
    }
    BOOST_REQUIRE(index.size() == reference.size());
  }
  for (uint64_t id = 0; id < 3000; ++id) {
    auto it = reference.find(id);
    BOOST_REQUIRE(index.find(id)
                  == (it == reference.end() ? id_index::absent : it->second));
  }
}

BOOST_AUTO_TEST_CASE(the_filter_counts_and_keeps_its_false_positive_rate) {
  constexpr uint64_t n = 100000;
  admission_filter f{n, 0.01, 3};
  // The Bloom filter's sizes: -n ln p / ln2^2 counters, (m/n) ln 2 hashes.
  BOOST_TEST(f.counters() == 958506u);
  BOOST_TEST(f.hashes() == 7);
  BOOST_TEST(f.memory_bytes() < 1u << 20);
  for (uint64_t id = 0; id < n; ++id)
    BOOST_REQUIRE(f.add(id * 2) >= 1);
  for (uint64_t id = 0; id < 100; ++id) {
    BOOST_REQUIRE(f.add(id * 2) >= 2);
    BOOST_REQUIRE(f.add(id * 2) >= 3);
  }
  // Never below the true count.
  for (uint64_t id = 0; id < n; ++id)
    BOOST_REQUIRE(f.count(id * 2) >= (id < 100 ? 3 : 1));
  // Keys never added: at most about 1% read 1 or more; almost none 2.
  int seen_once = 0, seen_twice = 0;
  for (uint64_t id = 0; id < n; ++id) {
    seen_once += f.count(id * 2 + 1) >= 1;
    seen_twice += f.count(id * 2 + 1) >= 2;
  }
  BOOST_TEST_MESSAGE("false positives at 1: " << seen_once << " of " << n
                                              << ", at 2: " << seen_twice);
  BOOST_TEST(seen_once < static_cast<int>(n / 100) * 13 / 10);
  BOOST_TEST(seen_twice < static_cast<int>(n / 1000));
  // Counters saturate instead of wrapping.
  for (int i = 0; i < 300; ++i)
    f.add(7);
  BOOST_TEST(f.count(7) == admission_filter::max_count);
  // The counts of two shards' filters add up on one (saturating), and a
  // copy sets them: no key's count falls below what either held.
  admission_filter a{1000, 0.01, 3}, b{1000, 0.01, 3};
  BOOST_TEST(a.counters() == admission_filter::counters_for(1000, 0.01));
  BOOST_TEST(a.hashes() == admission_filter::hashes_for(1000, 0.01));
  for (int i = 0; i < 200; ++i)
    a.add(1);
  for (int i = 0; i < 100; ++i)
    b.add(1);
  b.add(2);
  BOOST_REQUIRE(a.add_counts(0, b.counts(), b.counters()));
  BOOST_TEST(a.count(1) == admission_filter::max_count);
  BOOST_TEST(a.count(2) >= 1);
  admission_filter c{1000, 0.01, 3};
  BOOST_REQUIRE(c.set_counts(0, b.counts(), b.counters()));
  BOOST_TEST(c.count(2) == 1);
  BOOST_TEST(c.count(1) == 100);
  BOOST_TEST(!c.add_counts(1, b.counts(), b.counters()));
  BOOST_TEST(!c.set_counts(c.counters() + 1, b.counts(), 0));
}

BOOST_AUTO_TEST_CASE(a_key_gets_a_row_on_its_min_count_th_push) {
  auto cfg = table_of();
  cfg.admit.type = row_admission::kind::min_count;
  cfg.admit.min_count = 3;
  cfg.admit.expected_keys = 1000;
  troupe::sparse_table t{cfg, sgd()};
  // A key not admitted reads zeros, in training and in evaluation, and
  // its gradients are dropped.
  BOOST_TEST(all_zero(pulled(t, 42)));
  push_ones(t, {42, 42}); // one push: counted once
  push_ones(t, {42});
  BOOST_TEST(t.rows() == 0u);
  BOOST_TEST(t.rows_rejected() == 2);
  BOOST_TEST(all_zero(pulled(t, 42)));
  std::vector<float> peeked(4);
  uint64_t id = 42;
  BOOST_REQUIRE(!t.peek(&id, 1, peeked.data()));
  BOOST_TEST(all_zero(peeked));
  // The third push makes the row from (seed, id), as an unbounded table
  // makes it, and applies that push.
  push_ones(t, {42, 7});
  BOOST_TEST(t.rows() == 1u);
  BOOST_TEST(t.rows_made() == 1);
  troupe::sparse_table plain{table_of(), sgd()};
  push_ones(plain, {42});
  auto got = pulled(t, 42);
  BOOST_TEST(got == pulled(plain, 42));
  BOOST_TEST(!all_zero(got));
  BOOST_TEST(t.row(7) == nullptr);
}

BOOST_AUTO_TEST_CASE(admission_by_min_count_two_drops_the_keys_seen_once) {
  // A Zipf-like stream: most distinct keys come once.
  auto cfg = table_of(2);
  cfg.admit.type = row_admission::kind::min_count;
  cfg.admit.min_count = 2;
  cfg.admit.expected_keys = 20000;
  troupe::sparse_table bounded{cfg, sgd()};
  troupe::sparse_table plain{table_of(2), sgd()};
  splitmix64 rng{9};
  std::unordered_map<uint64_t, int> pushes_of;
  for (int step = 0; step < 2000; ++step) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < 8; ++i) {
      double u = rng.uniform01();
      ids.push_back(
        static_cast<uint64_t>(std::min(std::pow(1 - u, -1.0 / 0.3), 1e9)));
    }
    push_ones(bounded, ids);
    push_ones(plain, ids);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (auto id : ids)
      ++pushes_of[id];
  }
  size_t twice = 0;
  for (auto& [id, n] : pushes_of) {
    twice += n >= 2;
    // Every key pushed twice has a row (a count is never low).
    if (n >= 2)
      BOOST_REQUIRE(bounded.row(id) != nullptr);
  }
  BOOST_TEST_MESSAGE("rows " << bounded.rows() << " of " << plain.rows()
                             << ", keys pushed twice " << twice);
  BOOST_TEST(plain.rows() == pushes_of.size());
  // Only false positives above that: a few percent of the keys seen once.
  BOOST_TEST(bounded.rows() >= twice);
  BOOST_TEST(bounded.rows() <= twice + (plain.rows() - twice) / 20);
  BOOST_TEST(bounded.rows() < plain.rows() / 2);
}

BOOST_AUTO_TEST_CASE(admission_by_probability_admits_that_share) {
  auto cfg = table_of(1);
  cfg.admit.type = row_admission::kind::probability;
  cfg.admit.probability = 0.25;
  troupe::sparse_table t{cfg, sgd()};
  std::vector<uint64_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = i * 977;
  push_ones(t, ids);
  BOOST_TEST(t.rows() > 4600u);
  BOOST_TEST(t.rows() < 5400u);
  BOOST_TEST(t.rows_rejected() == static_cast<int64_t>(20000 - t.rows()));
  // The draw is the same for the same pushes: a replica agrees.
  troupe::sparse_table again{cfg, sgd()};
  push_ones(again, ids);
  BOOST_TEST(again.rows() == t.rows());
  for (size_t i = 0; i < ids.size(); i += 97)
    BOOST_REQUIRE((t.row(ids[i]) == nullptr) == (again.row(ids[i]) == nullptr));
  // Each push draws again: a key rejected once may come in later.
  push_ones(t, ids);
  BOOST_TEST(t.rows() > 8200u);
}

BOOST_AUTO_TEST_CASE(a_row_not_pushed_for_its_time_to_live_goes) {
  auto cfg = table_of();
  cfg.evict.steps_to_live = 8;
  troupe::sparse_table t{cfg, sgd()};
  troupe::sparse_table plain{table_of(), sgd()};
  // Key 1 in every push, key 2 only in the first, key 100 + s in push s.
  for (int s = 0; s < 40; ++s) {
    std::vector<uint64_t> ids{1, 100 + static_cast<uint64_t>(s)};
    if (s == 0)
      ids.push_back(2);
    push_ones(t, ids);
    push_ones(plain, ids);
    // At most ttl * 1.25 pushes old, besides this push's own rows.
    BOOST_REQUIRE(t.rows() <= 3 + 10u);
  }
  BOOST_TEST(t.row(2) == nullptr);
  BOOST_TEST(t.row(100) == nullptr);
  BOOST_TEST(t.row(139) != nullptr);
  // Rows that stayed are untouched by the others' going.
  BOOST_TEST(pulled(t, 1) == pulled(plain, 1));
  BOOST_TEST(pulled(t, 139) == pulled(plain, 139));
  BOOST_TEST(t.rows_evicted() == static_cast<int64_t>(42 - t.rows()));
  // An evicted key that comes back starts again from its initial row.
  troupe::sparse_table fresh{table_of(), sgd()};
  BOOST_TEST(pulled(t, 2) == pulled(fresh, 2));
}

BOOST_AUTO_TEST_CASE(past_max_rows_the_least_recently_pushed_go) {
  auto cfg = table_of();
  cfg.evict.max_rows = 1000;
  troupe::sparse_table t{cfg, sgd()};
  size_t memory_at_capacity = 0;
  // Key 0..9 in every push; 50 new keys a push.
  for (uint64_t s = 0; s < 400; ++s) {
    std::vector<uint64_t> ids;
    for (uint64_t k = 0; k < 10; ++k)
      ids.push_back(k);
    for (uint64_t k = 0; k < 50; ++k)
      ids.push_back(1000 + s * 50 + k);
    push_ones(t, ids);
    BOOST_REQUIRE(t.rows() <= 1000u);
    if (s == 100)
      memory_at_capacity = t.memory_bytes();
  }
  BOOST_TEST(t.rows() >= 950u);
  BOOST_TEST(t.memory_bytes() == memory_at_capacity);
  for (uint64_t k = 0; k < 10; ++k)
    BOOST_REQUIRE(t.row(k) != nullptr);
  // The newest push's keys stay; the oldest went.
  BOOST_TEST(t.row(1000 + 399 * 50) != nullptr);
  BOOST_TEST(t.row(1000) == nullptr);
  // Every row left is still found at its own values.
  size_t found = 0;
  t.for_each_row([&](uint64_t id, const float* values, const float* const*) {
    BOOST_REQUIRE(t.row(id) == values);
    ++found;
  });
  BOOST_TEST(found == t.rows());
}

BOOST_AUTO_TEST_CASE(lfu_keeps_the_often_pushed_over_the_recent) {
  // Keys 0..49 pushed ten times early on; then a run of new keys once,
  // into a table of at most 100 rows.
  auto pushed = [](row_eviction::policy victims) {
    auto cfg = table_of();
    cfg.evict.max_rows = 100;
    cfg.evict.victims = victims;
    auto t = std::make_unique<troupe::sparse_table>(cfg, sgd());
    std::vector<uint64_t> often;
    for (uint64_t k = 0; k < 50; ++k)
      often.push_back(k);
    for (int r = 0; r < 10; ++r)
      push_ones(*t, often);
    for (uint64_t k = 1000; k < 1200; ++k)
      push_ones(*t, {k});
    return t;
  };
  auto lfu = pushed(row_eviction::policy::lfu);
  for (uint64_t k = 0; k < 50; ++k)
    BOOST_REQUIRE(lfu->row(k) != nullptr);
  BOOST_TEST(lfu->rows() <= 100u);
  BOOST_TEST(pushed(row_eviction::policy::lru)->row(0) == nullptr);
}

BOOST_AUTO_TEST_CASE(pulls_make_no_row_so_a_replica_evicts_alike) {
  // A replica gets the pushes its primary applies, not the pulls: with
  // the same pushes, both hold the same rows in the same slots.
  auto cfg = table_of();
  cfg.evict.max_rows = 60;
  cfg.evict.steps_to_live = 20;
  troupe::sparse_table primary{cfg, sgd()};
  troupe::sparse_table replica{cfg, sgd()};
  splitmix64 rng{4};
  std::vector<float> out(16 * 4);
  for (int s = 0; s < 300; ++s) {
    std::vector<uint64_t> ids(16);
    for (auto& id : ids)
      id = rng.below(200);
    BOOST_REQUIRE(!primary.pull(ids.data(), ids.size(), out.data()));
    if (s % 3 == 0) {
      // Pulled, never pushed: read as it would be made, and not made.
      troupe::sparse_table plain{table_of(), sgd()};
      std::vector<float> made(4 * ids.size());
      BOOST_REQUIRE(!plain.pull(ids.data(), ids.size(), made.data()));
      for (size_t i = 0; i < ids.size(); ++i)
        if (primary.row(ids[i]) == nullptr)
          BOOST_REQUIRE(std::equal(made.begin() + 4 * i,
                                   made.begin() + 4 * (i + 1),
                                   out.begin() + 4 * i));
      continue;
    }
    push_ones(primary, ids);
    push_ones(replica, ids);
  }
  BOOST_TEST(primary.rows() == replica.rows());
  std::vector<uint64_t> a, b;
  primary.for_each_row(
    [&](uint64_t id, const float*, const float* const*) { a.push_back(id); });
  replica.for_each_row(
    [&](uint64_t id, const float*, const float* const*) { b.push_back(id); });
  BOOST_TEST(a == b);
  BOOST_TEST(primary.rows_evicted() == replica.rows_evicted());
  BOOST_TEST(primary.rows_evicted() > 0);
}

BOOST_AUTO_TEST_CASE(a_slot_left_by_an_evicted_row_starts_clean) {
  // Adam's m and v of a row made in a slot another row left must be zero,
  // as a slot of a fresh chunk is.
  auto cfg = table_of();
  cfg.evict.steps_to_live = 1;
  sparse_optimizer_config adam;
  adam.type = sparse_optimizer_config::kind::adam;
  adam.learning_rate = 0.1;
  troupe::sparse_table t{cfg, adam};
  for (uint64_t s = 0; s < 20; ++s)
    push_ones(t, {s});
  std::vector<uint64_t> late{500};
  push_ones(t, late);
  std::vector<float> m, v;
  t.for_each_row([&](uint64_t id, const float*, const float* const* slots) {
    if (id == 500) {
      m.assign(slots[0], slots[0] + 4);
      v.assign(slots[1], slots[1] + 4);
    }
  });
  BOOST_REQUIRE(m.size() == 4u);
  // One Adam step from zero state on a gradient of ones.
  for (int j = 0; j < 4; ++j) {
    BOOST_TEST(m[j] == 0.1f, boost::test_tools::tolerance(1e-6f));
    BOOST_TEST(v[j] == 0.001f, boost::test_tools::tolerance(1e-4f));
  }
}

BOOST_AUTO_TEST_CASE(rows_restored_without_their_ages_count_as_pushed_now) {
  // A checkpoint of a table that did not evict holds no ages: its rows
  // must not go for an age they did not have.
  auto cfg = table_of();
  troupe::sparse_table before{table_of(), sgd()};
  for (int s = 0; s < 100; ++s)
    push_ones(before, {1, 2, 3});
  cfg.evict.steps_to_live = 10;
  troupe::sparse_table after{cfg, sgd()};
  after.set_pushes(before.pushes());
  before.for_each_row(
    [&](uint64_t id, const float* values, const float* const* slots) {
      BOOST_REQUIRE(!after.restore_row(id, values, slots));
    });
  for (int s = 0; s < 10; ++s)
    push_ones(after, {50});
  BOOST_TEST(after.rows() == 4u);
  for (int s = 0; s < 5; ++s)
    push_ones(after, {50});
  BOOST_TEST(after.rows() == 1u);
  // Restored rows are not counted as made here.
  BOOST_TEST(after.rows_made() == 1);
}

BOOST_AUTO_TEST_SUITE_END()

// A primary shard keeps its replica in step (cluster.shard_replicas), in
// one process and over the data plane on 127.0.0.1: the replica's copy is
// built while pushes go on, is bitwise the primary's once in step, holds
// every push the primary has acknowledged, and a lost replica, or one that
// stops answering, is dropped without holding the primary's pushes up.
#include "actors/served_shard.hpp"
#include "actors/shard.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>

#include "actors/data_plane/data_link.hpp"
#include "fixture.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

constexpr int dim = 4;

/// bounded: the table admits keys on their second push and keeps at most
/// 300 rows, none unpushed for 40 pushes.
shard_options options(bool follower, bool bounded = false) {
  shard_options o;
  o.block.optimizer.type = optimizer_config::kind::adam;
  o.block.optimizer.learning_rate = 0.01;
  o.block.stale_momentum = stale_momentum_rule::reduce;
  o.initial.assign(1000, 0.5f);
  embedding_table_config t;
  t.name = "ids";
  t.vocabulary = 1 << 20;
  t.dim = dim;
  if (bounded) {
    t.admit.type = row_admission::kind::min_count;
    t.admit.min_count = 2;
    t.admit.expected_keys = 20000;
    t.evict.max_rows = 300;
    t.evict.steps_to_live = 40;
  }
  sparse_optimizer_config adam;
  adam.type = sparse_optimizer_config::kind::adam;
  o.tables = {{t, adam}};
  o.follower = follower;
  o.replica_timeout = 10s;
  return o;
}

struct pair_of_shards {
  bool bounded;
  cluster_fixture f;
  caf::scoped_actor self{*f.sys};
  shard_actor primary = f.sys->spawn(shard_impl, options(false, bounded));
  shard_actor replica = f.sys->spawn(shard_impl, options(true, bounded));
  int64_t batch = 0;

  explicit pair_of_shards(bool bounded_table = false) : bounded(bounded_table) {
    for (int32_t w : {0, 1})
      self->request(primary, 5s, join_atom_v, w)
        .receive([](int64_t) {},
                 [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  }
  ~pair_of_shards() {
    self->send_exit(primary, caf::exit_reason::user_shutdown);
    self->send_exit(replica, caf::exit_reason::user_shutdown);
  }

  /// One step of worker `w`: rows, then the dense push; the acks.
  std::pair<push_ack, push_ack> step(int32_t w) {
    auto b = batch++;
    std::vector<uint64_t> ids;
    // A bounded table sees its 700 keys again and again: admitted on
    // their second push, evicted past 300 rows.
    for (int k = 0; k < 8; ++k)
      ids.push_back(static_cast<uint64_t>(
        bounded ? (b * 3 + k * 17) % 700 : (b * 37 + k * 1009) % 5000));
    std::vector<float> rg(ids.size() * dim);
    for (size_t i = 0; i < rg.size(); ++i)
      rg[i] = 0.01f * static_cast<float>((b + i) % 7) - 0.03f;
    row_push rp{0,
                0,
                w,
                b,
                0,
                ids,
                std::make_shared<const std::vector<float>>(std::move(rg))};
    std::pair<push_ack, push_ack> out;
    self->request(primary, 5s, push_atom_v, std::move(rp))
      .receive([&](push_ack& a) { out.first = a; },
               [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    std::vector<float> g(1000);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = 0.001f * static_cast<float>((b * 13 + i) % 11) - 0.005f;
    self
      ->request(primary, 5s, push_atom_v,
                gradient_push::of(0, w, std::max<int64_t>(0, b - 1),
                                  std::move(g), b))
      .receive([&](push_ack& a) { out.second = a; },
               [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    return out;
  }

  shard_stats stats(const shard_actor& s) {
    shard_stats out;
    self->request(s, 5s, stats_atom_v)
      .receive([&](shard_stats& x) { out = x; },
               [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    return out;
  }

  /// The shard's dense values, version and its rows by id.
  struct contents {
    int64_t version = 0;
    std::vector<float> values;
    std::vector<std::vector<float>> slots;
    std::map<uint64_t, std::vector<float>> rows; ///< values, then slots
  };
  contents contents_of(const shard_actor& s) {
    contents c;
    self->request(s, 5s, snapshot_atom_v)
      .receive(
        [&](shard_state_msg& m) {
          c.version = m.version;
          c.values = std::move(m.values);
          c.slots = std::move(m.slots);
        },
        [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    self
      ->request(s, 5s, snapshot_atom_v, int32_t{0}, uint64_t{0},
                uint64_t{1} << 20)
      .receive(
        [&](row_chunk& r) {
          for (size_t i = 0; i < r.ids.size(); ++i) {
            std::vector<float> row(r.values.begin() + i * dim,
                                   r.values.begin() + (i + 1) * dim);
            for (auto& slot : r.slots)
              row.insert(row.end(), slot.begin() + i * dim,
                         slot.begin() + (i + 1) * dim);
            c.rows[r.ids[i]] = std::move(row);
          }
        },
        [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    return c;
  }

  /// Waits for the primary's news of its replica: (version, text).
  std::pair<int64_t, std::string> news() {
    std::pair<int64_t, std::string> out{-2, "none within 10 s"};
    self->receive(
      [&](replicate_atom, int32_t, int64_t v, std::string& text) {
        out = {v, std::move(text)};
      },
      caf::after(10s) >> [] {});
    return out;
  }

  /// The primary starts copying itself to the replica, in this process.
  void start_replica() {
    self
      ->request(primary, 5s, replicate_atom_v,
                static_cast<shard_data_actor>(replica), std::string{})
      .receive([](bool) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  }

  /// The table's admission counts on shard `s`.
  std::vector<uint8_t> counts_of(const shard_actor& s) {
    std::vector<uint8_t> out;
    self
      ->request(s, 5s, snapshot_atom_v, counts_atom_v, int32_t{0}, uint64_t{0},
                uint64_t{1} << 30)
      .receive([&](key_counts& c) { out = std::move(c.counts); },
               [](caf::error& e) { BOOST_FAIL(to_string(e)); });
    return out;
  }

  void require_same() {
    auto a = contents_of(primary);
    auto b = contents_of(replica);
    BOOST_TEST(a.version == b.version);
    BOOST_TEST(a.values == b.values); // bitwise: == on floats
    BOOST_TEST(a.slots == b.slots);
    BOOST_TEST(a.rows.size() == b.rows.size());
    BOOST_TEST((a.rows == b.rows));
    for (auto& [id, row] : a.rows)
      if (b.rows.count(id) == 0 || b.rows[id] != row)
        BOOST_TEST_MESSAGE("row " << id << " differs or is missing");
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(shard_replica)

BOOST_AUTO_TEST_CASE(a_replica_copied_mid_run_stays_bitwise_in_step) {
  pair_of_shards p;
  // 400k rows: the copy takes several chunks (about 8 MB each), between
  // which the pushes below come.
  std::vector<uint64_t> ids(400000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = 100000 + i;
  p.self->request(p.primary, 5s, pull_atom_v, row_request{0, 0, 0, ids})
    .receive([](row_block&) {},
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  for (int k = 0; k < 40; ++k) // rows and Adam state before the copy
    p.step(k % 2);
  p.start_replica();
  for (int k = 0; k < 10; ++k) // pushes while the copy runs
    p.step(k % 2);
  auto [version, text] = p.news();
  BOOST_TEST_MESSAGE("replica: " << text);
  BOOST_REQUIRE(version >= 40);
  BOOST_TEST(text.find("in step after") != std::string::npos, text);
  auto ps = p.stats(p.primary);
  BOOST_TEST(ps.replica == static_cast<int8_t>(replica_state::in_step));
  BOOST_TEST(ps.replica_rows >= 400000);
  // Once in step, every acknowledged push is on the replica already.
  for (int k = 0; k < 20; ++k) {
    auto [rows_ack, dense_ack] = p.step(k % 2);
    BOOST_TEST(p.stats(p.replica).version == dense_ack.version);
  }
  p.require_same();
  auto rs = p.stats(p.replica);
  BOOST_TEST(rs.follower);
  BOOST_TEST(rs.version == 70);
  // A batch the primary applied is a duplicate on the replica too.
  BOOST_TEST(rs.stale == 0);
  p.self->request(p.replica, 5s, promote_atom_v)
    .receive([](int64_t v) { BOOST_TEST(v == 70); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  p.self
    ->request(p.replica, 5s, push_atom_v,
              gradient_push::of(0, 1, 70, std::vector<float>(1000, 0.1f), 5))
    .receive([](push_ack& a) { BOOST_TEST(a.stale); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_TEST(!p.stats(p.replica).follower);
}

BOOST_AUTO_TEST_CASE(
  a_bounded_tables_replica_admits_and_evicts_as_its_primary) {
  // The replica's copy starts while the primary admits and evicts rows;
  // once in step it holds the same rows, values and counts: it admits as
  // its primary (the counts come first) and evicts what its primary does.
  pair_of_shards p{true};
  for (int k = 0; k < 60; ++k)
    p.step(k % 2);
  p.start_replica();
  for (int k = 0; k < 10; ++k) // pushes while the copy runs
    p.step(k % 2);
  auto [version, text] = p.news();
  BOOST_TEST(text.find("in step after") != std::string::npos, text);
  for (int k = 0; k < 200; ++k)
    p.step(k % 2);
  p.require_same();
  auto counts = p.counts_of(p.primary);
  BOOST_TEST(!counts.empty());
  BOOST_TEST((counts == p.counts_of(p.replica)));
  auto ps = p.stats(p.primary);
  auto rs = p.stats(p.replica);
  BOOST_REQUIRE(ps.tables.size() == 1u);
  BOOST_TEST(ps.tables[0].rows <= 300);
  BOOST_TEST(ps.tables[0].rows_evicted > 0);
  BOOST_TEST(ps.tables[0].rows_rejected > 0);
  BOOST_TEST(rs.tables[0].rows == ps.tables[0].rows);
  // Promoted, the replica evicts on its own.
  p.self->request(p.replica, 5s, promote_atom_v)
    .receive([](int64_t) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  auto before = p.stats(p.replica).tables[0].rows_evicted;
  std::vector<uint64_t> fresh;
  for (uint64_t id = 900000; id < 900400; ++id)
    fresh.push_back(id);
  for (int twice = 0; twice < 2; ++twice)
    p.self
      ->request(p.replica, 5s, push_atom_v,
                row_push{0, 0, 1, 1000 + twice, 0, fresh,
                         std::make_shared<const std::vector<float>>(
                           fresh.size() * dim, 0.01f)})
      .receive([](push_ack&) {},
               [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_TEST(p.stats(p.replica).tables[0].rows <= 300);
  BOOST_TEST(p.stats(p.replica).tables[0].rows_evicted > before);
}

BOOST_AUTO_TEST_CASE(a_replica_over_the_data_plane_and_its_loss) {
  pair_of_shards p;
  auto server = data_server::start(*p.f.sys, "127.0.0.1", 0);
  BOOST_REQUIRE_MESSAGE(server, troupe::test::why(server));
  (*server)->serve(0, p.replica, 1000, {dim});
  for (int k = 0; k < 30; ++k)
    p.step(k % 2);
  auto address = "127.0.0.1:" + std::to_string((*server)->port());
  p.self->request(p.primary, 5s, replicate_atom_v, shard_data_actor{}, address)
    .receive([](bool) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  for (int k = 0; k < 10; ++k)
    p.step(k % 2);
  auto [version, text] = p.news();
  BOOST_REQUIRE_MESSAGE(version >= 30, text);
  for (int k = 0; k < 10; ++k) {
    auto [rows_ack, dense_ack] = p.step(k % 2);
    BOOST_TEST(p.stats(p.replica).version == dense_ack.version);
  }
  p.require_same();
  // The replica's node goes: the primary says so and trains on alone.
  (*server)->stop();
  p.step(0); // the push that finds the link gone is answered all the same
  auto [gone, why] = p.news();
  BOOST_TEST(gone == -1);
  BOOST_TEST(why.find("did not take an update") != std::string::npos, why);
  auto [r, d] = p.step(1);
  BOOST_TEST(d.version == 52);
  BOOST_TEST(p.stats(p.primary).replica
             == static_cast<int8_t>(replica_state::none));
}

/// A primary whose replica (in this process, or behind a data server)
/// takes its ops and answers none gives it up after its replica timeout,
/// and answers the push that waited for it.
void silent_replica_is_dropped(bool over_the_data_plane) {
  cluster_fixture f;
  caf::scoped_actor self{*f.sys};
  auto o = options(false);
  o.replica_timeout = 300ms;
  shard_actor primary = f.sys->spawn(shard_impl, o);
  auto silent = f.sys->spawn(silent_shard);
  self->request(primary, 5s, join_atom_v, int32_t{0})
    .receive([](int64_t) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  std::shared_ptr<data_server> server;
  if (over_the_data_plane) {
    auto started = data_server::start(*f.sys, "127.0.0.1", 0);
    BOOST_REQUIRE_MESSAGE(started, troupe::test::why(started));
    server = *started;
    server->serve(0, silent, 1000, {dim});
    auto address = "127.0.0.1:" + std::to_string(server->port());
    self->request(primary, 5s, replicate_atom_v, shard_data_actor{}, address)
      .receive([](bool) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  } else {
    self->request(primary, 5s, replicate_atom_v, silent, std::string{})
      .receive([](bool) {}, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  }
  // The table is empty: the copy is sent at once, and from now on pushes
  // wait for the replica. This one is answered once it is given up.
  auto began = std::chrono::steady_clock::now();
  self
    ->request(primary, 5s, push_atom_v,
              gradient_push::of(0, 0, 0, std::vector<float>(1000, 0.1f), 0))
    .receive([](push_ack& a) { BOOST_TEST(a.version == 1); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  auto waited = std::chrono::steady_clock::now() - began;
  BOOST_TEST((waited >= 250ms));
  BOOST_TEST((waited < 4s));
  std::pair<int64_t, std::string> news{-2, "none within 5 s"};
  self->receive(
    [&](replicate_atom, int32_t, int64_t v, std::string& text) {
      news = {v, std::move(text)};
    },
    caf::after(5s) >> [] {});
  BOOST_TEST(news.first == -1);
  BOOST_TEST(news.second.find("did not answer within 300 ms")
               != std::string::npos,
             news.second);
  // Alone now: the next push waits for nobody.
  began = std::chrono::steady_clock::now();
  self
    ->request(primary, 5s, push_atom_v,
              gradient_push::of(0, 0, 1, std::vector<float>(1000, 0.1f), 1))
    .receive([](push_ack& a) { BOOST_TEST(a.version == 2); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_TEST((std::chrono::steady_clock::now() - began < 2s));
  self->request(primary, 5s, stats_atom_v)
    .receive(
      [](shard_stats& s) {
        BOOST_TEST(s.replica == static_cast<int8_t>(replica_state::none));
      },
      [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  self->send_exit(primary, caf::exit_reason::user_shutdown);
  if (server)
    server->stop();
  self->send_exit(silent, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_replica_that_stops_answering_is_dropped) {
  silent_replica_is_dropped(false);
}

BOOST_AUTO_TEST_CASE(a_replica_node_that_hangs_is_dropped) {
  silent_replica_is_dropped(true);
}

BOOST_AUTO_TEST_SUITE_END()

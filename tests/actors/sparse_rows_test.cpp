// Embedding-table rows on shard actors, asked for as a worker asks: in one
// process and through the data plane on 127.0.0.1. A table spread over
// three shards by shard_of_row updates as the same table held densely;
// a pull answers exactly the rows it named, in order; bad requests are
// refused with their code and change nothing; a client drops a server
// that answers rows nobody asked for; in sync mode rows go with their
// worker's dense push into its update.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "actors/data_plane/data_link.hpp"
#include "actors/net/remote.hpp"
#include "actors/served_shard.hpp"
#include "actors/shard.hpp"
#include "fixture.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

constexpr uint64_t vocabulary = 60;
constexpr int dim = 4;
constexpr int32_t shards = 3;

embedding_table_config small_table() {
  embedding_table_config t;
  t.name = "ids";
  t.vocabulary = vocabulary;
  t.dim = dim;
  t.seed = 7;
  return t;
}

/// Shards (three unless told) holding one table, and (when `wire`) a
/// data_server for them with a client whose stubs stand in for them, as a
/// worker node sees remote shards.
struct spread_table {
  cluster_fixture f;
  std::vector<shard_actor> actors;
  std::vector<shard_data_actor> handles; ///< what requests go to
  std::shared_ptr<data_server> server;
  std::shared_ptr<data_client> client;

  explicit spread_table(bool wire, sparse_optimizer_config opt = adagrad(),
                        param_block::options block = {},
                        int32_t count = shards) {
    for (int32_t i = 0; i < count; ++i) {
      shard_options o;
      o.id = i;
      o.block = block;
      o.initial = {0.f};
      o.tables = {{small_table(), opt}};
      actors.push_back(f.sys->spawn(shard_impl, o));
    }
    handles.assign(actors.begin(), actors.end());
    if (!wire)
      return;
    auto s = data_server::start(*f.sys, "127.0.0.1", 0);
    BOOST_REQUIRE_MESSAGE(s, troupe::test::why(s));
    server = *s;
    client = data_client::open(*f.sys, "127.0.0.1", server->port(), 5s);
    for (int32_t i = 0; i < count; ++i) {
      server->serve(i, actors[static_cast<size_t>(i)], 1, {dim});
      handles[static_cast<size_t>(i)] = client->stub(i, 1, {dim});
    }
  }
  ~spread_table() {
    if (client)
      client->close();
    if (server)
      server->stop();
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  static sparse_optimizer_config adagrad() {
    sparse_optimizer_config o;
    o.type = sparse_optimizer_config::kind::adagrad;
    o.learning_rate = 0.1;
    return o;
  }

  caf::expected<row_block> pull(int32_t shard, std::vector<uint64_t> ids,
                                int32_t table = 0) {
    caf::scoped_actor self{*f.sys};
    caf::expected<row_block> out{caf::sec::none};
    self
      ->request(handles[static_cast<size_t>(shard)], 5s, pull_atom_v,
                row_request{shard, table, 0, std::move(ids)})
      .receive([&](row_block& b) { out = std::move(b); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  caf::error push(int32_t shard, std::vector<uint64_t> ids,
                  std::vector<float> grads, int32_t table = 0) {
    caf::scoped_actor self{*f.sys};
    caf::error out;
    auto g = std::make_shared<const std::vector<float>>(std::move(grads));
    self
      ->request(handles[static_cast<size_t>(shard)], 5s, push_atom_v,
                row_push{shard, table, 0, -1, 0, std::move(ids), std::move(g)})
      .receive([](push_ack&) {}, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  /// Every row of the table, each pulled from the shard that holds it.
  std::vector<float> all_rows() {
    std::vector<float> out(vocabulary * dim);
    for (int32_t s = 0; s < shards; ++s) {
      std::vector<uint64_t> ids;
      for (uint64_t id = 0; id < vocabulary; ++id)
        if (shard_of_row(id, shards) == s)
          ids.push_back(id);
      auto b = pull(s, ids);
      BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
      BOOST_REQUIRE_EQUAL(b->values->size(), ids.size() * dim);
      for (size_t i = 0; i < ids.size(); ++i)
        std::copy_n(b->values->data() + i * dim, dim,
                    out.data() + ids[i] * dim);
    }
    return out;
  }

  shard_stats stats(int32_t shard) {
    caf::scoped_actor self{*f.sys};
    shard_stats out;
    self->request(actors[static_cast<size_t>(shard)], 5s, stats_atom_v)
      .receive([&](shard_stats& s) { out = s; }, [](caf::error&) {});
    return out;
  }
};

/// 40 pushes of 12 ids drawn with repeats, each split by shard as a
/// worker splits its batch, against the whole table updated densely by
/// Adagrad (a row with no gradient keeps its value and accumulator, so
/// the dense update is what the lazy one must equal).
void matches_dense_adagrad(bool wire) {
  spread_table t{wire};
  auto dense = t.all_rows();
  std::vector<float> acc(dense.size(), 0.1f);
  std::mt19937_64 rng{11};
  std::uniform_int_distribution<uint64_t> pick{0, vocabulary - 1};
  std::normal_distribution<float> grad{0.f, 1.f};
  int64_t pushed = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<uint64_t> ids(12);
    std::vector<float> g(ids.size() * dim);
    for (auto& id : ids)
      id = pick(rng);
    for (auto& x : g)
      x = grad(rng);
    std::vector<float> summed(dense.size(), 0.f);
    for (size_t i = 0; i < ids.size(); ++i)
      for (int j = 0; j < dim; ++j)
        summed[ids[i] * dim + j] += g[i * dim + j];
    for (size_t k = 0; k < dense.size(); ++k) {
      acc[k] += summed[k] * summed[k];
      dense[k] -= 0.1f * summed[k] / std::sqrt(acc[k]);
    }
    for (int32_t s = 0; s < shards; ++s) {
      std::vector<uint64_t> mine;
      std::vector<float> mine_g;
      for (size_t i = 0; i < ids.size(); ++i)
        if (shard_of_row(ids[i], shards) == s) {
          mine.push_back(ids[i]);
          mine_g.insert(mine_g.end(), g.begin() + i * dim,
                        g.begin() + (i + 1) * dim);
        }
      pushed += static_cast<int64_t>(mine.size());
      if (!mine.empty())
        BOOST_REQUIRE(!t.push(s, mine, mine_g));
    }
  }
  auto rows = t.all_rows();
  double worst = 0;
  for (size_t k = 0; k < rows.size(); ++k)
    worst = std::max(worst, static_cast<double>(std::fabs(rows[k] - dense[k])));
  BOOST_TEST(worst < 1e-6, "largest difference " << worst);
  int64_t held = 0, in_pushes = 0, in_pulls = 0;
  for (int32_t s = 0; s < shards; ++s) {
    auto st = t.stats(s);
    held += st.rows;
    in_pushes += st.rows_pushed;
    in_pulls += st.rows_pulled;
    BOOST_TEST(st.row_bytes > 0);
  }
  BOOST_TEST(held == static_cast<int64_t>(vocabulary));
  BOOST_TEST(in_pushes == pushed);
  BOOST_TEST(in_pulls == 2 * static_cast<int64_t>(vocabulary));
}

/// One sync shard (2 pushes per update, workers 0, 1 and 2) holding the
/// small table, asked directly or (when `wire`) through the data plane.
struct sync_shard {
  spread_table t;

  static param_block::options sync_block() {
    param_block::options o;
    o.mode = cluster_config::mode::sync;
    o.aggregate = 2;
    return o;
  }

  explicit sync_shard(bool wire)
    : t{wire, spread_table::adagrad(), sync_block(), 1} {
    caf::scoped_actor self{*t.f.sys};
    for (int32_t w = 0; w < 3; ++w)
      self->request(t.actors[0], 5s, join_atom_v, w)
        .receive([](int64_t) {}, [](caf::error&) {});
  }

  /// The ack (version, stale) of a push, or its error.
  template <class Push>
  caf::expected<push_ack> ask(Push p) {
    caf::scoped_actor self{*t.f.sys};
    caf::expected<push_ack> out{caf::sec::none};
    self->request(t.handles[0], 5s, push_atom_v, std::move(p))
      .receive([&](push_ack& a) { out = a; },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }
  caf::expected<push_ack> rows(int32_t worker, int64_t tag,
                               std::vector<uint64_t> ids,
                               std::vector<float> grads) {
    return ask(
      row_push{0, 0, worker, -1, tag, std::move(ids),
               std::make_shared<const std::vector<float>>(std::move(grads))});
  }
  caf::expected<push_ack> dense(int32_t worker, int64_t tag) {
    return ask(gradient_push::of(0, worker, tag, {1.f}));
  }
  std::vector<float> row(uint64_t id) {
    caf::scoped_actor self{*t.f.sys};
    std::vector<float> out;
    self
      ->request(t.handles[0], 5s, pull_atom_v, row_request{0, 0, 0, {id}, true})
      .receive([&](row_block& b) { out = *b.values; }, [](caf::error&) {});
    return out;
  }
};

/// A row's values after one Adagrad step (0.1, accumulator from 0.1) on
/// gradient g.
std::vector<float> adagrad_step(std::vector<float> w,
                                const std::vector<float>& g) {
  for (size_t j = 0; j < w.size(); ++j)
    w[j] -= 0.1f * g[j] / std::sqrt(0.1f + g[j] * g[j]);
  return w;
}

double max_difference(const std::vector<float>& a,
                      const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0 : 1e9;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j)
    worst = std::max(worst, static_cast<double>(std::fabs(a[j] - b[j])));
  return worst;
}

/// Sync: rows wait for their worker's dense push, are applied once with
/// the update as the mean over its pushes, and are dropped with a late
/// (backup) worker's push.
void sync_rows_go_with_their_dense_push(bool wire) {
  sync_shard t{wire};
  auto r1 = t.row(1), r2 = t.row(2), r3 = t.row(3);
  BOOST_REQUIRE_EQUAL(r1.size(), static_cast<size_t>(dim));
  auto ok = [](const caf::expected<push_ack>& a) { return a && !a->stale; };
  // Workers 0 and 1 push rows 1, 2 and 2, 3 for version 0: held.
  BOOST_TEST(ok(t.rows(0, 0, {1, 2}, {1, 2, 3, 4, 5, 6, 7, 8})));
  BOOST_TEST(ok(t.rows(1, 0, {2, 3}, {-1, -1, -1, -1, 2, 2, 2, 2})));
  BOOST_TEST(max_difference(t.row(2), r2) == 0.0);
  BOOST_TEST(ok(t.dense(0, 0))); // aggregated: still nothing applied
  BOOST_TEST(max_difference(t.row(1), r1) == 0.0);
  // A second row push of a worker already in the update is stale (as its
  // second dense push would be); its first rows stay.
  auto again = t.rows(0, 0, {1}, {9, 9, 9, 9});
  BOOST_TEST((again && again->stale));
  auto applied = t.dense(1, 0); // the update of version 0
  BOOST_REQUIRE(ok(applied));
  BOOST_TEST(applied->version == 1);
  // Each row steps once on its gradients summed over the update's pushes
  // over 2.
  BOOST_TEST(max_difference(t.row(1), adagrad_step(r1, {0.5f, 1, 1.5f, 2}))
             < 1e-6);
  BOOST_TEST(max_difference(t.row(2), adagrad_step(r2, {2, 2.5f, 3, 3.5f}))
             < 1e-6);
  BOOST_TEST(max_difference(t.row(3), adagrad_step(r3, {1, 1, 1, 1})) < 1e-6);
  // Worker 2, late for version 0: its rows and its push are stale.
  auto after = t.row(1);
  auto late = t.rows(2, 0, {1}, {9, 9, 9, 9});
  BOOST_TEST((late && late->stale));
  auto late_dense = t.dense(2, 0);
  BOOST_TEST((late_dense && late_dense->stale));
  BOOST_TEST(max_difference(t.row(1), after) == 0.0);
  // Worker 2's rows for version 1 arrive in time, but the update is made
  // of workers 0 and 1's pushes: its rows go with its stale push.
  BOOST_TEST(ok(t.rows(2, 1, {1}, {9, 9, 9, 9})));
  BOOST_TEST(ok(t.dense(0, 1)));
  BOOST_TEST(ok(t.dense(1, 1)));
  auto dropped = t.dense(2, 1);
  BOOST_TEST((dropped && dropped->stale));
  BOOST_TEST(max_difference(t.row(1), after) == 0.0);
  // A version not reached yet, an unknown worker: refused.
  auto early = t.rows(0, 7, {1}, {1, 1, 1, 1});
  BOOST_TEST(!early);
  BOOST_TEST((!early && early.error() == errc::invalid_argument));
  auto stranger = t.rows(9, 2, {1}, {1, 1, 1, 1});
  BOOST_TEST((!stranger && stranger.error() == errc::invalid_argument));
  auto outside = t.rows(0, 2, {vocabulary}, {1, 1, 1, 1});
  BOOST_TEST((!outside && outside.error() == errc::invalid_argument));
}

} // namespace

BOOST_AUTO_TEST_SUITE(sparse_rows)

BOOST_AUTO_TEST_CASE(three_shards_update_as_the_dense_table_in_one_process) {
  matches_dense_adagrad(false);
}

BOOST_AUTO_TEST_CASE(three_shards_update_as_the_dense_table_over_the_wire) {
  matches_dense_adagrad(true);
}

BOOST_AUTO_TEST_CASE(sync_rows_go_with_their_dense_push_in_one_process) {
  sync_rows_go_with_their_dense_push(false);
}

BOOST_AUTO_TEST_CASE(sync_rows_go_with_their_dense_push_over_the_wire) {
  sync_rows_go_with_their_dense_push(true);
}

BOOST_AUTO_TEST_CASE(a_pull_answers_exactly_the_rows_it_names_in_order) {
  spread_table t{true};
  // Shard 1's rows in a shuffled order, and one of them alone.
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < vocabulary; ++id)
    if (shard_of_row(id, shards) == 1)
      ids.push_back(id);
  BOOST_REQUIRE(ids.size() >= 4);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64{3});
  auto b = t.pull(1, ids);
  BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
  BOOST_REQUIRE_EQUAL(b->values->size(), ids.size() * dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto one = t.pull(1, {ids[i]});
    BOOST_REQUIRE(one);
    BOOST_REQUIRE_EQUAL(one->values->size(), size_t{dim});
    for (int j = 0; j < dim; ++j)
      BOOST_TEST((*one->values)[j] == (*b->values)[i * dim + j]);
  }
  // The wire carried the asked rows and nothing more: the shard answered
  // ids.size() x 2 rows' floats, the bytes it counts as pulled.
  auto st = t.stats(1);
  BOOST_TEST(st.pulled_bytes
             == static_cast<int64_t>(2 * ids.size() * dim * sizeof(float)));
  // An empty pull is answered with no rows.
  auto none = t.pull(1, {});
  BOOST_REQUIRE(none);
  BOOST_TEST(none->values->empty());
}

BOOST_AUTO_TEST_CASE(bad_row_requests_are_refused_and_change_nothing) {
  for (bool wire : {false, true}) {
    BOOST_TEST_CONTEXT("over the wire: " << wire) {
      spread_table t{wire};
      auto before = t.all_rows();
      auto bad_table = t.pull(0, {1}, 3);
      BOOST_REQUIRE(!bad_table);
      BOOST_TEST((bad_table.error() == errc::invalid_argument));
      BOOST_TEST(describe(bad_table.error()).find("no embedding table 3")
                   != std::string::npos,
                 describe(bad_table.error()));
      auto too_big = t.pull(0, {1, vocabulary});
      BOOST_REQUIRE(!too_big);
      BOOST_TEST((too_big.error() == errc::invalid_argument));
      BOOST_TEST(describe(too_big.error()).find(std::to_string(vocabulary))
                   != std::string::npos,
                 describe(too_big.error()));
      auto err = t.push(0, {1, 2}, std::vector<float>(dim, 1.f));
      BOOST_TEST((err == errc::wrong_size), describe(err));
      std::vector<float> g(2 * dim, 1.f);
      g[dim + 1] = std::numeric_limits<float>::quiet_NaN();
      err = t.push(0, {1, 2}, g);
      BOOST_TEST((err == errc::non_finite), describe(err));
      BOOST_TEST(describe(err).find("row 2") != std::string::npos,
                 describe(err));
      err = t.push(0, {1, vocabulary + 5}, std::vector<float>(2 * dim, 1.f));
      BOOST_TEST((err == errc::invalid_argument), describe(err));
      err = t.push(0, {1}, std::vector<float>(dim, 1.f), 2);
      BOOST_TEST((err == errc::invalid_argument), describe(err));
      BOOST_TEST(t.all_rows() == before);
      for (int32_t s = 0; s < shards; ++s)
        BOOST_TEST(t.stats(s).rows_pushed == 0);
      // Still served.
      BOOST_TEST(!t.push(0, {1}, std::vector<float>(dim, 1.f)));
    }
  }
}

BOOST_AUTO_TEST_CASE(rows_leave_and_return_in_chunks_and_peeks_make_none) {
  sparse_optimizer_config adam;
  adam.type = sparse_optimizer_config::kind::adam;
  spread_table t{false, adam};
  // Rows of shard 0, pushed twice.
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < vocabulary && ids.size() < 7; ++id)
    if (shard_of_row(id, shards) == 0)
      ids.push_back(id);
  std::vector<float> g(ids.size() * dim, 0.5f);
  BOOST_REQUIRE(!t.push(0, ids, g));
  BOOST_REQUIRE(!t.push(0, ids, g));
  caf::scoped_actor self{*t.f.sys};
  auto chunk = [&](const shard_actor& h, uint64_t first, uint64_t count) {
    row_chunk out;
    self->request(h, 5s, snapshot_atom_v, int32_t{0}, first, count)
      .receive([&](row_chunk& c) { out = std::move(c); },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return out;
  };
  auto head = chunk(t.actors[0], 0, 0);
  BOOST_TEST(head.rows == ids.size());
  BOOST_TEST(head.pushes == 2);
  BOOST_TEST(head.ids.empty());
  // A fresh shard gets them back 3 rows at a time (after a restore of its
  // dense state, which empties its tables).
  shard_options o;
  o.initial = {0.f};
  o.tables = {{small_table(), adam}};
  shard_actor copy = t.f.sys->spawn(shard_impl, o);
  shard_state_msg dense;
  dense.values = {0.f};
  self->request(copy, 5s, restore_atom_v, dense)
    .receive([](int64_t) {}, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  for (uint64_t first = 0; first < head.rows; first += 3) {
    auto c = chunk(t.actors[0], first, 3);
    BOOST_TEST(c.slots.size() == 2u); // m, v
    self->request(copy, 5s, restore_atom_v, c)
      .receive([](uint64_t) {}, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  }
  auto rows_of = [&](const shard_actor& h, bool peek) {
    row_block out;
    self->request(h, 5s, pull_atom_v, row_request{0, 0, 0, ids, peek})
      .receive([&](row_block& b) { out = std::move(b); },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return *out.values;
  };
  BOOST_TEST(rows_of(copy, true) == rows_of(t.actors[0], true));
  // Adam's state and push count came along: one more push moves both alike.
  for (auto& h : {t.actors[0], copy})
    self
      ->request(h, 5s, push_atom_v,
                row_push{0, 0, 0, -1, 0, ids,
                         std::make_shared<const std::vector<float>>(g)})
      .receive([](push_ack&) {},
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_TEST(rows_of(copy, true) == rows_of(t.actors[0], true));
  // A peek at rows nobody made reads their initial values and makes none.
  std::vector<uint64_t> unseen;
  for (uint64_t id = 0; id < vocabulary && unseen.size() < 3; ++id)
    if (shard_of_row(id, shards) == 1)
      unseen.push_back(id);
  row_block peeked;
  self
    ->request(t.actors[1], 5s, pull_atom_v, row_request{1, 0, -1, unseen, true})
    .receive([&](row_block& b) { peeked = std::move(b); },
             [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_TEST(peeked.values->size() == unseen.size() * dim);
  BOOST_TEST(t.stats(1).rows == 0);
  auto made = t.pull(1, unseen);
  BOOST_REQUIRE(made);
  BOOST_TEST(*made->values == *peeked.values);
  caf::anon_send_exit(copy, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_row_push_for_a_table_the_node_lacks_closes_its_link) {
  spread_table t{true};
  int fd = connect_to(t.server->port());
  data_frame f;
  f.op = data_frame::row_push;
  f.table = 5;
  f.count = 1000;
  BOOST_REQUIRE(::send(fd, &f, sizeof(f), 0) == sizeof(f));
  char byte;
  BOOST_TEST(::recv(fd, &byte, 1, 0) == 0); // closed by the server
  ::close(fd);
  // Too many rows for one frame: closed before anything is read.
  fd = connect_to(t.server->port());
  f.op = data_frame::row_pull;
  f.table = 0;
  f.count = max_frame_rows + 1;
  BOOST_REQUIRE(::send(fd, &f, sizeof(f), 0) == sizeof(f));
  BOOST_TEST(::recv(fd, &byte, 1, 0) == 0);
  ::close(fd);
  // The others are still served.
  auto b = t.pull(0, {0, 1});
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
}

BOOST_AUTO_TEST_CASE(a_client_drops_a_server_that_answers_rows_not_asked_for) {
  // A server of our own that answers a pull of N rows with N + 1.
  cluster_fixture f;
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a))
                == 0);
  BOOST_REQUIRE(::listen(listener, 1) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread fake([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0)
      return;
    data_frame req;
    bool read = ::recv(fd, &req, sizeof(req), MSG_WAITALL) == sizeof(req);
    // The client's first frame offers shared memory: this server says no,
    // as one on another host does.
    if (read && req.op == data_frame::shared_offer) {
      std::string boot(req.count, '\0');
      ::recv(fd, boot.data(), boot.size(), MSG_WAITALL);
      data_frame no;
      no.op = data_frame::shared_answer;
      no.id = req.id;
      std::string why = "another host";
      no.count = why.size();
      ::send(fd, &no, sizeof(no), 0);
      ::send(fd, why.data(), why.size(), 0);
      read = ::recv(fd, &req, sizeof(req), MSG_WAITALL) == sizeof(req);
    }
    if (read) {
      std::vector<uint64_t> ids(req.count);
      ::recv(fd, ids.data(), ids.size() * sizeof(uint64_t), MSG_WAITALL);
      data_frame reply;
      reply.op = data_frame::rows;
      reply.id = req.id;
      reply.shard = req.shard;
      reply.count = (req.count + 1) * dim;
      std::vector<float> values(reply.count, 1.f);
      ::send(fd, &reply, sizeof(reply), 0);
      ::send(fd, values.data(), values.size() * sizeof(float), 0);
    }
    char byte;
    ::recv(fd, &byte, 1, 0); // until the client closes
    ::close(fd);
  });
  auto client = data_client::open(*f.sys, "127.0.0.1", ntohs(a.sin_port), 5s);
  auto stub = client->stub(0, 1, {dim});
  caf::scoped_actor self{*f.sys};
  caf::error err;
  self->request(stub, 5s, pull_atom_v, row_request{0, 0, 0, {4, 9}})
    .receive([](row_block&) {}, [&](caf::error& e) { err = std::move(e); });
  BOOST_TEST((err == errc::node_unreachable), describe(err));
  BOOST_TEST(describe(err).find("which asked for 8") != std::string::npos,
             describe(err));
  BOOST_TEST(client->failed());
  client->close();
  fake.join();
  ::close(listener);
}

BOOST_AUTO_TEST_SUITE_END()

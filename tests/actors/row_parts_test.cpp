// Several tables' rows in one message (row_requests, row_pushes), as a
// worker whose model has several tables asks each shard once a step: in
// one process and through the data plane on 127.0.0.1. The parts answer
// and update exactly as the same requests sent one table at a time; one
// bad part refuses them all and changes nothing; a frame whose parts do
// not add up closes its own connection and no other.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/served_shard.hpp"
#include "actors/shard.hpp"
#include "fixture.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

constexpr uint64_t vocabulary = 50;
const std::vector<int> dims = {4, 2}; ///< tables "user" and "item"

/// One shard holding two tables, asked directly or (when `wire`) through
/// a data_server and a client's stub.
struct two_tables {
  cluster_fixture f;
  shard_actor shard;
  shard_data_actor handle;
  std::shared_ptr<data_server> server;
  std::shared_ptr<data_client> client;

  explicit two_tables(bool wire) {
    shard_options o;
    o.initial = {0.f};
    sparse_optimizer_config opt;
    opt.type = sparse_optimizer_config::kind::adagrad;
    opt.learning_rate = 0.1;
    for (size_t t = 0; t < dims.size(); ++t) {
      embedding_table_config c;
      c.name = t == 0 ? "user" : "item";
      c.vocabulary = vocabulary;
      c.dim = dims[t];
      c.seed = 3 + t;
      o.tables.push_back({c, opt});
    }
    shard = f.sys->spawn(shard_impl, o);
    handle = shard;
    if (!wire)
      return;
    auto s = data_server::start(*f.sys, "127.0.0.1", 0);
    BOOST_REQUIRE_MESSAGE(s, troupe::test::why(s));
    server = *s;
    server->serve(0, shard, 1, dims);
    client = data_client::open(*f.sys, "127.0.0.1", server->port(), 5s);
    handle = client->stub(0, 1, dims);
  }
  ~two_tables() {
    if (client)
      client->close();
    if (server)
      server->stop();
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }

  caf::expected<row_blocks> pull(row_requests r) {
    caf::scoped_actor self{*f.sys};
    caf::expected<row_blocks> out{caf::sec::none};
    self->request(handle, 5s, pull_atom_v, std::move(r))
      .receive([&](row_blocks& b) { out = std::move(b); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  caf::error push(row_pushes p) {
    caf::scoped_actor self{*f.sys};
    caf::error out;
    self->request(handle, 5s, push_atom_v, std::move(p))
      .receive([](push_ack&) {}, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  /// Table `t`'s rows `ids`, asked of the shard alone (no stub between).
  std::vector<float> rows(int32_t t, std::vector<uint64_t> ids) {
    caf::scoped_actor self{*f.sys};
    std::vector<float> out;
    self->request(shard, 5s, pull_atom_v, row_request{0, t, 0, std::move(ids)})
      .receive([&](row_block& b) { out = *b.values; },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return out;
  }

  void push_one(int32_t t, std::vector<uint64_t> ids, std::vector<float> g) {
    caf::scoped_actor self{*f.sys};
    self
      ->request(
        shard, 5s, push_atom_v,
        row_push{0, t, 0, -1, 0, std::move(ids),
                 std::make_shared<const std::vector<float>>(std::move(g))})
      .receive([](push_ack&) {},
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
  }
};

row_push part(int32_t table, std::vector<uint64_t> ids, float g) {
  auto n = ids.size() * static_cast<size_t>(dims[static_cast<size_t>(table)]);
  return {0,
          table,
          0,
          -1,
          0,
          std::move(ids),
          std::make_shared<const std::vector<float>>(n, g)};
}

const std::vector<uint64_t> users = {7, 3, 41};
const std::vector<uint64_t> items = {3, 9};

/// Pulls and pushes both tables in one message each, and checks them
/// against a twin shard asked one table at a time.
void parts_answer_as_single_requests(bool wire) {
  two_tables t{wire}, twin{false};
  auto got = t.pull({{{0, 0, 0, users}, {0, 1, 0, items}}});
  BOOST_REQUIRE_MESSAGE(got, troupe::test::why(got));
  BOOST_REQUIRE_EQUAL(got->parts.size(), 2u);
  BOOST_TEST(got->parts[0].table == 0);
  BOOST_TEST(got->parts[1].table == 1);
  BOOST_TEST(*got->parts[0].values == twin.rows(0, users));
  BOOST_TEST(*got->parts[1].values == twin.rows(1, items));
  auto err = t.push({{part(0, users, 0.5f), part(1, items, -1.f)}});
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  twin.push_one(0, users, std::vector<float>(users.size() * 4, 0.5f));
  twin.push_one(1, items, std::vector<float>(items.size() * 2, -1.f));
  BOOST_TEST(t.rows(0, users) == twin.rows(0, users));
  BOOST_TEST(t.rows(1, items) == twin.rows(1, items));
  BOOST_TEST(t.rows(0, users) != two_tables{false}.rows(0, users));
}

/// A bad part anywhere refuses the whole message, and no part is applied.
void a_bad_part_changes_nothing(bool wire) {
  two_tables t{wire};
  auto before_users = t.rows(0, users);
  auto before_items = t.rows(1, items);
  // Past the vocabulary, in the second part.
  auto err = t.push({{part(0, users, 1.f), part(1, {vocabulary}, 1.f)}});
  BOOST_TEST((err == errc::invalid_argument), describe(err));
  // A gradient of the wrong size (refused by the stub before it leaves).
  auto short_grads = part(1, items, 1.f);
  short_grads.grads = std::make_shared<const std::vector<float>>(1, 1.f);
  err = t.push({{part(0, users, 1.f), short_grads}});
  BOOST_TEST((err == errc::wrong_size), describe(err));
  // A table the shard does not have.
  err = t.push({{part(0, users, 1.f), part(1, items, 1.f)}});
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  before_users = t.rows(0, users);
  before_items = t.rows(1, items);
  auto unknown = part(0, users, 1.f);
  unknown.table = 2;
  err = t.push({{part(1, items, 1.f), unknown}});
  BOOST_TEST((err == errc::invalid_argument), describe(err));
  BOOST_TEST(describe(err).find("embedding table 2") != std::string::npos,
             describe(err));
  BOOST_TEST(t.rows(0, users) == before_users);
  BOOST_TEST(t.rows(1, items) == before_items);
  auto pulled = t.pull({{{0, 0, 0, users}, {0, 1, 0, {vocabulary + 1}}}});
  BOOST_REQUIRE(!pulled);
  BOOST_TEST((pulled.error() == errc::invalid_argument),
             describe(pulled.error()));
}

/// Sends a frame of header `f` and payload `words` on a connection of its
/// own; whether the server closed it (rather than answering).
bool closes(uint16_t port, data_frame f, std::vector<uint64_t> words) {
  int fd = connect_to(port);
  f.id = 1;
  f.count = words.size();
  std::string bytes(reinterpret_cast<const char*>(&f), sizeof(f));
  bytes.append(reinterpret_cast<const char*>(words.data()),
               words.size() * sizeof(uint64_t));
  BOOST_REQUIRE(::send(fd, bytes.data(), bytes.size(), 0)
                == static_cast<ssize_t>(bytes.size()));
  char byte;
  bool closed = ::recv(fd, &byte, 1, 0) == 0;
  ::close(fd);
  return closed;
}

} // namespace

BOOST_AUTO_TEST_SUITE(row_parts)

BOOST_AUTO_TEST_CASE(parts_answer_as_single_requests_in_one_process) {
  parts_answer_as_single_requests(false);
}

BOOST_AUTO_TEST_CASE(parts_answer_as_single_requests_on_the_data_plane) {
  parts_answer_as_single_requests(true);
}

BOOST_AUTO_TEST_CASE(a_bad_part_changes_nothing_in_one_process) {
  a_bad_part_changes_nothing(false);
}

BOOST_AUTO_TEST_CASE(a_bad_part_changes_nothing_on_the_data_plane) {
  a_bad_part_changes_nothing(true);
}

BOOST_AUTO_TEST_CASE(a_frame_whose_parts_do_not_add_up_closes_its_link) {
  two_tables t{true};
  auto port = t.server->port();
  data_frame f;
  f.op = data_frame::row_pulls;
  f.table = 2;
  // Part 1 announces 5 ids where 1 follows.
  BOOST_TEST(closes(port, f, {0, 1, 1, 5, 7, 3}));
  // Ids left over after the parts'.
  BOOST_TEST(closes(port, f, {0, 1, 1, 1, 7, 3, 4}));
  // A push to a table the node lacks: its floats cannot be sized.
  f.op = data_frame::row_pushes;
  f.table = 1;
  BOOST_TEST(closes(port, f, {9, 1, 7}));
  // No parts, or too few uint64s for their pairs: refused by the header.
  f.table = 0;
  BOOST_TEST(check_frame(f, true).find("0 parts") != std::string::npos,
             check_frame(f, true));
  f.table = 3;
  f.count = 5;
  BOOST_TEST(check_frame(f, true).find("3 parts in 5") != std::string::npos,
             check_frame(f, true));
  // The others are still served.
  auto got = t.pull({{{0, 0, 0, users}, {0, 1, 0, items}}});
  BOOST_TEST(static_cast<bool>(got), troupe::test::why(got));
}

BOOST_AUTO_TEST_SUITE_END()

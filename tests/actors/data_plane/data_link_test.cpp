// The data plane's connection on 127.0.0.1, inside one process: a stub
// pulls and pushes through a data_server to a real shard, errors come back
// with their code, a malformed frame closes only its own connection, and a
// lost server fails the stub's requests instead of leaving them open.
#include "actors/data_plane/data_link.hpp"

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "actors/net/remote.hpp"
#include "actors/shard.hpp"
#include "actors/fixture.hpp"
#include "actors/served_shard.hpp"
#include "test_util.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

struct served_shard {
  cluster_fixture f;
  shard_actor shard;
  std::shared_ptr<data_server> server;

  served_shard() {
    shard_options o;
    o.block.optimizer.learning_rate = 1.0;
    o.initial = {1.f, 2.f, 3.f};
    shard = spawn_joined_shard(*f.sys, o);
    server = serve_on_data_plane(*f.sys, shard, 3);
  }
  ~served_shard() {
    server->stop();
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
};

/// The reply to a pull through `h`: values, or the error.
caf::expected<float_block> pull(caf::scoped_actor& self,
                                const shard_data_actor& h) {
  caf::expected<float_block> out{caf::sec::none};
  self->request(h, 5s, pull_atom_v, int32_t{0}, int64_t{0})
    .receive([&](float_block& b) { out = std::move(b); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

caf::error push(caf::scoped_actor& self, const shard_data_actor& h,
                std::vector<float> g) {
  caf::error out;
  self->request(h, 5s, push_atom_v, gradient_push::of(0, 0, 0, std::move(g)))
    .receive([](push_ack&) {}, [&](caf::error& e) { out = std::move(e); });
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_link)

BOOST_AUTO_TEST_CASE(a_stub_times_out_what_its_shard_leaves_unanswered) {
  cluster_fixture f;
  auto silent = f.sys->spawn(silent_shard);
  auto started = data_server::start(*f.sys, "127.0.0.1", 0);
  BOOST_REQUIRE_MESSAGE(started, troupe::test::why(started));
  auto server = *started;
  server->serve(0, silent, 3);
  auto client = data_client::open(*f.sys, "127.0.0.1", server->port(), 300ms);
  auto stub = client->stub(0, 3);
  // A worker asks a stub without a timeout of its own, a shard with one.
  BOOST_TEST(times_out_itself(stub));
  BOOST_TEST(!times_out_itself(silent));
  caf::scoped_actor self{*f.sys};
  auto began = std::chrono::steady_clock::now();
  caf::error err;
  // (10 s of the test's own, so that a stub that did not would fail the
  // test rather than hang it.)
  self->request(stub, 10s, pull_atom_v, int32_t{0}, int64_t{0})
    .receive([](float_block&) { BOOST_FAIL("the silent shard answered"); },
             [&](caf::error& e) { err = std::move(e); });
  auto waited = std::chrono::steady_clock::now() - began;
  BOOST_TEST((err == caf::sec::request_timeout), describe(err));
  BOOST_TEST((waited >= 300ms && waited < 5s));
  // A request answered in time is not failed later.
  served_shard s;
  auto answering = data_client::open(*s.f.sys, "127.0.0.1", s.server->port(),
                                     300ms);
  auto good = answering->stub(0, 3);
  caf::scoped_actor asker{*s.f.sys};
  BOOST_TEST(static_cast<bool>(pull(asker, good)));
  std::this_thread::sleep_for(400ms);
  BOOST_TEST(static_cast<bool>(pull(asker, good)));
  answering->close();
  client->close();
  server->stop();
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_stub_pulls_and_pushes_through_the_data_plane) {
  served_shard s;
  auto client = data_client::open(*s.f.sys, "127.0.0.1", s.server->port(), 5s);
  auto stub = client->stub(0, 3);
  caf::scoped_actor self{*s.f.sys};
  auto b = pull(self, stub);
  BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
  BOOST_TEST(*b->values == (std::vector<float>{1.f, 2.f, 3.f}));
  BOOST_TEST(b->version == 0);
  BOOST_TEST(client->connected());
  BOOST_TEST(!push(self, stub, {1.f, 1.f, 1.f}));
  b = pull(self, stub);
  BOOST_REQUIRE(b);
  BOOST_TEST(*b->values == (std::vector<float>{0.f, 1.f, 2.f}));
  BOOST_TEST(b->version == 1);
  // The shard's refusals come back with their code and text.
  auto err = push(self, stub, {1.f, 1.f});
  BOOST_TEST((err == errc::wrong_size), describe(err));
  auto other = client->stub(7, 3);
  auto missing = pull(self, other);
  BOOST_REQUIRE(!missing);
  BOOST_TEST((missing.error() == errc::invalid_argument));
  BOOST_TEST(describe(missing.error()).find("no shard 7 on this node")
               != std::string::npos,
             describe(missing.error()));
  client->close();
}

BOOST_AUTO_TEST_CASE(a_malformed_frame_closes_only_its_own_connection) {
  served_shard s;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(s.server->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  // A header that announces 2^40 floats: refused before any allocation.
  data_frame bad;
  bad.op = data_frame::push;
  bad.id = 1;
  bad.count = uint64_t{1} << 40;
  BOOST_REQUIRE(::send(fd, &bad, sizeof(bad), 0) == sizeof(bad));
  char byte;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  BOOST_TEST(::recv(fd, &byte, 1, 0) == 0); // closed by the server
  ::close(fd);
  // A push of more floats than the shard holds: closed before the server
  // allocates for it.
  fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  bad.count = 1000000;
  BOOST_REQUIRE(::send(fd, &bad, sizeof(bad), 0) == sizeof(bad));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  BOOST_TEST(::recv(fd, &byte, 1, 0) == 0);
  ::close(fd);
  // Garbage: closed too.
  fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  std::string junk(100, 'x');
  BOOST_REQUIRE(::send(fd, junk.data(), junk.size(), 0) == 100);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  BOOST_TEST(::recv(fd, &byte, 1, 0) == 0);
  ::close(fd);
  // Everybody else is still served.
  auto client = data_client::open(*s.f.sys, "127.0.0.1", s.server->port(), 5s);
  caf::scoped_actor self{*s.f.sys};
  auto b = pull(self, client->stub(0, 3));
  BOOST_TEST(static_cast<bool>(b));
  client->close();
}

BOOST_AUTO_TEST_CASE(a_lost_server_fails_the_stubs_requests) {
  served_shard s;
  auto client = data_client::open(*s.f.sys, "127.0.0.1", s.server->port(), 5s);
  auto stub = client->stub(0, 3);
  caf::scoped_actor self{*s.f.sys};
  BOOST_REQUIRE(pull(self, stub));
  s.server->stop();
  caf::expected<float_block> b = float_block{};
  for (int i = 0; i < 50 && b; ++i) { // until the stub has seen the close
    b = pull(self, stub);
    std::this_thread::sleep_for(20ms);
  }
  BOOST_REQUIRE(!b);
  BOOST_TEST((b.error() == errc::node_unreachable), describe(b.error()));
  client->close();
  // Nothing listens: the first request fails, naming the address.
  uint16_t port = 0;
  {
    auto gone = data_server::start(*s.f.sys, "127.0.0.1", 0);
    BOOST_REQUIRE(gone);
    port = (*gone)->port();
  }
  auto nowhere = data_client::open(*s.f.sys, "127.0.0.1", port, 2s);
  auto missing = pull(self, nowhere->stub(0, 3));
  BOOST_REQUIRE(!missing);
  BOOST_TEST(describe(missing.error()).find("127.0.0.1:" + std::to_string(port))
               != std::string::npos,
             describe(missing.error()));
  nowhere->close();
}

BOOST_AUTO_TEST_CASE(peers_that_do_not_read_hold_up_nobody_else) {
  // Two peers send up to 200000 pulls each and never read a reply: the
  // replies back up in their sockets. The actors that write small replies
  // must not wait for those sockets (the process has two scheduler
  // threads, and two such waits would stop every actor), and the server
  // must stop reading such a peer rather than queue all its requests at
  // the shard; a third client is served at once.
  served_shard s;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(s.server->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<data_frame> pulls(200000);
  for (size_t i = 0; i < pulls.size(); ++i) {
    pulls[i].op = data_frame::pull;
    pulls[i].id = i + 1;
  }
  int silent[2];
  for (auto& fd : silent) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a))
                  == 0);
    // As much as the sockets take: the server stops reading a peer with
    // too many requests open, so a blocking send would wait forever.
    auto bytes = pulls.size() * sizeof(data_frame);
    auto* p = reinterpret_cast<const char*>(pulls.data());
    for (size_t sent = 0; sent < bytes;) {
      auto n = ::send(fd, p + sent, bytes - sent, MSG_DONTWAIT);
      if (n <= 0)
        break;
      sent += static_cast<size_t>(n);
    }
  }
  std::this_thread::sleep_for(500ms); // their replies fill their sockets
  auto client = data_client::open(*s.f.sys, "127.0.0.1", s.server->port(), 5s);
  caf::scoped_actor self{*s.f.sys};
  auto b = pull(self, client->stub(0, 3));
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
  client->close();
  for (auto fd : silent)
    ::close(fd);
}

BOOST_AUTO_TEST_CASE(a_host_that_is_not_this_machines_is_named_in_the_error) {
  // Binding sends nothing: 192.0.2.1 (TEST-NET-1) is no address of a test
  // machine, so the bind fails at once.
  cluster_fixture f;
  secure_links(*f.sys, nullptr, true); // --insecure: plaintext may go there
  auto s = data_server::start(*f.sys, "192.0.2.1", 0);
  BOOST_REQUIRE(!s);
  BOOST_TEST((s.error() == errc::invalid_config)); // bad input: exit 2
  BOOST_TEST(describe(s.error()).find("cannot listen for the data plane on "
                                      "192.0.2.1: ")
               != std::string::npos,
             describe(s.error()));
}

BOOST_AUTO_TEST_CASE(
  with_no_key_and_no_tls_only_loopback_addresses_are_served) {
  cluster_fixture f;
  for (auto host : {"0.0.0.0", "192.0.2.1", "cluster-head"}) {
    auto s = data_server::start(*f.sys, host, 0);
    BOOST_REQUIRE(!s);
    BOOST_TEST((s.error() == errc::invalid_config));
    BOOST_TEST(describe(s.error()).find(std::string{"on "} + host
                                        + " with no key and no TLS")
                 != std::string::npos,
               describe(s.error()));
  }
  auto local = data_server::start(*f.sys, "localhost", 0);
  BOOST_TEST(static_cast<bool>(local), troupe::test::why(local));
}

BOOST_AUTO_TEST_CASE(check_frame_names_what_is_wrong) {
  data_frame f;
  f.op = data_frame::pull;
  f.id = 1;
  BOOST_TEST(check_frame(f, true).empty());
  BOOST_TEST(!check_frame(f, false).empty()); // a request sent to a client
  // A request's id becomes a CAF request id on the server: 1 to 2^60 - 1.
  f.id = 0;
  BOOST_TEST(check_frame(f, true).find("request id 0") != std::string::npos);
  f.id = uint64_t{1} << 60;
  BOOST_TEST(check_frame(f, true).find("request id") != std::string::npos);
  f.id = (uint64_t{1} << 60) - 1;
  BOOST_TEST(check_frame(f, true).empty());
  f.magic = 0;
  BOOST_TEST(check_frame(f, true).find("bad magic") != std::string::npos);
  f.magic = data_frame::magic_value;
  f.op = data_frame::values;
  f.count = max_frame_floats + 1;
  BOOST_TEST(check_frame(f, false).find("floats") != std::string::npos);
  f.op = data_frame::ack;
  f.count = 3;
  BOOST_TEST(!check_frame(f, false).empty());
  f.op = 99;
  f.count = 0;
  BOOST_TEST(check_frame(f, true).find("unexpected operation 99")
             != std::string::npos);
  // An offer of shared memory goes to a server, its answer to a client,
  // each with at most a few hundred bytes of text.
  f.op = data_frame::shared_offer;
  f.count = 36;
  BOOST_TEST(check_frame(f, true).empty());
  BOOST_TEST(!check_frame(f, false).empty());
  f.count = max_shared_text + 1;
  BOOST_TEST(check_frame(f, true).find("shared-memory") != std::string::npos);
  f.op = data_frame::shared_answer;
  f.count = 80;
  BOOST_TEST(check_frame(f, false).empty());
  BOOST_TEST(!check_frame(f, true).empty());
}

BOOST_AUTO_TEST_SUITE_END()

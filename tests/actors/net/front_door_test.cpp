// troupe's front door inside one test process: the cluster key's file
// (made whole, private, refused when it is not), the key handshake
// (mutual, another key named, a replay refused), the BASP check (the
// headers that crash CAF 0.17 refused, chunking irrelevant), and CAF's
// remoting and the data plane behind the key between actor systems: a
// stranger's bytes, a wrong key and, after a valid proof, a malformed BASP
// header each close only their own connection.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <thread>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/net/basp_check.hpp"
#include "actors/net/cluster_key.hpp"
#include "actors/data_plane/data_link.hpp"
#include "actors/protocol/float_wire.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "actors/net/key_handshake.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/net/remote.hpp"
#include "actors/shard.hpp"
#include "actors/net/sockets.hpp"
#include "actors/protocol/system_config.hpp"
#include "runtime/base/errc.hpp"
#include "actors/fixture.hpp"
#include "actors/served_shard.hpp"
#include "raw_peer.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

cluster_key make_key(const temp_dir& dir, const std::string& name) {
  bool made = false;
  auto key = load_or_make_key(dir.file(name), made);
  BOOST_REQUIRE_MESSAGE(key, troupe::test::why(key));
  return *key;
}

std::string key_error(const std::string& path) {
  auto key = load_key(path);
  BOOST_REQUIRE(!key);
  BOOST_TEST((key.error() == errc::unauthorized));
  return describe(key.error());
}

/// Runs client and server exchanges against each other; the first
/// failure's text, or "" when both are done.
std::string run_exchange(key_exchange& client, key_exchange& server) {
  for (int round = 0; round < 8; ++round) {
    for (auto pair :
         {std::make_pair(&client, &server), std::make_pair(&server, &client)}) {
      auto& out = pair.first->to_send();
      std::vector<uint8_t> bytes(out.begin(), out.end());
      out.clear();
      auto* to = pair.second;
      size_t at = 0;
      while (at < bytes.size() && to->wants() > 0) {
        auto n = to->wants();
        if (bytes.size() - at < n)
          return "short: " + std::to_string(bytes.size() - at);
        if (auto why = to->take(bytes.data() + at); !why.empty())
          return why;
        at += n;
      }
    }
    if (client.done() && server.done())
      return {};
  }
  return "did not finish";
}

std::array<uint8_t, 32> fixed_nonce(uint8_t x) {
  std::array<uint8_t, 32> n{};
  n.fill(x);
  return n;
}

std::string feed(basp_check& c, const std::vector<uint8_t>& bytes) {
  return c.feed(bytes.data(), bytes.size());
}

/// A shard of 3 floats published for BASP and served on the data plane
/// of a system whose links prove `key`.
struct keyed_shard {
  net_system f;
  shard_actor shard;
  std::shared_ptr<data_server> server;
  uint16_t port = 0;

  explicit keyed_shard(const cluster_key& key) {
    guard_links(*f.sys, make_key_guard(key), false);
    shard_options o;
    o.initial = {0.f, 1.f, 2.f};
    shard = spawn_joined_shard(*f.sys, o);
    server = serve_on_data_plane(*f.sys, shard, 3);
    auto p = publish_on(*f.sys, shard, "127.0.0.1", 0);
    BOOST_REQUIRE_MESSAGE(p, troupe::test::why(p));
    port = *p;
  }
  ~keyed_shard() {
    server->stop();
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
};

/// A stranger's connection to 127.0.0.1:port.
int stranger_at(uint16_t port) {
  int fd = troupe::test::raw_connect(port);
  BOOST_REQUIRE_MESSAGE(fd >= 0, "cannot connect to port " << port);
  return fd;
}

/// Proves `key` on raw socket `fd` as a member would; false on failure.
bool prove(int fd, const cluster_key& key) {
  key_handshake h{key, key_exchange::role::client, fd};
  set_nonblocking(fd, true);
  short events = 0;
  std::string why;
  auto end = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    auto r = h.step(events, why);
    if (r != 0) {
      set_nonblocking(fd, false);
      BOOST_TEST_MESSAGE("proof: " << (r > 0 ? "done" : why));
      return r > 0;
    }
    if (std::chrono::steady_clock::now() > end)
      return false;
    pollfd p{fd, events, 0};
    ::poll(&p, 1, 100);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(front_door)

BOOST_AUTO_TEST_CASE(
  the_first_node_makes_a_private_key_that_every_later_process_reads) {
  temp_dir dir;
  auto path = dir.file("a/b/troupe/cluster.key");
  bool made = false;
  auto key = load_or_make_key(path, made);
  BOOST_REQUIRE_MESSAGE(key, troupe::test::why(key));
  BOOST_TEST(made);
  struct stat st {};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  BOOST_REQUIRE(::stat(dir.file("a/b/troupe").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST(st.st_size == 65); // 64 hex digits and a newline
  auto again = load_or_make_key(path, made);
  BOOST_REQUIRE(again);
  BOOST_TEST(!made);
  BOOST_TEST(again->id() == key->id());
  BOOST_TEST(again->secret() == key->secret());
  // Processes racing to make it end up with one key.
  auto raced = dir.file("race/cluster.key");
  std::vector<pid_t> kids;
  for (int i = 0; i < 6; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      bool m = false;
      auto k = load_or_make_key(raced, m);
      ::_exit(k ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (auto pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  auto k1 = load_key(raced);
  BOOST_REQUIRE_MESSAGE(k1, troupe::test::why(k1));
  // No temporary file is left beside it.
  BOOST_TEST(
    std::system(("test $(ls " + dir.file("race") + " | wc -l) = 1").c_str())
    == 0);
}

BOOST_AUTO_TEST_CASE(a_key_file_that_is_missing_open_or_malformed_is_named) {
  temp_dir dir;
  auto missing = dir.file("none/cluster.key");
  auto why = key_error(missing);
  BOOST_TEST(contains(why, "cluster key " + missing + ": no such file"), why);
  BOOST_TEST(contains(why, "scp FIRST-HOST:" + missing), why);
  BOOST_TEST(contains(why, "--key FILE"), why);
  auto open = dir.file("open.key");
  troupe::test::write_file(open, std::string(64, 'a') + "\n");
  ::chmod(open.c_str(), 0644);
  why = key_error(open);
  BOOST_TEST(contains(why, "group or others may read it (mode 0644): chmod "
                           "600 "
                             + open),
             why);
  for (auto text : {std::string(63, 'a'), std::string(64, 'g'),
                    std::string(65, 'a'), std::string{}}) {
    auto bad = dir.file("bad.key");
    ::unlink(bad.c_str());
    troupe::test::write_file(bad, text);
    ::chmod(bad.c_str(), 0600);
    why = key_error(bad);
    BOOST_TEST(contains(why, "expected 64 hex digits"), why);
  }
  why = key_error(dir.path());
  BOOST_TEST(contains(why, "not a regular file"), why);
}

BOOST_AUTO_TEST_CASE(
  the_handshake_proves_the_key_both_ways_and_names_another_key) {
  temp_dir dir;
  auto key = make_key(dir, "k1");
  auto other = make_key(dir, "k2");
  BOOST_TEST(key.id() != other.id());
  {
    key_exchange c{key, key_exchange::role::client, fixed_nonce(1)};
    key_exchange s{key, key_exchange::role::server, fixed_nonce(2)};
    BOOST_TEST(run_exchange(c, s) == "");
    BOOST_TEST(c.done());
    BOOST_TEST(s.done());
  }
  {
    // The client refuses a server with another key before it proves
    // anything, and names both ids.
    key_exchange c{other, key_exchange::role::client, fixed_nonce(1)};
    key_exchange s{key, key_exchange::role::server, fixed_nonce(2)};
    auto why = run_exchange(c, s);
    BOOST_TEST(contains(why, "another cluster key (id " + key.id() + ")"), why);
    BOOST_TEST(contains(why, other.path()), why);
    BOOST_TEST(!s.done());
  }
  {
    // A recorded client's hello and proof, replayed to a server with a
    // fresh nonce: refused.
    key_exchange c{key, key_exchange::role::client, fixed_nonce(1)};
    key_exchange s{key, key_exchange::role::server, fixed_nonce(2)};
    auto hello = c.to_send();
    c.to_send().clear();
    BOOST_REQUIRE(s.take(hello.data()).empty());
    BOOST_REQUIRE(s.take(hello.data() + 8).empty());
    BOOST_REQUIRE(c.take(s.to_send().data()).empty());
    auto proof = c.to_send();
    BOOST_REQUIRE(proof.size() == key_exchange::mac_size);
    BOOST_REQUIRE(s.take(proof.data()).empty());
    BOOST_TEST(s.done());
    key_exchange s2{key, key_exchange::role::server, fixed_nonce(3)};
    BOOST_REQUIRE(s2.take(hello.data()).empty());
    BOOST_REQUIRE(s2.take(hello.data() + 8).empty());
    auto why = s2.take(proof.data());
    BOOST_TEST(contains(why, "wrong key proof"), why);
    BOOST_TEST(!s2.done());
  }
  {
    // Bytes of another protocol are named at the first 8.
    key_exchange s{key, key_exchange::role::server, fixed_nonce(2)};
    auto h = basp_header(1, 0);
    auto why = s.take(h.data());
    BOOST_TEST(contains(why, "plaintext CAF (BASP)"), why);
    key_exchange t{key, key_exchange::role::server, fixed_nonce(2)};
    uint8_t tls[8] = {0x16, 3, 1, 0, 0xc8, 1, 0, 0};
    why = t.take(tls);
    BOOST_TEST(contains(why, "TLS client"), why);
  }
}

BOOST_AUTO_TEST_CASE(the_basp_check_refuses_the_headers_that_crash_caf) {
  using side = basp_check::side;
  // A client's handshake with a payload, then heartbeats and a message:
  // passes, fed whole or a byte at a time.
  std::vector<uint8_t> good = basp_header(1, 10);
  good.resize(good.size() + 10, 0xab);
  auto hb = basp_header(6, 0);
  good.insert(good.end(), hb.begin(), hb.end());
  auto msg = basp_header(2, 5, 7, 1, 2);
  good.insert(good.end(), msg.begin(), msg.end());
  good.resize(good.size() + 5, 0xcd);
  {
    basp_check c{side::accepted};
    BOOST_TEST(feed(c, good) == "");
    BOOST_TEST(c.messages() == 3u);
    basp_check d{side::accepted};
    for (auto b : good)
      BOOST_REQUIRE(d.feed(&b, 1).empty());
    BOOST_TEST(d.messages() == 3u);
  }
  struct bad_case {
    std::vector<uint8_t> bytes;
    side s;
    const char* why;
  };
  std::vector<bad_case> bad = {
    {basp_header(1, 0), side::accepted, "fields do not fit"}, // the crash
    {basp_header(0, 0, 3), side::connected, "fields do not fit"},
    {basp_header(1, 0xffffffffu), side::accepted, "over the bound"},
    {basp_header(9, 4), side::accepted, "is not BASP's"},
    {basp_header(6, 0), side::accepted, "first message must be"},
    {basp_header(0, 8, 3), side::accepted, "first message must be"},
    {basp_header(1, 8), side::connected, "first message must be"},
  };
  auto padded = basp_header(1, 4);
  padded[1] = 1;
  bad.push_back({padded, side::accepted, "padding"});
  auto flagged = basp_header(1, 4);
  flagged[3] = 0x80;
  bad.push_back({flagged, side::accepted, "unknown flags"});
  // A second server handshake on a connection we made.
  auto twice = basp_header(0, 2, 3);
  twice.resize(34, 0);
  auto again = basp_header(0, 2, 3);
  twice.insert(twice.end(), again.begin(), again.end());
  bad.push_back({twice, side::connected, "server handshake only"});
  // After a good handshake: a routed message with no receiver.
  auto later = basp_header(1, 2);
  later.resize(34, 0);
  auto routed = basp_header(3, 4, 0, 0, 0);
  later.insert(later.end(), routed.begin(), routed.end());
  bad.push_back({later, side::accepted, "BASP header 2"});
  for (auto& b : bad) {
    basp_check c{b.s};
    auto why = feed(c, b.bytes);
    BOOST_TEST(contains(why, b.why), why << " (wanted: " << b.why << ")");
    // Once refused, always refused.
    BOOST_TEST(!feed(c, hb).empty());
  }
}

BOOST_AUTO_TEST_CASE(
  remoting_and_the_data_plane_admit_only_holders_of_the_key) {
  temp_dir dir;
  auto key = make_key(dir, "cluster.key");
  auto other = make_key(dir, "other.key");
  keyed_shard s{key};
  // A member with the key pulls through BASP and the data plane.
  net_system member;
  guard_links(*member.sys, make_key_guard(key), false);
  auto h = connect_to<shard_actor>(*member.sys, "127.0.0.1", s.port, 5s);
  BOOST_REQUIRE_MESSAGE(h, troupe::test::why(h));
  auto b = pull_values(*member.sys, *h);
  BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
  BOOST_TEST(*b->values == (std::vector<float>{0.f, 1.f, 2.f}));
  auto client = data_client::open(*member.sys, "127.0.0.1", s.server->port(),
                                  5s);
  b = pull_values(*member.sys, client->stub(0, 3));
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
  client->close();
  // Another key: refused at once, final, both ids named.
  net_system stranger;
  guard_links(*stranger.sys, make_key_guard(other), false);
  auto refused = connect_to<shard_actor>(*stranger.sys, "127.0.0.1", s.port,
                                         5s);
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error() == errc::unauthorized));
  auto why = describe(refused.error());
  BOOST_TEST(contains(why, "another cluster key (id " + key.id()), why);
  auto dclient = data_client::open(*stranger.sys, "127.0.0.1", s.server->port(),
                                   5s);
  auto db = pull_values(*stranger.sys, dclient->stub(0, 3));
  BOOST_REQUIRE(!db);
  BOOST_TEST(contains(describe(db.error()), "key handshake failed"),
             describe(db.error()));
  dclient->close();
  // No key (plaintext CAF): closed before CAF's handshake.
  net_system plain;
  refused = connect_to<shard_actor>(*plain.sys, "127.0.0.1", s.port, 5s);
  BOOST_TEST(!refused);
  // Raw bytes: the crashing header, a 4 GiB header, junk. Each closed.
  for (auto port : {s.port, s.server->port()}) {
    for (auto bytes : {basp_header(1, 0), basp_header(2, 0xffffffffu),
                       std::vector<uint8_t>(100000, 0x41)}) {
      int fd = stranger_at(port);
      send_all(fd, bytes);
      BOOST_TEST(closed_by_peer(fd, 5), "port " << port);
      ::close(fd);
    }
  }
  // A peer that proves the key, then sends the crashing header: only its
  // connection closes.
  for (auto bytes :
       {basp_header(1, 0), basp_header(1, 0xfffffff0u), basp_header(6, 0)}) {
    int fd = stranger_at(s.port);
    BOOST_REQUIRE(prove(fd, key));
    BOOST_TEST(!closed_by_peer(fd, 0.3)); // proven: the node waits for BASP
    send_all(fd, bytes);
    BOOST_TEST(closed_by_peer(fd, 5));
    ::close(fd);
  }
  // The node serves on, over the member's connection and a new one.
  b = pull_values(*member.sys, *h);
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
  net_system again;
  guard_links(*again.sys, make_key_guard(key), false);
  auto h2 = connect_to<shard_actor>(*again.sys, "127.0.0.1", s.port, 5s);
  BOOST_REQUIRE_MESSAGE(h2, troupe::test::why(h2));
  b = pull_values(*again.sys, *h2);
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
}

BOOST_AUTO_TEST_CASE(
  a_length_field_cannot_make_a_node_allocate_more_than_was_sent) {
  // A member's message whose float, id or vector count announces far more
  // than its payload holds: refused before anything is allocated (a count
  // could ask for up to 16 GiB of floats, or make resize() throw and end
  // the node).
  caf::actor_system_config cfg;
  init_config(cfg);
  caf::actor_system sys{cfg};
  auto announcing = [&](uint64_t n, bool as_u64) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    if (as_u64)
      BOOST_REQUIRE(!sink(n));
    else {
      auto count = static_cast<size_t>(n);
      BOOST_REQUIRE(!sink.begin_sequence(count));
    }
    buf.resize(buf.size() + 16, 0); // 16 bytes follow
    return buf;
  };
  {
    auto buf = announcing(uint64_t{1} << 31, false);
    caf::binary_deserializer source{sys, buf};
    std::vector<float> v;
    BOOST_TEST(static_cast<bool>(detail::read_floats(source, v)));
    BOOST_TEST(v.capacity() == 0u);
  }
  {
    auto buf = announcing(uint64_t{1} << 31, false);
    caf::binary_deserializer source{sys, buf};
    std::shared_ptr<std::vector<float>> v;
    BOOST_TEST(static_cast<bool>(detail::read_pooled(source, v)));
    BOOST_TEST(!v);
  }
  {
    auto buf = announcing(uint64_t{1} << 30, false);
    caf::binary_deserializer source{sys, buf};
    std::vector<uint64_t> ids;
    BOOST_TEST(static_cast<bool>(detail::read_ids(source, ids)));
    BOOST_TEST(ids.capacity() == 0u);
  }
  {
    auto buf = announcing(uint64_t{1} << 60, true);
    caf::binary_deserializer source{sys, buf};
    std::vector<std::vector<float>> slots;
    BOOST_TEST(static_cast<bool>(detail::lists(source, slots)));
    BOOST_TEST(slots.capacity() == 0u);
  }
  {
    // A replica op of a kind there is none of.
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    BOOST_REQUIRE(!sink(uint8_t{std::variant_size_v<replica_op::any>}));
    caf::binary_deserializer source{sys, buf};
    replica_op op;
    BOOST_TEST(static_cast<bool>(inspect(source, op)));
  }
  {
    // What fits is read as before.
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    std::vector<float> four{1.f, 2.f, 3.f, 4.f};
    BOOST_REQUIRE(!detail::write_floats(sink, four.data(), four.size()));
    caf::binary_deserializer source{sys, buf};
    std::vector<float> back;
    BOOST_TEST(!detail::read_floats(source, back));
    BOOST_TEST(back == four);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The data plane through shared memory, inside one process: a ring far
// smaller than a frame carries frames intact both ways at once, the end of
// either side ends the other's reads and writes, a stub's pulls and pushes
// take the shared link where it is allowed and TCP where it is not, and
// nothing stays mapped once the link is closed.
#include "actors/data_plane/shared_link.hpp"

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/fixture.hpp"
#include "actors/served_shard.hpp"
#include "actors/shard.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

/// The two ends of one shared link in this process, joined by a socket
/// pair as two processes are by their Unix socket.
struct link_pair {
  std::shared_ptr<troupe::shared_link> server, client;

  explicit link_pair(uint64_t ring_bytes) {
    auto fds = troupe::shared_link::make_segment(ring_bytes);
    BOOST_REQUIRE_MESSAGE(fds, why(fds));
    int sockets[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets)
                  == 0);
    auto s = troupe::shared_link::open(*fds, true, "client");
    auto c = troupe::shared_link::open(*fds, false, "server");
    BOOST_REQUIRE_MESSAGE(s, why(s));
    BOOST_REQUIRE_MESSAGE(c, why(c));
    server = *s;
    client = *c;
    server->take_peer_socket(sockets[0]);
    client->take_peer_socket(sockets[1]);
  }
};

/// How many of this process's mappings are shared data-plane segments.
int mapped_segments() {
  std::ifstream maps{"/proc/self/maps"};
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find("memfd:troupe-data-plane") != std::string::npos;
  return n;
}

/// Sends `frames` frames of random sizes (a 48-byte header, then up to
/// `most` bytes, each byte its position's) through `out`.
void send_frames(byte_link& out, int frames, size_t most, unsigned seed) {
  std::mt19937 rng{seed};
  std::vector<unsigned char> body(most);
  for (int i = 0; i < frames; ++i) {
    uint64_t head[6] = {static_cast<uint64_t>(i), rng() % (most + 1)};
    for (size_t k = 0; k < head[1]; ++k)
      body[k] = static_cast<unsigned char>((k * 7 + i) & 0xFF);
    size_t done = 0;
    BOOST_REQUIRE(
      out.write(head, sizeof(head), body.data(), head[1], done, true)
      == written::all);
  }
}

/// Reads what send_frames sent; the number of frames read intact.
int receive_frames(byte_link& in, int frames, size_t most) {
  std::vector<unsigned char> body(most);
  int intact = 0;
  for (int i = 0; i < frames; ++i) {
    uint64_t head[6];
    if (!in.read_exact(head, sizeof(head)) || head[0] != uint64_t(i)
        || head[1] > most || !in.read_exact(body.data(), head[1]))
      return intact;
    bool same = true;
    for (size_t k = 0; k < head[1]; ++k)
      same &= body[k] == static_cast<unsigned char>((k * 7 + i) & 0xFF);
    intact += same;
  }
  return intact;
}

} // namespace

BOOST_AUTO_TEST_SUITE(shared_link)

BOOST_AUTO_TEST_CASE(a_ring_smaller_than_its_frames_carries_them_both_ways) {
  link_pair p{4096};
  constexpr int frames = 300;
  constexpr size_t most = 100000; // 24 rings' worth
  int up = 0, down = 0;
  std::thread client_writes{[&] { send_frames(*p.client, frames, most, 1); }};
  std::thread server_writes{[&] { send_frames(*p.server, frames, most, 2); }};
  std::thread server_reads{
    [&] { up = receive_frames(*p.server, frames, most); }};
  down = receive_frames(*p.client, frames, most);
  for (auto* t : {&client_writes, &server_writes, &server_reads})
    t->join();
  BOOST_TEST(up == frames);
  BOOST_TEST(down == frames);
}

BOOST_AUTO_TEST_CASE(a_write_that_does_not_wait_stops_at_a_full_ring) {
  link_pair p{4096};
  std::vector<char> body(10000, 'x');
  char head[48] = {};
  size_t done = 0;
  BOOST_TEST(
    (p.client->write(head, sizeof(head), body.data(), body.size(), done, false)
     == written::some));
  BOOST_TEST(done == 4096u);
  std::vector<char> got(4096);
  BOOST_REQUIRE(p.server->read_exact(got.data(), got.size()));
  BOOST_TEST(
    (p.client->write(head, sizeof(head), body.data(), body.size(), done, false)
     == written::some));
  BOOST_TEST(done == 8192u);
}

BOOST_AUTO_TEST_CASE(a_peer_gone_ends_reads_and_writes_here) {
  link_pair p{4096};
  std::thread gone{[&] {
    std::this_thread::sleep_for(100ms);
    p.client.reset(); // as a killed process: no shutdown, its socket closes
  }};
  char byte;
  auto began = std::chrono::steady_clock::now();
  BOOST_TEST(!p.server->read_exact(&byte, 1)); // woken, not left waiting
  gone.join();
  BOOST_TEST((std::chrono::steady_clock::now() - began < 5s));
  std::vector<char> body(10000, 'x');
  size_t done = 0;
  BOOST_TEST((p.server->write(nullptr, 0, body.data(), body.size(), done, true)
              == written::failed));
}

BOOST_AUTO_TEST_CASE(shutdown_wakes_both_sides) {
  link_pair p{4096};
  bool server_read = true, client_read = true;
  std::thread waits{[&] {
    char byte;
    server_read = p.server->read_exact(&byte, 1);
  }};
  std::thread waits_too{[&] {
    char byte;
    client_read = p.client->read_exact(&byte, 1);
  }};
  std::this_thread::sleep_for(100ms);
  p.server->shutdown();
  waits.join();
  waits_too.join();
  BOOST_TEST(!server_read);
  BOOST_TEST(!client_read);
}

BOOST_AUTO_TEST_CASE(a_segment_names_its_size_truthfully_or_is_refused) {
  BOOST_TEST(!troupe::shared_link::make_segment(5000)); // no power of two
  BOOST_TEST(!troupe::shared_link::make_segment(1024)); // less than a page
  shared_fds none;
  none.fds[0] = ::memfd_create("not-a-segment", MFD_CLOEXEC);
  BOOST_REQUIRE(::ftruncate(none.fds[0], 3 * 4096) == 0);
  auto refused = troupe::shared_link::open(none, false, "stranger");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(describe(refused.error()).find("not a troupe data-plane segment")
               != std::string::npos,
             describe(refused.error()));
}

BOOST_AUTO_TEST_CASE(a_stub_on_this_host_pulls_and_pushes_through_it) {
  for (bool allowed : {true, false}) {
    BOOST_TEST_CONTEXT("shared memory " << (allowed ? "allowed" : "off")) {
      BOOST_REQUIRE(mapped_segments() == 0);
      net_system node{allowed};
      shard_options o;
      o.block.optimizer.learning_rate = 1.0;
      o.initial.assign(1 << 20, 1.f); // 4 MB: a frame of many rings
      auto shard = spawn_joined_shard(*node.sys, o);
      auto server = serve_on_data_plane(*node.sys, shard, o.initial.size());
      auto client = data_client::open(*node.sys, "127.0.0.1", server->port(),
                                      5s);
      auto stub = client->stub(0, o.initial.size());
      caf::scoped_actor self{*node.sys};
      for (int round = 0; round < 3; ++round) {
        float_block b;
        self->request(stub, 5s, pull_atom_v, int32_t{0}, int64_t{0})
          .receive([&](float_block& got) { b = std::move(got); },
                   [&](caf::error& e) { BOOST_FAIL(describe(e)); });
        BOOST_REQUIRE(b.values);
        BOOST_TEST(b.values->size() == o.initial.size());
        BOOST_TEST((*b.values)[12345] == 1.f - round);
        BOOST_TEST(b.version == round);
        std::vector<float> g(o.initial.size(), 1.f);
        self
          ->request(stub, 5s, push_atom_v,
                    gradient_push::of(0, 0, b.version, std::move(g)))
          .receive([](push_ack&) {},
                   [&](caf::error& e) { BOOST_FAIL(describe(e)); });
      }
      // Both ends of the link map the segment: the server's and the
      // client's, in this one process.
      BOOST_TEST(mapped_segments() == (allowed ? 2 : 0));
      client->close();
      server->stop();
      caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
      BOOST_TEST(mapped_segments() == 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Connecting to a published actor (actors/net/remote.hpp) inside one process:
// a server whose BASP handshake arrives later than one heartbeat, but well
// within the connection timeout, is reached, in plaintext and over TLS.
// CAF 0.17.6 starts a connection's silence clock at the epoch, so before
// troupe set it, the first heartbeat tick after a connect cut every such
// link with connection_timeout (seen as nodes and shells that could not
// reach a loaded chief).
#include "actors/net/remote.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/protocol/protocol.hpp"
#include "actors/shard.hpp"
#include "actors/net/sockets.hpp"
#include "actors/served_shard.hpp"
#include "actors/protocol/system_config.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

using clock_type = std::chrono::steady_clock;

/// A TCP relay on 127.0.0.1 to 127.0.0.1:`upstream` for one connection,
/// which holds what the server sends for `hold`: from the connection's
/// start (a plaintext server's BASP handshake), or with `after_tls` from
/// the client's second flight on (TLS 1.3: what the server sends after
/// the client's Finished, i.e. its BASP handshake).
class slow_relay {
public:
  slow_relay(uint16_t upstream, std::chrono::milliseconds hold, bool after_tls)
    : upstream_(upstream), hold_(hold), after_tls_(after_tls) {
    if (auto fd = troupe::listen_on("127.0.0.1", 0, false)) {
      listener_ = *fd;
      port_ = troupe::local_port_of(listener_);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~slow_relay() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  slow_relay(const slow_relay&) = delete;
  slow_relay& operator=(const slow_relay&) = delete;

  uint16_t port() const { return port_; }

private:
  static bool send_all(int fd, const char* data, size_t n) {
    while (n > 0) {
      auto sent = ::send(fd, data, n, MSG_NOSIGNAL);
      if (sent <= 0)
        return false;
      data += sent;
      n -= static_cast<size_t>(sent);
    }
    return true;
  }

  void run() {
    int client = -1;
    while (!stop_ && client < 0) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 10) == 1)
        client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (client < 0)
      return;
    std::string why;
    int server = troupe::connect_within("127.0.0.1", upstream_,
                                        std::chrono::seconds(5), why);
    auto never = clock_type::time_point::max();
    auto hold_until = after_tls_ ? never : clock_type::now() + hold_;
    bool server_spoke = false;
    std::string to_client;
    char buf[16384];
    while (!stop_ && server >= 0) {
      if (!to_client.empty() && clock_type::now() >= hold_until
          && hold_until != never) {
        if (!send_all(client, to_client.data(), to_client.size()))
          break;
        to_client.clear();
      }
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 10) <= 0)
        continue;
      if (p[0].revents != 0) {
        auto got = ::recv(client, buf, sizeof(buf), 0);
        if (got <= 0 || !send_all(server, buf, static_cast<size_t>(got)))
          break;
        if (after_tls_ && server_spoke && hold_until == never)
          hold_until = clock_type::now() + hold_;
      }
      if (p[1].revents != 0) {
        auto got = ::recv(server, buf, sizeof(buf), 0);
        if (got <= 0)
          break;
        server_spoke = true;
        if (after_tls_ && hold_until == never) { // the TLS handshake: at once
          if (!send_all(client, buf, static_cast<size_t>(got)))
            break;
        } else {
          to_client.append(buf, static_cast<size_t>(got));
        }
      }
    }
    ::close(client);
    if (server >= 0)
      ::close(server);
  }

  uint16_t upstream_;
  std::chrono::milliseconds hold_;
  bool after_tls_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// An actor system with the middleman: heartbeats every 50 ms, links cut
/// after 2 s of silence.
struct net_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  net_system() {
    cluster_config c;
    c.heartbeat_interval_ms = 50;
    c.connection_timeout_ms = 2000;
    init_config(cfg);
    init_network(cfg, c);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

/// A published shard of three floats (1, 2, 3); `tls` null: plaintext.
struct published_shard {
  net_system f;
  shard_actor shard;
  uint16_t port = 0;

  explicit published_shard(std::shared_ptr<const tls_context> tls) {
    secure_links(*f.sys, std::move(tls), false);
    shard_options o;
    o.initial = {1.f, 2.f, 3.f};
    shard = troupe::test::spawn_joined_shard(*f.sys, o);
    auto p = publish_on(*f.sys, shard, "127.0.0.1", 0);
    BOOST_REQUIRE_MESSAGE(p, troupe::test::why(p));
    port = *p;
  }
  ~published_shard() {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
};

/// Connects `client` to the shard through a relay that holds the server's
/// BASP handshake for 400 ms (eight heartbeats), then pulls the shard's
/// values through the link.
void connects_through_a_slow_handshake(const published_shard& server,
                                       std::shared_ptr<const tls_context> tls) {
  slow_relay relay{server.port, 400ms, tls != nullptr};
  BOOST_REQUIRE(relay.port() != 0);
  net_system client;
  secure_links(*client.sys, std::move(tls), false);
  auto h = connect_to<shard_actor>(*client.sys, "127.0.0.1", relay.port(), 5s);
  BOOST_REQUIRE_MESSAGE(h, troupe::test::why(h));
  caf::scoped_actor self{*client.sys};
  std::vector<float> got;
  self->request(*h, 5s, pull_atom_v, int32_t{0}, int64_t{0})
    .receive([&](float_block& b) { got = *b.values; },
             [&](caf::error& e) { BOOST_ERROR(describe(e)); });
  BOOST_TEST(got == (std::vector<float>{1.f, 2.f, 3.f}));
}

/// The cluster CA and a certificate "node" (scripts/make-certs.sh).
std::shared_ptr<const tls_context> test_tls(const temp_dir& dir) {
  auto base = dir.file("certs");
  std::string cmd = std::string{TROUPE_SOURCE_DIR} + "/scripts/make-certs.sh "
                    + base + " node > /dev/null";
  BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0,
                        "scripts/make-certs.sh failed");
  auto ctx = tls_context::load(
    {base + "/ca.pem", base + "/node.pem", base + "/node.key"});
  BOOST_REQUIRE_MESSAGE(ctx, troupe::test::why(ctx));
  return *ctx;
}

} // namespace

BOOST_AUTO_TEST_SUITE(remote)

BOOST_AUTO_TEST_CASE(a_handshake_slower_than_a_heartbeat_connects) {
  published_shard server{nullptr};
  connects_through_a_slow_handshake(server, nullptr);
}

BOOST_AUTO_TEST_CASE(a_tls_handshake_slower_than_a_heartbeat_connects) {
  temp_dir dir;
  auto tls = test_tls(dir);
  published_shard server{tls};
  connects_through_a_slow_handshake(server, tls);
}

BOOST_AUTO_TEST_SUITE_END()

// troupe's TLS (actors/net/tls*.hpp) inside one test process: every file
// problem is named when the context loads; the data plane and CAF's
// remoting run over mutual TLS between two actor systems; a peer without
// the cluster's certificates is refused and the listener serves on.
#include "actors/net/tls.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>

#include "actors/data_plane/data_link.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/net/remote.hpp"
#include "actors/shard.hpp"
#include "actors/protocol/system_config.hpp"
#include "actors/fixture.hpp"
#include "actors/served_shard.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using namespace troupe::test;

namespace {

/// A cluster CA with certificates "node" and "other", and a second CA
/// ("rogue/") with its own "node": made once per test run.
struct certs {
  temp_dir dir;
  std::string base;
  bool ok = false;

  certs() {
    base = dir.file("certs");
    std::string script = std::string{TROUPE_SOURCE_DIR}
                         + "/scripts/make-certs.sh ";
    ok = std::system((script + base + " node other > /dev/null").c_str()) == 0
         && std::system((script + base + "/rogue node > /dev/null").c_str())
              == 0;
  }

  tls_files files(const std::string& name = "node") const {
    return {base + "/ca.pem", base + "/" + name + ".pem",
            base + "/" + name + ".key"};
  }
  tls_files rogue() const {
    return {base + "/rogue/ca.pem", base + "/rogue/node.pem",
            base + "/rogue/node.key"};
  }
};

const certs& test_certs() {
  static certs c;
  BOOST_REQUIRE_MESSAGE(c.ok, "scripts/make-certs.sh failed");
  return c;
}

std::shared_ptr<const tls_context> load_ok(const tls_files& f) {
  auto ctx = tls_context::load(f);
  BOOST_REQUIRE_MESSAGE(ctx, troupe::test::why(ctx));
  return *ctx;
}

/// The message of the error tls_context::load gives for `f`.
std::string load_error(const tls_files& f) {
  auto ctx = tls_context::load(f);
  BOOST_REQUIRE(!ctx);
  BOOST_TEST((ctx.error() == errc::invalid_config));
  return describe(ctx.error());
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// A shard of `n` floats (0, 1, 2, ...) served by the data plane of a
/// system whose links use `tls` (null: plaintext).
struct tls_served_shard {
  net_system f;
  shard_actor shard;
  std::shared_ptr<data_server> server;

  tls_served_shard(std::shared_ptr<const tls_context> tls, size_t n) {
    secure_links(*f.sys, std::move(tls), false);
    shard_options o;
    o.block.optimizer.learning_rate = 1.0;
    o.initial.resize(n);
    for (size_t i = 0; i < n; ++i)
      o.initial[i] = static_cast<float>(i);
    shard = spawn_joined_shard(*f.sys, o);
    server = serve_on_data_plane(*f.sys, shard, n);
  }
  ~tls_served_shard() {
    server->stop();
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(tls)

BOOST_AUTO_TEST_CASE(every_file_problem_is_named_at_load) {
  auto& c = test_certs();
  load_ok(c.files());
  auto f = c.files();
  f.ca = c.base + "/missing.pem";
  auto why = load_error(f);
  BOOST_TEST(contains(why, "TLS CA file " + f.ca + ": No such file"), why);
  f = c.files();
  f.key.clear();
  why = load_error(f);
  BOOST_TEST(contains(why, "the key is missing"), why);
  f = c.files();
  f.certificate = c.base; // a folder
  why = load_error(f);
  BOOST_TEST(contains(why, "not a regular file"), why);
  // Not PEM.
  std::string junk = c.base + "/junk.pem";
  std::ofstream{junk} << "not a certificate\n";
  f = c.files();
  f.certificate = junk;
  why = load_error(f);
  BOOST_TEST(contains(why, "TLS certificate " + junk + ": not a PEM"), why);
  f = c.files();
  f.key = junk;
  why = load_error(f);
  BOOST_TEST(contains(why, "TLS key " + junk + ": not an unencrypted PEM"),
             why);
  f = c.files();
  f.ca = junk;
  why = load_error(f);
  BOOST_TEST(contains(why, "TLS CA file " + junk), why);
  // Another certificate's key.
  f = c.files();
  f.key = c.files("other").key;
  why = load_error(f);
  BOOST_TEST(contains(why, "does not belong to certificate"), why);
  // A certificate the CA did not sign.
  f = c.files();
  f.certificate = c.rogue().certificate;
  f.key = c.rogue().key;
  why = load_error(f);
  BOOST_TEST(contains(why, "not accepted by the CA in " + f.ca), why);
}

BOOST_AUTO_TEST_CASE(the_data_plane_runs_over_mutual_tls) {
  auto& c = test_certs();
  // 1M floats: many TLS records each way, values checked one by one.
  const size_t n = 1 << 20;
  tls_served_shard s{load_ok(c.files()), n};
  net_system client_side;
  secure_links(*client_side.sys, load_ok(c.files("other")), false);
  auto client = data_client::open(*client_side.sys, "127.0.0.1",
                                  s.server->port(), 5s);
  auto stub = client->stub(0, n);
  for (int round = 0; round < 3; ++round) {
    auto b = pull_values(*client_side.sys, stub);
    BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
    BOOST_REQUIRE(b->values->size() == n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i)
      wrong += (*b->values)[i] != static_cast<float>(i) - round ? 1 : 0;
    BOOST_TEST(wrong == 0u);
    // Push a gradient of ones: the values drop by one (learning rate 1).
    caf::scoped_actor self{*client_side.sys};
    caf::error err;
    self
      ->request(stub, 10s, push_atom_v,
                gradient_push::of(0, 0, 0, std::vector<float>(n, 1.f)))
      .receive([](push_ack&) {}, [&](caf::error& e) { err = std::move(e); });
    BOOST_TEST(!err, describe(err));
  }
  client->close();
}

BOOST_AUTO_TEST_CASE(
  a_data_plane_peer_without_the_clusters_certificate_is_refused) {
  auto& c = test_certs();
  tls_served_shard s{load_ok(c.files()), 3};
  // Plaintext, then another CA's certificate: both refused.
  for (int kind = 0; kind < 2; ++kind) {
    net_system stranger;
    if (kind == 1)
      secure_links(*stranger.sys, load_ok(c.rogue()), false);
    auto client = data_client::open(*stranger.sys, "127.0.0.1",
                                    s.server->port(), 5s);
    auto b = pull_values(*stranger.sys, client->stub(0, 3));
    BOOST_TEST(!b);
    client->close();
  }
  // The server serves on.
  net_system member;
  secure_links(*member.sys, load_ok(c.files("other")), false);
  auto client = data_client::open(*member.sys, "127.0.0.1", s.server->port(),
                                  5s);
  auto b = pull_values(*member.sys, client->stub(0, 3));
  BOOST_TEST(static_cast<bool>(b), troupe::test::why(b));
  client->close();
}

BOOST_AUTO_TEST_CASE(
  a_tls_client_to_a_plaintext_data_plane_names_the_handshake) {
  auto& c = test_certs();
  tls_served_shard s{nullptr, 3};
  net_system member;
  secure_links(*member.sys, load_ok(c.files()), false);
  auto client = data_client::open(*member.sys, "127.0.0.1", s.server->port(),
                                  5s);
  auto b = pull_values(*member.sys, client->stub(0, 3));
  BOOST_REQUIRE(!b);
  BOOST_TEST(contains(describe(b.error()), "TLS handshake failed"),
             describe(b.error()));
  client->close();
}

BOOST_AUTO_TEST_CASE(cafs_remoting_runs_over_mutual_tls) {
  auto& c = test_certs();
  tls_served_shard s{load_ok(c.files()), 3};
  auto port = publish_on(*s.f.sys, s.shard, "127.0.0.1", 0);
  BOOST_REQUIRE_MESSAGE(port, troupe::test::why(port));
  // A member of the cluster reaches the shard and pulls through BASP.
  net_system member;
  secure_links(*member.sys, load_ok(c.files("other")), false);
  auto h = connect_to<shard_actor>(*member.sys, "127.0.0.1", *port, 5s);
  BOOST_REQUIRE_MESSAGE(h, troupe::test::why(h));
  auto b = pull_values(*member.sys, *h);
  BOOST_REQUIRE_MESSAGE(b, troupe::test::why(b));
  BOOST_TEST(*b->values == (std::vector<float>{0.f, 1.f, 2.f}));
  // Plaintext and another CA are refused; the listener serves on.
  net_system plain;
  auto refused = connect_to<shard_actor>(*plain.sys, "127.0.0.1", *port, 5s);
  BOOST_TEST(!refused);
  net_system rogue;
  secure_links(*rogue.sys, load_ok(c.rogue()), false);
  refused = connect_to<shard_actor>(*rogue.sys, "127.0.0.1", *port, 5s);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(contains(describe(refused.error()), "TLS handshake with"),
             describe(refused.error()));
  net_system again;
  secure_links(*again.sys, load_ok(c.files("other")), false);
  h = connect_to<shard_actor>(*again.sys, "127.0.0.1", *port, 5s);
  BOOST_TEST(static_cast<bool>(h), troupe::test::why(h));
}

BOOST_AUTO_TEST_SUITE_END()

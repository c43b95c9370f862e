// Mutual TLS between the processes of a cluster, tried the way a stranger
// on the same host would: shells and joiners without a certificate, with
// one from another CA, or speaking plaintext are refused while the run
// goes on; raw bytes that crash CAF's BASP parser (a 32-byte header, a
// header announcing 4 GiB) and idle or half-finished handshakes against
// every port leave every process running, small and quiet.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/sockets.hpp"
#include "running_cluster.hpp"
#include "raw_peer.hpp"

using namespace troupe::test;

namespace {

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

/// A TLS cluster: chief, a shard node and two worker nodes on 127.0.0.1,
/// each node with the cluster's certificate.
struct tls_cluster {
  temp_dir dir;
  cluster_spec spec;
  std::string rogue; ///< certificates of another CA

  explicit tls_cluster(int epochs, const std::string& mode = "async") {
    spec.mode = mode;
    spec.epochs = epochs;
    spec.nodes = {{"chief"}, {"ps0", 2}, {"w0", 0, 1}, {"w1", 0, 1}};
    spec.tls_dir = make_certs(dir, "certs", {"cluster", "client"});
    rogue = make_certs(dir, "rogue", {"cluster", "client"});
  }

  /// Every port a stranger could reach: control ports and data planes.
  std::vector<uint16_t> ports(const procs& members) const {
    std::vector<uint16_t> out;
    for (auto& n : spec.nodes)
      out.push_back(n.port);
    for (auto& m : members)
      out.push_back(data_port_of(*m));
    return out;
  }
};

/// troupe-shell -c status with `flags`; (exit code, output).
std::pair<int, std::string> shell_with(const tls_cluster& c,
                                       std::vector<std::string> flags) {
  std::vector<std::string> args{"--connect", chief_address(c.spec), "-c",
                                "status",    "--timeout",           "3"};
  args.insert(args.end(), flags.begin(), flags.end());
  process p{c.dir, "stranger", "troupe-shell", args};
  int code = p.wait(30);
  return {code, p.err() + p.out()};
}

std::vector<std::string> tls_flags(const std::string& folder,
                                   const std::string& ca_folder = "") {
  auto ca = (ca_folder.empty() ? folder : ca_folder) + "/ca.pem";
  return {"--tls-ca",   ca,
          "--tls-cert", folder + "/client.pem",
          "--tls-key",  folder + "/client.key"};
}

} // namespace

BOOST_AUTO_TEST_SUITE(tls)

BOOST_AUTO_TEST_CASE(a_tls_cluster_trains_and_refuses_strangers) {
  tls_cluster c{2, "sync"};
  BOOST_REQUIRE(!c.spec.tls_dir.empty() && !c.rogue.empty());
  running_cluster cluster{c.dir, c.spec};
  cluster.require_step(50);
  auto& chief = cluster.chief();
  BOOST_TEST(chief.out().find("links: mutual TLS") != std::string::npos,
             chief.out());

  // The cluster's own client certificate opens the shell; with --run the
  // shell also insists on the run it is for.
  auto [ok_code, ok_out] = shell_with(c, c.spec.client_flags());
  BOOST_TEST(ok_code == 0, ok_out);
  BOOST_TEST(ok_out.find("step") != std::string::npos, ok_out);
  auto out0 = chief.out();
  auto at = out0.find("identity: run ");
  BOOST_REQUIRE(at != std::string::npos);
  auto run_id = out0.substr(at + 14, 16);
  auto run_flags = c.spec.client_flags();
  run_flags.insert(run_flags.end(), {"--run", run_id});
  auto [run_code, run_out] = shell_with(c, run_flags);
  BOOST_TEST(run_code == 0, run_out);
  run_flags.back() = "0123456789abcdef";
  auto [other_code, other_out] = shell_with(c, run_flags);
  BOOST_TEST(other_code == 1, other_out);
  BOOST_TEST(other_out.find("runs run " + run_id + ", not 0123456789abcdef")
               != std::string::npos,
             other_out);

  // Plaintext: CAF's handshake is cut off, and the shell says TLS may be
  // why.
  auto [plain_code, plain_out] = shell_with(c, {});
  BOOST_TEST(plain_code != 0, plain_out);
  BOOST_TEST(plain_out.find("it may use TLS") != std::string::npos, plain_out);
  // A certificate of another CA: the chief refuses it, and the shell
  // refuses the chief's (each trusts its own CA only).
  auto [rogue_code, rogue_out] = shell_with(c, tls_flags(c.rogue));
  BOOST_TEST(rogue_code != 0, rogue_out);
  BOOST_TEST(rogue_out.find("TLS handshake with") != std::string::npos,
             rogue_out);
  // Trusting the cluster's CA but holding another's certificate: caught
  // before connecting, exit 2.
  auto [mixed_code, mixed_out] = shell_with(c,
                                            tls_flags(c.rogue, c.spec.tls_dir));
  BOOST_TEST(mixed_code == 2, mixed_out);
  BOOST_TEST(mixed_out.find("not accepted by the CA") != std::string::npos,
             mixed_out);
  // A joiner from another CA, and one without certificates. (Started by
  // hand: cluster.join would give it the cluster's client certificate.)
  for (auto flags : {tls_flags(c.rogue), std::vector<std::string>{}}) {
    std::vector<std::string> args{"--join", chief_address(c.spec), "--workers",
                                  "1",      "--timeout",           "3"};
    args.insert(args.end(), flags.begin(), flags.end());
    process joiner{c.dir, "joiner", "troupe-node", args};
    BOOST_TEST(joiner.wait(30) != 0, joiner.out());
  }
  auto out = chief.out();
  BOOST_TEST(out.find("adding") == std::string::npos, out);
  BOOST_TEST(chief.err().find("refused 127.0.0.1") != std::string::npos,
             chief.err());

  cluster.require_finished();
  out = chief.out();
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  auto tls_accuracy = test_accuracy(out);

  // The same cluster without TLS trains to the same accuracy (sync mode,
  // so both runs take the same steps).
  temp_dir plain_dir;
  auto plain_spec = c.spec;
  plain_spec.tls_dir.clear();
  for (auto& n : plain_spec.nodes)
    n.port = 0;
  running_cluster plain{plain_dir, plain_spec};
  BOOST_REQUIRE_MESSAGE(plain.chief().wait(240) == 0, plain.logs());
  auto plain_accuracy = test_accuracy(plain.chief().out());
  BOOST_TEST_MESSAGE("test accuracy with TLS " << tls_accuracy << ", without "
                                               << plain_accuracy);
  BOOST_TEST(tls_accuracy > 0.8);
  BOOST_TEST(std::abs(tls_accuracy - plain_accuracy) < 0.01);
}

BOOST_AUTO_TEST_CASE(bytes_that_crash_basp_never_reach_it) {
  tls_cluster c{3};
  running_cluster cluster{c.dir, c.spec};
  cluster.require_step(50);
  auto& chief = cluster.chief();
  auto& members = cluster.members();
  auto all = cluster.processes();
  std::vector<long> rss_before;
  for (auto* p : all)
    rss_before.push_back(rss_kb(p->pid()));
  // The 32-byte packet that segfaults CAF 0.17's BASP handler, and a
  // header that makes it allocate 4 GiB, to every port of the cluster.
  for (auto port : c.ports(members)) {
    BOOST_REQUIRE(port != 0);
    for (auto& packet : {basp_header(1, 0), basp_header(1, 0xFFFFFFFFu)}) {
      int fd = raw_connect(port);
      BOOST_REQUIRE(fd >= 0);
      BOOST_TEST(::send(fd, packet.data(), packet.size(), MSG_NOSIGNAL)
                 == static_cast<ssize_t>(packet.size()));
      BOOST_TEST(closed_by_peer(fd, 10), "port " << port);
      ::close(fd);
    }
  }
  sleep_s(1);
  for (size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(!all[i]->ended(), cluster.logs());
    auto grew = rss_kb(all[i]->pid()) - rss_before[i];
    BOOST_TEST_MESSAGE("process " << i << ": RSS grew " << grew / 1024
                                  << " MB");
    BOOST_TEST(grew < 50 * 1024);
  }
  cluster.require_finished();
  BOOST_TEST(test_accuracy(chief.out()) > 0.8, chief.out());
}

BOOST_AUTO_TEST_CASE(idle_connections_and_stalled_handshakes_cost_nothing) {
  tls_cluster c{1};
  c.spec.handshake_timeout_ms = 2000;
  running_cluster cluster{c.dir, c.spec};
  cluster.require_step(50);
  auto& chief = cluster.chief();
  auto& members = cluster.members();
  // Paused, the cluster itself is quiet: what is measured is what the
  // strangers cost.
  auto [code, out] = run_shell(c.dir, c.spec, "pause");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  sleep_s(2);
  auto all = cluster.processes();
  std::vector<double> cpu_before;
  for (auto* p : all)
    cpu_before.push_back(cpu_seconds(p->pid()));
  auto t0 = std::chrono::steady_clock::now();
  // 20 connections that say nothing and 20 that send a TLS record header
  // and stop, against every port.
  std::vector<int> held;
  const char record_header[] = {0x16, 0x03, 0x01, 0x02, 0x00};
  for (auto port : c.ports(members))
    for (int i = 0; i < 40; ++i) {
      int fd = raw_connect(port);
      BOOST_REQUIRE(fd >= 0);
      if (i % 2 == 1)
        ::send(fd, record_header, sizeof(record_header), MSG_NOSIGNAL);
      held.push_back(fd);
    }
  // Each is closed within the handshake deadline (2 s; 2 s of slack for
  // a loaded machine).
  size_t closed = 0;
  for (int fd : held) {
    auto left = 4.0
                - std::chrono::duration<double>(std::chrono::steady_clock::now()
                                                - t0)
                    .count();
    closed += closed_by_peer(fd, std::max(left, 0.1)) ? 1 : 0;
  }
  BOOST_TEST(closed == held.size());
  // Hold them for 30 s all told: the nodes sleep meanwhile.
  sleep_s(30
          - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count());
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                               - t0)
                   .count();
  for (int fd : held)
    ::close(fd);
  for (size_t i = 0; i < all.size(); ++i) {
    auto used = cpu_seconds(all[i]->pid()) - cpu_before[i];
    BOOST_TEST_MESSAGE("process " << i << ": " << used << " s CPU in "
                                  << seconds << " s");
    BOOST_TEST(used < 0.05 * seconds);
  }
  auto [resume_code, resume_out] = run_shell(c.dir, c.spec, "resume");
  BOOST_TEST(resume_code == 0, resume_out);
  cluster.require_chief_finished();
  BOOST_TEST(chief.err().find("no TLS handshake within 2000 ms")
               != std::string::npos,
             chief.err());
}

BOOST_AUTO_TEST_SUITE_END()

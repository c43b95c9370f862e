// The front door of a multi-process cluster, as a stranger on the same
// host meets it: the shipped config/cluster-local.json (its ports moved,
// nothing else) and an embedded run with --listen, each process started
// with no security flag. The packet that used to kill CAF 0.17 (a 32-byte
// header), a header announcing 4 GiB, 1 MB of random bytes and a replay
// of a recorded valid key handshake, sent to every port each process
// listens on (control, data plane, --listen), leave every process running
// at the memory it had; a client that proves the key and then sends a
// malformed BASP header or data frame loses only its own connection; and
// the runs complete with every sample once per epoch. Then the keyless:
// a shell or joiner with no key, another key, or plaintext is refused
// with a message naming the key file, and the user's own shell works with
// no flag.
#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <thread>

#include "actors/net/cluster_key.hpp"
#include "actors/net/key_handshake.hpp"
#include "running_cluster.hpp"
#include "raw_peer.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

using bytes = byte_string;

int connect_to_port(uint16_t port) {
  int fd = raw_connect(port);
  BOOST_REQUIRE_MESSAGE(fd >= 0, "cannot connect to port " << port);
  return fd;
}

/// Runs the client side of the key handshake on blocking socket `fd`;
/// what it sent (hello and proof), empty when it failed.
bytes prove(int fd, const troupe::cluster_key& key) {
  troupe::key_exchange c{key, troupe::key_exchange::role::client,
                         troupe::key_exchange::random_nonce()};
  bytes sent;
  while (!c.done()) {
    auto& out = c.to_send();
    sent.insert(sent.end(), out.begin(), out.end());
    send_all(fd, out);
    out.clear();
    bytes in(c.wants());
    if (in.empty())
      return {};
    size_t got = 0;
    while (got < in.size()) {
      auto n = ::recv(fd, in.data() + got, in.size() - got, 0);
      if (n <= 0)
        return {};
      got += static_cast<size_t>(n);
    }
    if (!c.take(in.data()).empty())
      return {};
  }
  auto& proof = c.to_send();
  sent.insert(sent.end(), proof.begin(), proof.end());
  send_all(fd, proof);
  return sent;
}

/// config/cluster-local.json with its five ports moved to free ones and
/// its checkpoints in `dir`: nothing else changed.
std::string shipped_cluster(const temp_dir& dir, std::vector<uint16_t>& ports) {
  auto j = nlohmann::json::parse(
    read_all(std::string{TROUPE_SOURCE_DIR} + "/config/cluster-local.json"));
  for (auto& node : j["cluster"]["nodes"]) {
    ports.push_back(free_port());
    node["port"] = ports.back();
  }
  j["training"]["checkpoint"]["dir"] = dir.file("ckpt");
  auto path = dir.file("cluster-local.json");
  write_file(path, j.dump(2));
  return path;
}

} // namespace

BOOST_AUTO_TEST_SUITE(front_door)

BOOST_AUTO_TEST_CASE(strangers_bytes_crash_no_process_of_the_shipped_cluster) {
  temp_dir dir;
  std::vector<uint16_t> control;
  auto cfg = shipped_cluster(dir, control);
  // Members first, as the README starts them; 5 epochs (6 for the
  // embedded run, whose port is tried first), so the runs are still going
  // when the bytes arrive, on a loaded machine too.
  cluster_start how;
  how.every_node_flags = {"--epochs", "5"};
  auto cluster = running_cluster::from_file(dir, cfg, how);
  auto& chief = cluster.chief();
  auto listen_port = free_port();
  running_cluster embedded{
    dir,
    {"embedded",
     {"--config", std::string{TROUPE_SOURCE_DIR} + "/config/local.json",
      "--epochs", "6", "--listen",
      "127.0.0.1:" + std::to_string(listen_port)}}};
  cluster.require_step(100, 180);
  BOOST_REQUIRE_MESSAGE(embedded.chief().wait_for_output("\nstep ", 180),
                        embedded.logs());
  std::vector<const process*> all{&embedded.chief()};
  for (auto* p : cluster.processes())
    all.push_back(p);
  // Every port each process listens on: control and data plane (and the
  // embedded run's --listen), as `ss -tlnp` lists them.
  std::vector<uint16_t> ports;
  std::vector<long> rss_before;
  for (auto* p : all) {
    auto mine = listening_ports(p->pid());
    BOOST_TEST_MESSAGE("pid " << p->pid() << " listens on " << mine.size()
                              << " ports");
    BOOST_TEST(mine.size() >= (p == &embedded.chief() ? 1u : 2u));
    ports.insert(ports.end(), mine.begin(), mine.end());
    rss_before.push_back(rss_kb(p->pid()));
  }
  for (auto port : control)
    BOOST_TEST(std::count(ports.begin(), ports.end(), port) == 1);
  BOOST_TEST(std::count(ports.begin(), ports.end(), listen_port) == 1);
  auto key = troupe::load_key(troupe::default_key_path());
  BOOST_REQUIRE_MESSAGE(key, why(key));
  // A valid handshake, recorded from a real one with the chief.
  bytes recorded;
  {
    int fd = connect_to_port(control[0]);
    recorded = prove(fd, *key);
    ::close(fd);
  }
  BOOST_REQUIRE(recorded.size() == 48u + 32u);
  std::mt19937 rng{7};
  bytes random(1 << 20);
  for (auto& b : random)
    b = static_cast<uint8_t>(rng());
  const std::vector<std::pair<std::string, bytes>> hostile{
    {"the 32-byte header", basp_header(0x01, 0)},
    {"a 4 GiB header", basp_header(0x02, 0xffffffffu)},
    {"1 MB of random bytes", random},
    {"a replayed handshake", recorded},
  };
  for (auto port : ports)
    for (auto& [what, b] : hostile) {
      int fd = connect_to_port(port);
      send_all(fd, b);
      BOOST_TEST(closed_by_peer(fd, 10), what << " to port " << port);
      ::close(fd);
    }
  // With the key proven, a malformed BASP header (control ports) or data
  // frame (data planes) closes that connection only.
  std::set<uint16_t> basp_ports(control.begin(), control.end());
  basp_ports.insert(listen_port);
  for (auto port : ports) {
    int fd = connect_to_port(port);
    BOOST_REQUIRE(!prove(fd, *key).empty());
    BOOST_TEST(!closed_by_peer(fd, 0.2), "port " << port); // proven: admitted
    send_all(fd, basp_ports.count(port) > 0 ? basp_header(0x01, 0)
                                            : bytes(64, 0xff));
    BOOST_TEST(closed_by_peer(fd, 10), "port " << port);
    ::close(fd);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    BOOST_REQUIRE_MESSAGE(all[i]->running(),
                          all[i]->how_it_ended() + all[i]->err());
    auto grew = rss_kb(all[i]->pid()) - rss_before[i];
    BOOST_TEST_MESSAGE("pid " << all[i]->pid() << ": RSS grew " << grew / 1024
                              << " MB under the bytes");
    BOOST_TEST(grew < 50 * 1024, "process " << i);
  }
  // The runs complete, every sample once per epoch.
  cluster.require_finished(300, 60);
  BOOST_TEST(epoch_samples(chief.out()) == (std::vector<long>(5, 60000)),
             chief.out());
  embedded.require_finished(300);
  BOOST_TEST(epoch_samples(embedded.chief().out())
               == (std::vector<long>(6, 60000)),
             embedded.chief().out());
  // What the log says: each refusal with the peer and the reason, where
  // the key is, and the member whose header was malformed.
  auto err = chief.err();
  BOOST_TEST(has(err, "control port " + std::to_string(control[0])
                        + ": refused 127.0.0.1:"),
             err);
  BOOST_TEST(has(err, "sent no key handshake (plaintext CAF (BASP)"), err);
  BOOST_TEST(has(err, "wrong key proof (a replayed or forged handshake)"), err);
  BOOST_TEST(has(err, "members prove the key in " + key->path()), err);
  BOOST_TEST(has(err, "BASP header 1 (client handshake, payload 0 bytes): "
                      "its fields do not fit the operation"),
             err);
  auto& ps0 = cluster.node("ps0");
  BOOST_TEST(has(ps0.err(), "data plane port "), ps0.err());
  BOOST_TEST(has(chief.out(), "links: cluster key " + key->id()), chief.out());
}

BOOST_AUTO_TEST_CASE(a_shell_or_joiner_without_the_key_is_told_where_it_is) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 30; // stopped by the shell below
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(50);
  auto& chief = cluster.chief();
  auto key = troupe::load_key(troupe::default_key_path());
  BOOST_REQUIRE_MESSAGE(key, why(key));
  auto address = chief_address(spec);
  auto shell = [&](std::vector<std::string> flags,
                   std::vector<std::string> prefix = {}) {
    std::vector<std::string> args{"--connect", address,     "-c",
                                  "status",    "--timeout", "5"};
    args.insert(args.end(), flags.begin(), flags.end());
    process p{dir, "shell", "troupe-shell", args, "", std::move(prefix)};
    int code = p.wait(30);
    return std::make_pair(code, p.out() + p.err());
  };
  // The user's own shell: no flag.
  auto [own_code, own_out] = shell({});
  BOOST_TEST(own_code == 0, own_out);
  // No key where this user's would be: exit 2 before connecting, naming
  // the file and how to get it.
  auto elsewhere = dir.file("home/.config");
  auto [none_code,
        none_out] = shell({}, {"/usr/bin/env", "XDG_CONFIG_HOME=" + elsewhere});
  BOOST_TEST(none_code == 2, none_out);
  BOOST_TEST(has(none_out, "cluster key " + elsewhere
                             + "/troupe/cluster.key: no such file"),
             none_out);
  BOOST_TEST(has(none_out, "scp FIRST-HOST:"), none_out);
  // Another key: the chief's answer names both.
  bool made = false;
  auto other = troupe::load_or_make_key(dir.file("other.key"), made);
  BOOST_REQUIRE(other);
  auto [other_code, other_out] = shell({"--key", other->path()});
  BOOST_TEST(other_code != 0, other_out);
  BOOST_TEST(has(other_out, "the peer holds another cluster key (id "
                              + key->id() + ") than key " + other->id() + " in "
                              + other->path()),
             other_out);
  // Plaintext (--insecure): cut off before CAF's handshake, and told the
  // chief wants the key, and where it is.
  auto [plain_code, plain_out] = shell({"--insecure"});
  BOOST_TEST(plain_code != 0, plain_out);
  BOOST_TEST(has(plain_out, "it wants the cluster key (run without "
                            "--insecure; the key is in "
                              + key->path()),
             plain_out);
  // A joiner with another key: exit 2, same words; with none: the file.
  // (Started by hand: each must fail to start, and cluster.join would give
  // it the cluster's own flags.)
  process joiner{dir,
                 "joiner",
                 "troupe-node",
                 {"--join", address, "--workers", "1", "--key", other->path()}};
  auto joiner_code = joiner.wait(30);
  BOOST_TEST(joiner_code == 2, joiner_code << joiner.err() << joiner.out());
  BOOST_TEST(has(joiner.err(), "another cluster key (id " + key->id() + ")"),
             joiner.err());
  process keyless{dir,
                  "keyless",
                  "troupe-node",
                  {"--join", address, "--workers", "1"},
                  "",
                  {"/usr/bin/env", "XDG_CONFIG_HOME=" + elsewhere}};
  BOOST_TEST(keyless.wait(30) == 2, keyless.err());
  BOOST_TEST(has(keyless.err(), elsewhere
                                  + "/troupe/cluster.key: no such "
                                    "file"),
             keyless.err());
  // The chief logged the other key's refusals and trains on; the user's
  // shell stops it.
  BOOST_TEST(has(chief.err(),
                 "holds another cluster key (id " + other->id() + ")"),
             chief.err());
  auto [done_code, done_out] = run_shell(dir, spec, "stop", false);
  BOOST_TEST(done_code == 0, done_out);
  cluster.require_chief_finished(120);
}

BOOST_AUTO_TEST_SUITE_END()

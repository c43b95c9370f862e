// bench-transfer: pull+push round trips between two processes on
// 127.0.0.1, through a real shard actor. The process forks: the child
// hosts one shard of --floats values (plain SGD), served on the data plane
// (actors/data_plane/data_link, what workers on other nodes use) and published
// for BASP on free ports; the parent pulls the values and pushes a gradient of
// the same size, --rounds times after the warm-up rounds, through a
// data-plane stub (--via data, the default: shared memory, as two
// processes on one host use it; --via tcp: the data plane with shared
// memory off, as between hosts) or the BASP proxy (--via basp), and
// prints MB/s (bytes moved in both directions per second) and
// ms per round. Both sides run with the malloc settings of every networked
// troupe process (init_network). With --tls DIR both links are mutual TLS
// with DIR/ca.pem, DIR/bench.pem and DIR/bench.key (scripts/make-certs.sh
// DIR bench), as in a cluster with /cluster/tls; with --key FILE both
// prove the cluster key in FILE (made when missing), as a default
// cluster's links do. It also prints how long the first BASP connect took
// (TCP, the key or TLS handshake, CAF's handshake).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/net/remote.hpp"
#include "actors/shard.hpp"
#include "actors/protocol/system_config.hpp"
#include "apps/bench/bench_tls.hpp"
#include "apps/command_line.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;

namespace {

/// The child: a shard, published and on the data plane, until the parent
/// tells it to stop.
int serve(size_t floats, int ready_fd, const std::string& tls_dir,
          const std::string& key_file, const cluster_config& links) {
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, links);
  caf::actor_system sys{cfg};
  guard_links(sys, load_bench_guard(tls_dir, key_file, "bench-transfer"),
              false);
  shard_options so;
  so.block.optimizer.type = optimizer_config::kind::sgd;
  so.block.optimizer.learning_rate = 1e-9;
  so.initial.assign(floats, 0.5f);
  shard_actor shard = sys.spawn(shard_impl, std::move(so));
  caf::anon_send(shard, join_atom_v, int32_t{0});
  auto port = publish_on(sys, shard, "127.0.0.1", 0);
  auto data = data_server::start(sys, "127.0.0.1", 0);
  uint16_t p[2] = {port ? *port : uint16_t{0},
                   data ? (*data)->port() : uint16_t{0}};
  if (::write(ready_fd, p, sizeof(p)) != sizeof(p) || p[0] == 0 || p[1] == 0)
    return 1;
  ::close(ready_fd);
  (*data)->serve(0, shard, floats);
  caf::scoped_actor self{sys};
  self->monitor(shard);
  self->receive([](caf::down_msg&) {});
  (*data)->stop();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pull+push throughput between two processes on 127.0.0.1."};
  size_t floats = 1000000;
  int rounds = 20, warmup = 3;
  std::string via = "data", tls_dir, key_file;
  app.add_option("--floats", floats, "values per pull and per push")
    ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--rounds", rounds, "timed round trips")
    ->check(CLI::Range(1, 1000000));
  app
    .add_option("--warmup", warmup,
                "untimed round trips first (connection, heap growth)")
    ->check(CLI::Range(1, 1000));
  app
    .add_option("--via", via,
                "data (the data plane, shared memory on this host), tcp (the "
                "data plane without shared memory) or basp")
    ->check(CLI::IsMember({"data", "tcp", "basp"}));
  app.add_option("--tls", tls_dir,
                 "mutual TLS with DIR/ca.pem, DIR/bench.pem, DIR/bench.key");
  app.add_option("--key", key_file,
                 "prove the cluster key in FILE (made when missing)");
  if (auto code = troupe::parse_command_line(app, argc, argv, "bench-transfer"))
    return *code;
  cluster_config links;
  links.shared_memory = via == "data";
  // Bad files: one error, before the fork.
  load_bench_guard(tls_dir, key_file, "bench-transfer");
  int fds[2];
  if (::pipe(fds) != 0)
    return 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    return serve(floats, fds[1], tls_dir, key_file, links);
  }
  ::close(fds[1]);
  uint16_t ports[2] = {0, 0};
  if (::read(fds[0], ports, sizeof(ports)) != sizeof(ports) || ports[0] == 0) {
    std::cerr << "bench-transfer: error: the server did not start" << std::endl;
    return 1;
  }
  int code = 0;
  {
    caf::actor_system_config cfg;
    init_config(cfg);
    init_network(cfg, links);
    caf::actor_system sys{cfg};
    guard_links(sys, load_bench_guard(tls_dir, key_file, "bench-transfer"),
                false);
    auto c0 = std::chrono::steady_clock::now();
    auto shard = connect_to<shard_actor>(sys, "127.0.0.1", ports[0],
                                         std::chrono::seconds(10));
    std::printf("connect: %.3f ms\n", std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - c0)
                                        .count());
    if (!shard) {
      std::cerr << "bench-transfer: error: " << describe(shard.error())
                << std::endl;
      ::kill(child, SIGKILL);
      return 1;
    }
    std::shared_ptr<data_client> link;
    shard_data_actor target = *shard;
    if (via != "basp") {
      link = data_client::open(sys, "127.0.0.1", ports[1],
                               std::chrono::seconds(10));
      target = link->stub(0, floats);
    }
    auto grad = std::make_shared<const std::vector<float>>(floats, 1.0f);
    caf::scoped_actor self{sys};
    // Asked as a worker asks (actors/worker/worker.cpp, timeout_per_step):
    // without a timeout of its own. A stub times its requests out itself,
    // and each timeout of the asker's would be an entry on CAF's clock and a
    // wake-up of its thread per request: 0.225 against 0.167 ms per 40 KB
    // pull+push through shared memory (docs/benchmarks.md). The forked
    // shard answers every request; a stub fails those still open when its
    // link breaks. Through BASP nothing fails them if the shard's process
    // dies, so there each request has a timeout: the bench stops with an
    // error rather than hang.
    caf::duration timeout = caf::infinite;
    if (via == "basp")
      timeout = caf::duration{std::chrono::seconds(30)};
    auto round = [&] {
      bool ok = true;
      self->request(target, timeout, pull_atom_v, int32_t{0}, int64_t{0})
        .receive([&](float_block& b) { ok = b.values->size() == floats; },
                 [&](caf::error&) { ok = false; });
      gradient_push g{0, 0, 0, -1, grad, 0, floats};
      self->request(target, timeout, push_atom_v, g)
        .receive([&](push_ack&) {}, [&](caf::error&) { ok = false; });
      return ok;
    };
    bool ok = true;
    for (int i = 0; i < warmup && ok; ++i)
      ok = round();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds && ok; ++i)
      ok = round();
    if (!ok) {
      std::cerr << "bench-transfer: error: a round trip failed" << std::endl;
      code = 1;
    } else {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                               - t0)
                   .count();
      double bytes = 2.0 * 4.0 * static_cast<double>(floats) * rounds;
      std::printf("%zu floats (%.0f KB): %.3f ms per pull+push, %.1f MB/s\n",
                  floats, 4.0 * static_cast<double>(floats) / 1000.0,
                  1000.0 * s / rounds, bytes / s / 1e6);
    }
    if (link)
      link->close();
    self->send_exit(*shard, caf::exit_reason::user_shutdown);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return code;
}

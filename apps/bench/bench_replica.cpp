// bench-replica: how long a shard's new replica takes to come in step
// (cluster.shard_replicas), between two processes on 127.0.0.1. The
// process forks: the child hosts the replica (a shard that follows its
// primary) on the data plane; the parent hosts the primary, whose table
// (--dim floats per row, Adagrad: values and accumulator) it fills with
// --rows rows, then asks the primary for a replica there and times the
// copy until the primary says it is in step. With --pushes N, N row
// pushes of 1000 rows go to the primary while the copy runs (training
// does not stop for it), and their mean time is printed too.
//
//   bench-replica [--rows 1000000] [--dim 16] [--pushes 0]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/net/remote.hpp"
#include "actors/protocol/system_config.hpp"
#include "actors/shard.hpp"
#include "apps/bench/forked_server.hpp"
#include "apps/command_line.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;

namespace {

struct options {
  uint64_t rows = 1000000;
  int dim = 16;
  int pushes = 0;
};

shard_options shard_of(const options& o, bool follower) {
  shard_options so;
  so.initial = {0.f};
  embedding_table_config t;
  t.name = "bench";
  t.vocabulary = uint64_t{1} << 40;
  t.dim = o.dim;
  sparse_optimizer_config adagrad;
  adagrad.type = sparse_optimizer_config::kind::adagrad;
  adagrad.learning_rate = 0.05;
  so.tables = {{t, adagrad}};
  so.follower = follower;
  so.replica_timeout = std::chrono::seconds(600);
  return so;
}

/// The child: the replica on the data plane, until the parent closes the
/// pipe.
int serve(const options& o, int ready_fd, int stop_fd) {
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, cluster_config{});
  caf::actor_system sys{cfg};
  auto replica = sys.spawn(shard_impl, shard_of(o, true));
  return serve_shard_until_stopped(sys, replica, o.dim, ready_fd, stop_fd);
}

int measure(const options& o, uint16_t port) {
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, cluster_config{});
  caf::actor_system sys{cfg};
  shard_actor primary = sys.spawn(shard_impl, shard_of(o, false));
  caf::scoped_actor self{sys};
  const auto timeout = std::chrono::seconds(600);
  std::string failed;
  // The rows, made by pulls as a worker's first touches make them.
  constexpr uint64_t per_pull = 1 << 20;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t first = 0; first < o.rows && failed.empty();
       first += per_pull) {
    std::vector<uint64_t> ids;
    for (uint64_t id = first; id < std::min(o.rows, first + per_pull); ++id)
      ids.push_back(id);
    self->request(primary, timeout, pull_atom_v, row_request{0, 0, 0, ids})
      .receive([](row_block&) {},
               [&](caf::error& err) { failed = describe(err); });
  }
  double fill = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                              - t0)
                  .count();
  shard_stats before;
  self->request(primary, timeout, stats_atom_v)
    .receive([&](shard_stats& s) { before = s; },
             [&](caf::error& err) { failed = describe(err); });
  if (!failed.empty()) {
    std::cerr << "bench-replica: error: " << failed << std::endl;
    return 1;
  }
  auto start = std::chrono::steady_clock::now();
  self
    ->request(primary, timeout, replicate_atom_v, shard_data_actor{},
              "127.0.0.1:" + std::to_string(port))
    .receive([](bool) {}, [&](caf::error& err) { failed = describe(err); });
  // Pushes while the copy runs: rows spread over the whole table.
  double push_seconds = 0;
  auto grads = std::make_shared<const std::vector<float>>(
    1000 * static_cast<size_t>(o.dim), 0.01f);
  for (int p = 0; p < o.pushes && failed.empty(); ++p) {
    std::vector<uint64_t> ids;
    for (uint64_t k = 0; k < 1000; ++k)
      ids.push_back((static_cast<uint64_t>(p) * 7919 + k * 104729) % o.rows);
    auto t = std::chrono::steady_clock::now();
    self
      ->request(primary, timeout, push_atom_v,
                row_push{0, 0, 0, -1, 0, ids, grads})
      .receive([](push_ack&) {},
               [&](caf::error& err) { failed = describe(err); });
    push_seconds += std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t)
                      .count();
  }
  std::string news;
  int64_t version = -2;
  self->receive(
    [&](replicate_atom, int32_t, int64_t v, std::string& text) {
      version = v;
      news = std::move(text);
    },
    caf::after(timeout) >> [&] { news = "no news within 600 s"; });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                           - start)
               .count();
  caf::anon_send_exit(primary, caf::exit_reason::user_shutdown);
  if (!failed.empty() || version < 0) {
    std::cerr << "bench-replica: error: " << (failed.empty() ? news : failed)
              << std::endl;
    return 1;
  }
  double gb = static_cast<double>(before.row_bytes) / 1e9;
  std::printf("%llu rows x %d floats (%.2f GB of values, accumulators and "
              "index) made in %.1f s; the replica in step %.1f s after it "
              "was asked for, %.2f M rows/s (%s)",
              static_cast<unsigned long long>(before.rows), o.dim, gb, fill, s,
              static_cast<double>(before.rows) / s / 1e6, news.c_str());
  if (o.pushes > 0)
    std::printf("; %d row pushes of 1000 rows during the copy, %.2f ms each",
                o.pushes, 1000.0 * push_seconds / o.pushes);
  std::printf("\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"The time a shard's new replica takes to come in step."};
  options o;
  app.add_option("--rows", o.rows, "table rows on the primary")
    ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--dim", o.dim, "floats per row")->check(CLI::Range(1, 4096));
  app.add_option("--pushes", o.pushes, "row pushes while the copy runs")
    ->check(CLI::Range(0, 1000000));
  if (auto code = troupe::parse_command_line(app, argc, argv, "bench-replica"))
    return *code;
  return with_forked_server(
    "bench-replica", "the replica",
    [&](int ready_fd, int stop_fd) { return serve(o, ready_fd, stop_fd); },
    [&](uint16_t port) { return measure(o, port); });
}

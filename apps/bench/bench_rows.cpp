// bench-rows: sparse pulls and pushes of embedding rows between two
// processes on 127.0.0.1, through a real shard actor on the data plane:
// what a worker node does with a shard node's part of an embedding table.
// The process forks: the child hosts one shard with one table (--dim
// floats per row, rows made on first touch, Adagrad), served on the data
// plane; the parent, through a data-plane stub, pulls --ids distinct rows
// and pushes a gradient for each, --rounds times after --warmup untimed
// rounds, and prints rows pulled+pushed per second. Round r's ids are
// bench::row_ids(--seed, r, ...) (bench/row_keys.hpp), the keys ps-lite's
// reference (bench/pslite_rows.cc, scripts/bench-rows.sh) uses. Both sides
// run with the malloc settings of every networked troupe process
// (init_network). With --tls DIR the link is mutual TLS with DIR/ca.pem,
// DIR/bench.pem and DIR/bench.key (scripts/make-certs.sh DIR bench).
//
//   bench-rows [--ids 1000] [--dim 16] [--rounds 200] [--warmup 20]
//              [--vocabulary 50000000] [--seed 1] [--tls DIR]
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
#include "apps/bench/forked_server.hpp"
#include "apps/command_line.hpp"
#include "bench/row_keys.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;

namespace {

struct options {
  size_t ids = 1000;
  int dim = 16;
  int rounds = 200, warmup = 20;
  uint64_t vocabulary = 50000000;
  uint64_t seed = 1;
  std::string tls_dir;
};

/// The child: a shard with the table, on the data plane, until the parent
/// closes the pipe.
int serve(const options& o, int ready_fd, int stop_fd) {
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, cluster_config{});
  caf::actor_system sys{cfg};
  secure_links(sys, load_bench_tls(o.tls_dir, "bench-rows"), false);
  shard_options so;
  so.initial = {0.f};
  embedding_table_config t;
  t.name = "bench";
  t.vocabulary = o.vocabulary;
  t.dim = o.dim;
  sparse_optimizer_config adagrad;
  adagrad.type = sparse_optimizer_config::kind::adagrad;
  adagrad.learning_rate = 0.05;
  so.tables = {{t, adagrad}};
  auto shard = sys.spawn(shard_impl, std::move(so));
  return serve_shard_until_stopped(sys, shard, o.dim, ready_fd, stop_fd);
}

int measure(const options& o, uint16_t port) {
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, cluster_config{});
  caf::actor_system sys{cfg};
  secure_links(sys, load_bench_tls(o.tls_dir, "bench-rows"), false);
  auto link = data_client::open(sys, "127.0.0.1", port,
                                std::chrono::seconds(10));
  auto stub = link->stub(0, 1, {o.dim});
  // Every round's ids and gradients are made before the clock starts.
  std::vector<std::vector<uint64_t>> ids;
  for (int r = 0; r < o.warmup + o.rounds; ++r)
    ids.push_back(bench::row_ids(o.seed, r, o.ids, o.vocabulary));
  auto grads = std::make_shared<const std::vector<float>>(
    o.ids * static_cast<size_t>(o.dim), 0.01f);
  caf::scoped_actor self{sys};
  const auto timeout = std::chrono::seconds(120);
  std::string failed;
  // A worker's order: the batch's rows, then their gradients.
  auto round = [&](int r) {
    self->request(stub, timeout, pull_atom_v, row_request{0, 0, 0, ids[r]})
      .receive(
        [&](row_block& b) {
          if (b.values->size() != o.ids * static_cast<size_t>(o.dim))
            failed = "a pull answered " + std::to_string(b.values->size())
                     + " floats";
        },
        [&](caf::error& err) { failed = describe(err); });
    self
      ->request(stub, timeout, push_atom_v,
                row_push{0, 0, 0, -1, 0, ids[r], grads})
      .receive([](push_ack&) {},
               [&](caf::error& err) { failed = describe(err); });
    return failed.empty();
  };
  int r = 0;
  for (; r < o.warmup; ++r)
    if (!round(r))
      break;
  auto t0 = std::chrono::steady_clock::now();
  for (; r < o.warmup + o.rounds && failed.empty(); ++r)
    round(r);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                           - t0)
               .count();
  link->close();
  if (!failed.empty()) {
    std::cerr << "bench-rows: error: " << failed << std::endl;
    return 1;
  }
  double rows = 2.0 * static_cast<double>(o.ids) * o.rounds;
  std::printf("%zu ids x %d floats: %.3f ms per pull+push, %.2f M rows/s "
              "pulled+pushed\n",
              o.ids, o.dim, 1000.0 * s / o.rounds, rows / s / 1e6);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sparse row pulls and pushes between two processes on "
               "127.0.0.1."};
  options o;
  app.add_option("--ids", o.ids, "distinct row ids per pull and per push")
    ->check(CLI::Range(size_t{1}, size_t{1} << 22));
  app.add_option("--dim", o.dim, "floats per row")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", o.rounds, "timed pull+push rounds")
    ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", o.warmup, "untimed rounds first")
    ->check(CLI::Range(0, 100000));
  app.add_option("--vocabulary", o.vocabulary, "ids are drawn below this")
    ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--seed", o.seed, "of the ids");
  app.add_option("--tls", o.tls_dir,
                 "mutual TLS with DIR/ca.pem, DIR/bench.pem, DIR/bench.key");
  if (auto code = troupe::parse_command_line(app, argc, argv, "bench-rows"))
    return *code;
  if (o.ids > o.vocabulary) {
    std::cerr << "bench-rows: error: --ids " << o.ids
              << " is more than the vocabulary " << o.vocabulary << std::endl;
    return 2;
  }
  // Bad files: one error, before the fork.
  load_bench_tls(o.tls_dir, "bench-rows");
  return with_forked_server(
    "bench-rows", "the server",
    [&](int ready_fd, int stop_fd) { return serve(o, ready_fd, stop_fd); },
    [&](uint16_t port) { return measure(o, port); });
}

// bench-sparse-table: the shard-side store of a sparse embedding table in
// one process, without actors or sockets. Fills `--shards` tables with
// `--rows` rows in all (each row on the shard shard_of_row picks, as a
// cluster would place them), reports each shard's memory and the time to
// fill, then times pulls and pushes (Adagrad) of batches of distinct ids
// drawn uniformly from the filled rows: rows pulled+pushed per second per
// shard, the figure a shard's actor and sockets can at best approach.
//
//   bench-sparse-table [--rows 1000000] [--dim 16] [--shards 4]
//                      [--batches 1000,100000] [--seconds 2]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "apps/command_line.hpp"
#include "runtime/base/random.hpp"
#include "runtime/sparse/sparse_table.hpp"

using namespace troupe;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// Resident memory of this process, from /proc/self/statm.
double resident_gib() {
  std::ifstream statm{"/proc/self/statm"};
  long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * sysconf(_SC_PAGESIZE) / (1 << 30);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pull and push rates of troupe's sparse table store."};
  uint64_t rows = 1000000;
  int dim = 16, shards = 4;
  double seconds = 2;
  std::vector<int> batches{1000, 100000};
  app.add_option("--rows", rows, "rows in all")->check(CLI::Range(1, 1 << 30));
  app.add_option("--dim", dim, "floats per row")->check(CLI::Range(1, 4096));
  app.add_option("--shards", shards, "tables")->check(CLI::Range(1, 64));
  app.add_option("--batches", batches, "distinct ids per pull and push")
    ->delimiter(',')
    ->check(CLI::Range(1, 10000000));
  app.add_option("--seconds", seconds, "time per batch size and shard")
    ->check(CLI::PositiveNumber);
  if (auto code = troupe::parse_command_line(app, argc, argv,
                                             "bench-sparse-table"))
    return *code;

  embedding_table_config t;
  t.name = "bench";
  t.vocabulary = uint64_t{1} << 40;
  t.dim = dim;
  sparse_optimizer_config opt; // adagrad
  std::vector<std::unique_ptr<sparse_table>> tables;
  for (int s = 0; s < shards; ++s)
    tables.push_back(std::make_unique<sparse_table>(t, opt));
  // Ids spread over 2^40, as hashed values are; row k's id is mix64(k).
  std::vector<std::vector<uint64_t>> ids_of(static_cast<size_t>(shards));
  auto fill_start = clock_type::now();
  std::vector<float> row(static_cast<size_t>(dim));
  for (uint64_t k = 0; k < rows; ++k) {
    uint64_t id = mix64(k) >> 24;
    auto s = static_cast<size_t>(shard_of_row(id, shards));
    (void)tables[s]->pull(&id, 1, row.data());
    ids_of[s].push_back(id);
  }
  double fill = seconds_since(fill_start);
  std::printf("%llu rows x %d floats on %d shards, filled in %.1f s "
              "(%.2f M rows/s); process resident %.2f GiB\n",
              static_cast<unsigned long long>(rows), dim, shards, fill,
              static_cast<double>(rows) / fill / 1e6, resident_gib());
  for (int s = 0; s < shards; ++s)
    std::printf("  shard %d: %zu rows, %.2f GiB (values, accumulator, "
                "index)\n",
                s, tables[static_cast<size_t>(s)]->rows(),
                static_cast<double>(
                  tables[static_cast<size_t>(s)]->memory_bytes())
                  / (1 << 30));
  std::printf("%-10s %-6s %14s %14s\n", "batch", "shard", "pull rows/s",
              "push rows/s");
  splitmix64 rng{1};
  for (int batch : batches) {
    for (int s = 0; s < shards; ++s) {
      auto& table = *tables[static_cast<size_t>(s)];
      auto& have = ids_of[static_cast<size_t>(s)];
      auto n = std::min<size_t>(static_cast<size_t>(batch), have.size());
      // Distinct ids: a random window of the shard's rows.
      std::vector<uint64_t> ids(n);
      std::vector<float> values(n * static_cast<size_t>(dim));
      std::vector<float> grads(values.size(), 0.01f);
      double pulled = 0, pushed = 0, pull_s = 0, push_s = 0;
      auto start = clock_type::now();
      while (seconds_since(start) < seconds) {
        auto first = rng.below(have.size() - n + 1);
        std::copy_n(have.begin() + static_cast<ptrdiff_t>(first), n,
                    ids.begin());
        auto t0 = clock_type::now();
        (void)table.pull(ids.data(), n, values.data());
        auto t1 = clock_type::now();
        (void)table.push(ids.data(), n, grads.data());
        auto t2 = clock_type::now();
        pull_s += std::chrono::duration<double>(t1 - t0).count();
        push_s += std::chrono::duration<double>(t2 - t1).count();
        pulled += static_cast<double>(n);
        pushed += static_cast<double>(n);
      }
      std::printf("%-10zu %-6d %14.0f %14.0f\n", n, s, pulled / pull_s,
                  pushed / push_s);
    }
  }
  return 0;
}

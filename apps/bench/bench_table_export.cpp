// bench-table-export: a delta export of a large table against its full
// export, in one process (the shard-side cut and the file; a cluster's
// chief adds the pieces' messages). Fills `--shards` tables (Adagrad, rows
// keeping what changed them) with `--rows` rows in all, writes a full
// export, pushes to `--changed` of the rows (a fraction, drawn at random),
// then writes the delta, and reports each one's seconds and bytes and the
// delta's share of the full export's size; the delta is read back against
// the tables when `--check` is given.
//
//   bench-table-export [--rows 50000000] [--dim 16] [--shards 4]
//                      [--changed 0.01] [--dir DIR] [--check]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apps/command_line.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/random.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_export.hpp"

using namespace troupe;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// Pushes a small gradient to `ids` (each on its shard), a batch at a time.
void push_rows(std::vector<std::unique_ptr<sparse_table>>& tables,
               const std::vector<uint64_t>& ids, int dim) {
  const auto shards = static_cast<int32_t>(tables.size());
  std::vector<std::vector<uint64_t>> batch(tables.size());
  std::vector<float> grads;
  auto flush = [&](size_t s) {
    grads.assign(batch[s].size() * static_cast<size_t>(dim), 0.01f);
    if (auto err = tables[s]->push(batch[s].data(), batch[s].size(),
                                   grads.data()))
      std::fprintf(stderr, "push: %s\n", describe(err).c_str());
    batch[s].clear();
  };
  for (auto id : ids) {
    auto s = static_cast<size_t>(shard_of_row(id, shards));
    batch[s].push_back(id);
    if (batch[s].size() == 65536)
      flush(s);
  }
  for (size_t s = 0; s < tables.size(); ++s)
    if (!batch[s].empty())
      flush(s);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"A delta export of a large table against its full export."};
  uint64_t rows = 50000000;
  int dim = 16, shards = 4;
  double changed = 0.01;
  std::string dir = "bench-table-export";
  bool check = false;
  app.add_option("--rows", rows, "rows in all")->check(CLI::Range(1, 1 << 30));
  app.add_option("--dim", dim, "floats per row")->check(CLI::Range(1, 4096));
  app.add_option("--shards", shards, "tables")->check(CLI::Range(1, 64));
  app.add_option("--changed", changed, "share of the rows the delta holds")
    ->check(CLI::Range(0.0, 1.0));
  app.add_option("--dir", dir, "the export folder (made, then removed)");
  app.add_flag("--check", check, "read the chain back against the tables");
  if (auto code = troupe::parse_command_line(app, argc, argv,
                                             "bench-table-export"))
    return *code;
  std::filesystem::create_directories(dir);
  embedding_table_config t;
  t.name = "items";
  t.vocabulary = uint64_t{1} << 40;
  t.dim = dim;
  t.changes = true;
  sparse_optimizer_config adagrad;
  std::vector<std::unique_ptr<sparse_table>> tables;
  std::vector<sparse_table*> parts;
  for (int s = 0; s < shards; ++s) {
    tables.push_back(std::make_unique<sparse_table>(t, adagrad));
    parts.push_back(tables.back().get());
  }
  // Ids spread over a wide range, as a reader's hashes are.
  std::vector<uint64_t> ids(rows);
  for (uint64_t i = 0; i < rows; ++i)
    ids[i] = mix64(i) >> 24;
  auto began = clock_type::now();
  push_rows(tables, ids, dim);
  std::printf("filled %llu rows of dim %d on %d shards in %.1f s\n",
              static_cast<unsigned long long>(rows), dim, shards,
              seconds_since(began));
  began = clock_type::now();
  auto full = write_table_export(dir, parts, 0, {});
  if (!full) {
    std::fprintf(stderr, "%s\n", describe(full.error()).c_str());
    return 1;
  }
  const double full_s = seconds_since(began);
  std::vector<int64_t> since;
  for (auto* p : parts)
    since.push_back(p->pushes());
  splitmix64 rng{7};
  std::vector<uint64_t> some;
  for (uint64_t i = 0; i < rows; ++i)
    if (rng.uniform01() < changed)
      some.push_back(ids[i]);
  push_rows(tables, some, dim);
  began = clock_type::now();
  auto delta = write_table_export(dir, parts, 1, since);
  if (!delta) {
    std::fprintf(stderr, "%s\n", describe(delta.error()).c_str());
    return 1;
  }
  const double delta_s = seconds_since(began);
  std::printf("full export:  %llu rows, %.1f MB in %.2f s\n",
              static_cast<unsigned long long>(full->rows),
              static_cast<double>(full->bytes) / 1e6, full_s);
  std::printf("delta export: %llu rows (%.2f%%), %.1f MB in %.2f s: %.2f%% "
              "of the full export's size\n",
              static_cast<unsigned long long>(delta->rows),
              100.0 * static_cast<double>(delta->rows)
                / static_cast<double>(full->rows),
              static_cast<double>(delta->bytes) / 1e6, delta_s,
              100.0 * static_cast<double>(delta->bytes)
                / static_cast<double>(full->bytes));
  int status = 0;
  if (check) {
    export_manifest m;
    m.exports = {*full, *delta};
    if (auto err = write_export_manifest(dir, m)) {
      std::fprintf(stderr, "%s\n", describe(err).c_str());
      return 1;
    }
    auto got = read_exported_table(dir, "items");
    size_t same = 0;
    if (got) {
      for (size_t i = 0; i < got->ids.size(); ++i) {
        auto s = static_cast<size_t>(
          shard_of_row(got->ids[i], static_cast<int32_t>(tables.size())));
        const float* r = tables[s]->row(got->ids[i]);
        same += r != nullptr
                && std::memcmp(r, got->values.data() + i * dim,
                               static_cast<size_t>(dim) * sizeof(float))
                     == 0;
      }
    }
    size_t held = 0;
    for (auto& tb : tables)
      held += tb->rows();
    bool ok = got && same == held && got->ids.size() == held;
    std::printf("read back: %s\n",
                ok ? "every row as the tables hold it" : "DIFFERS");
    status = ok ? 0 : 1;
  }
  std::filesystem::remove_all(dir);
  return status;
}

// ps-lite reference for apps/bench/bench_rows.cpp: sparse pulls and pushes of
// embedding rows between one ps-lite worker and one server (plus ps-lite's
// scheduler), three processes on 127.0.0.1, through ps-lite's KV API (ZMQ
// van): ZPull of --ids distinct keys, each a row of --dim floats, then
// ZPush of a gradient for each, --rounds times after --warmup untimed
// rounds. Round r's keys are bench::row_ids(--seed, r, ...)
// (bench/row_keys.hpp), the ones bench-rows uses. Prints bench-rows' line.
// Built against ps-lite by scripts/build-pslite.sh, never as part of
// troupe; run by scripts/bench-rows.sh.
//
// The server does the work a troupe shard does for the same requests:
// rows in a hash map keyed by id, made on first touch with values drawn
// from the id, Adagrad (accumulator from 0.1) on each pushed row, and the
// pulled rows copied into the response. ps-lite's own
// KVServerDefaultHandle keeps one float per key and adds pushes; it has no
// rows, no creation and no optimizer, so it would do less than a shard.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "bench/pslite_node.hpp"
#include "bench/row_keys.hpp"
#include "ps/ps.h"

namespace {

struct options {
  size_t ids = 1000;
  int dim = 16;
  int rounds = 200;
  int warmup = 20;
  uint64_t vocabulary = 50000000;
  uint64_t seed = 1;
};

bool parse(int argc, char** argv, options& o) {
  if (!bench::parse_options("pslite_rows", argc, argv, 0,
                            {bench::option("--ids", o.ids),
                             bench::option("--dim", o.dim),
                             bench::option("--rounds", o.rounds),
                             bench::option("--warmup", o.warmup),
                             bench::option("--vocabulary", o.vocabulary),
                             bench::option("--seed", o.seed)}))
    return false;
  if (o.ids < 1 || o.dim < 1 || o.rounds < 1 || o.vocabulary < o.ids) {
    std::fprintf(stderr, "pslite_rows: need 1 <= ids <= vocabulary, dim and "
                         "rounds >= 1\n");
    return false;
  }
  return true;
}

/// A row's values and Adagrad accumulator.
struct row {
  std::vector<float> w, acc;
};

/// Embedding rows by key: made on first touch, Adagrad on push.
struct rows_handle {
  int dim;
  float lr = 0.05f;
  std::unordered_map<ps::Key, row> rows;

  row& touch(ps::Key k) {
    auto it = rows.find(k);
    if (it != rows.end())
      return it->second;
    row r;
    r.w.resize(dim);
    r.acc.assign(dim, 0.1f);
    // Uniform in [-0.05, 0.05) from the key (splitmix64), as a troupe
    // table draws a row from its id.
    uint64_t x = k * 0x9e3779b97f4a7c15ull;
    for (int j = 0; j < dim; ++j) {
      x += 0x9e3779b97f4a7c15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      r.w[j] = static_cast<float>((z >> 40) * (1.0 / (1ull << 24)) * 0.1
                                  - 0.05);
    }
    return rows.emplace(k, std::move(r)).first->second;
  }

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& req,
                  ps::KVServer<float>* server) {
    const size_t n = req.keys.size();
    ps::KVPairs<float> res;
    if (meta.push) {
      CHECK_EQ(req.vals.size(), n * dim) << "a push of the wrong size";
      for (size_t i = 0; i < n; ++i) {
        row& r = touch(req.keys[i]);
        const float* g = req.vals.data() + i * dim;
        for (int j = 0; j < dim; ++j) {
          r.acc[j] += g[j] * g[j];
          r.w[j] -= lr * g[j] / std::sqrt(r.acc[j]);
        }
      }
    }
    if (meta.pull) {
      res.keys = req.keys;
      res.vals.resize(n * dim);
      for (size_t i = 0; i < n; ++i)
        std::memcpy(res.vals.data() + i * dim, touch(req.keys[i]).w.data(),
                    dim * sizeof(float));
    }
    server->Response(meta, res);
  }
};

int run_worker(const options& o) {
  ps::KVWorker<float> kv(0, 0);
  std::vector<std::vector<ps::Key>> keys;
  for (int r = 0; r < o.warmup + o.rounds; ++r) {
    auto ids = bench::row_ids(o.seed, r, o.ids, o.vocabulary);
    keys.emplace_back(ids.begin(), ids.end());
  }
  const size_t n = o.ids * o.dim;
  std::vector<float> grad(n, 0.01f), out(n, 0.0f);
  ps::SArray<float> push_vals(grad.data(), n);
  ps::SArray<float> pull_vals(out.data(), n);
  double s = bench::timed_rounds(o.warmup, o.rounds, [&](int r) {
    // Views on the buffers above: ps-lite neither copies nor frees them.
    ps::SArray<ps::Key> k(keys[r].data(), keys[r].size());
    kv.Wait(kv.ZPull(k, &pull_vals));
    kv.Wait(kv.ZPush(k, push_vals));
  });
  if (pull_vals.size() != n || !(std::fabs(out[0]) <= 0.06f)) {
    std::fprintf(stderr, "pslite_rows: error: pulled %zu floats, first %g\n",
                 pull_vals.size(), out[0]);
    return 1;
  }
  double rows = 2.0 * static_cast<double>(o.ids) * o.rounds;
  std::printf("%zu ids x %d floats: %.3f ms per pull+push, %.2f M rows/s "
              "pulled+pushed\n",
              o.ids, o.dim, 1000.0 * s / o.rounds, rows / s / 1e6);
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: DMLC_ROLE=... %s [--ids N] [--dim D] [--rounds R] "
                 "[--warmup W] [--vocabulary V] [--seed S]\n",
                 argv[0]);
    return 2;
  }
  return bench::run_node(argv[0], rows_handle{o.dim},
                         [&o] { return run_worker(o); });
}

// ps-lite reference for apps/bench/bench_transfer.cpp: push+pull round trips of
// a float buffer between one worker and one server through ps-lite's KV API
// (ZMQ van). One binary for every role; ps-lite reads the role from
// DMLC_ROLE (scheduler, server, worker) and the cluster from the other
// DMLC_* variables (scripts/bench-pslite.sh sets them). Built against
// ps-lite by scripts/build-pslite.sh, never as part of troupe.
//
// The worker pushes --floats values and pulls them back, waiting for each
// (kv.Wait), --warmup times untimed and then --rounds times timed, and
// prints the same line as bench-transfer, where MB/s counts 2 * 4 * floats
// bytes per round.
//
// Layout: by default one key holding all the floats, so the values travel
// as one contiguous block (how MXNet's and BytePS's ps-lite stores hold a
// tensor, and what KVPairs allows: a value may be longer than one float).
// ps-lite's tests (test_kv_app*.cc) use one key per float instead, which
// also sends 8 key bytes per 4 value bytes and makes the server's work a
// per-key hash map; --keys K splits the block into K keys of equal lengths
// (or almost equal ones, given as lens), to measure that cost.
//
// Zero-copy where ps-lite allows it: ZPush and ZPull over SArrays that wrap
// the worker's own buffers; the server replies to a pull with its stored
// SArray. What ps-lite still copies: ZMQ receives into a buffer it mallocs
// per message, and the worker's pull callback memcpys from it into the
// destination.
//
// The server keeps one contiguous buffer for the key set it is sent (the
// first push copies it in, later pushes add, like ps-lite's
// KVServerDefaultHandle, which does the same per key in a hash map).
#include <cstdio>
#include <vector>

#include "bench/pslite_node.hpp"
#include "ps/ps.h"

namespace {

struct options {
  size_t floats = 1000000;
  int rounds = 20;
  int warmup = 3;
  size_t keys = 1;
};

bool parse(int argc, char** argv, options& o) {
  if (!bench::parse_options("pslite_roundtrip", argc, argv, 1,
                            {bench::option("--floats", o.floats),
                             bench::option("--rounds", o.rounds),
                             bench::option("--warmup", o.warmup),
                             bench::option("--keys", o.keys)}))
    return false;
  // ps-lite keeps message sizes in int (Meta::data_size, ZMQVan::SendMsg).
  if (o.floats > (size_t{1} << 28) || o.keys > o.floats) {
    std::fprintf(stderr,
                 "pslite_roundtrip: need 1 <= keys <= floats <= 2^28\n");
    return false;
  }
  return true;
}

/// Stores the values of one key set contiguously; pushes add, pulls return
/// the stored block without copying it.
struct store_handle {
  ps::SArray<ps::Key> keys;
  ps::SArray<float> vals;
  ps::SArray<int> lens;

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& req,
                  ps::KVServer<float>* server) {
    if (meta.push) {
      if (vals.empty()) {
        keys.CopyFrom(req.keys);
        vals.CopyFrom(req.vals);
        lens.CopyFrom(req.lens);
      } else {
        CHECK_EQ(req.keys.size(), keys.size()) << "another key set";
        CHECK_EQ(req.vals.size(), vals.size()) << "another value size";
        float* dst = vals.data();
        const float* src = req.vals.data();
        for (size_t i = 0, n = vals.size(); i < n; ++i)
          dst[i] += src[i];
      }
    }
    ps::KVPairs<float> res;
    if (meta.pull) {
      CHECK(!vals.empty()) << "pull before the first push";
      CHECK_EQ(req.keys.size(), keys.size()) << "another key set";
      res.keys = req.keys; // shares the request's buffer
      res.vals = vals;     // shares the store: no copy
      res.lens = lens;     // empty unless the lengths differ
    }
    server->Response(meta, res);
  }
};

int run_worker(const options& o) {
  ps::KVWorker<float> kv(0, 0);
  const size_t n = o.floats, k = o.keys;
  std::vector<ps::Key> key_buf(k);
  std::vector<int> len_buf;
  for (size_t i = 0; i < k; ++i)
    key_buf[i] = i;
  // lens only when the keys' lengths differ; else ps-lite derives them.
  if (n % k != 0)
    for (size_t i = 0; i < k; ++i)
      len_buf.push_back(static_cast<int>(n / k + (i < n % k ? 1 : 0)));
  std::vector<float> grad(n, 1.0f), out(n, 0.0f);
  // Views on the buffers above: ps-lite neither copies nor frees them.
  ps::SArray<ps::Key> keys(key_buf.data(), k);
  ps::SArray<int> lens(len_buf.data(), len_buf.size());
  ps::SArray<float> push_vals(grad.data(), n);
  ps::SArray<float> pull_vals(out.data(), n);
  double s = bench::timed_rounds(o.warmup, o.rounds, [&](int) {
    kv.Wait(kv.ZPush(keys, push_vals, lens));
    kv.Wait(kv.ZPull(keys, &pull_vals));
  });
  // The first push stores 1s, each later one adds 1s.
  const float expect = static_cast<float>(o.warmup + o.rounds);
  if (pull_vals.data() != out.data() || out[0] != expect
      || out[n - 1] != expect) {
    std::fprintf(stderr,
                 "pslite_roundtrip: error: pulled %g and %g, expected %g\n",
                 out[0], out[n - 1], expect);
    return 1;
  }
  double bytes = 2.0 * 4.0 * static_cast<double>(n) * o.rounds;
  std::printf("%zu floats (%.0f KB): %.3f ms per pull+push, %.1f MB/s\n", n,
              4.0 * static_cast<double>(n) / 1000.0, 1000.0 * s / o.rounds,
              bytes / s / 1e6);
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: DMLC_ROLE=... %s [--floats N] [--rounds R] "
                 "[--warmup W] [--keys K]\n",
                 argv[0]);
    return 2;
  }
  return bench::run_node(argv[0], store_handle{},
                         [&o] { return run_worker(o); });
}

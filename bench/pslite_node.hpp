// What the ps-lite reference programs share (bench/pslite_roundtrip.cc,
// bench/pslite_rows.cc): their options, all "--name N" with a whole number;
// the worker's warm-up and timed rounds; and the node every role runs, one
// binary for the scheduler, the server and the worker, which ps-lite tells
// apart by DMLC_ROLE. Header-only C++14: the references are built apart
// from troupe, against ps-lite (scripts/build-pslite.sh).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>

#include "ps/ps.h"

namespace bench {

/// An option "--name N" and what takes its value.
struct int_option {
  const char* name;
  std::function<void(long long)> set;
};

/// The option `name` whose value goes to `field`.
template <class T>
int_option option(const char* name, T& field) {
  return {name, [&field](long long v) { field = static_cast<T>(v); }};
}

/// Reads argv as "--name N" pairs of `options`, each N a whole number of at
/// least `min_value`. False for -h or --help, and, with a message on stderr
/// that starts with `program`, for an option it does not know, one without
/// a value or a value it does not take.
inline bool parse_options(const char* program, int argc, char** argv,
                          long long min_value,
                          std::initializer_list<int_option> options) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help")
      return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
      return false;
    }
    char* end = nullptr;
    long long v = std::strtoll(argv[++i], &end, 10);
    if (*end != '\0' || v < min_value) {
      std::fprintf(stderr, "%s: bad value for %s\n", program, a.c_str());
      return false;
    }
    bool known = false;
    for (const auto& o : options)
      if (a == o.name) {
        o.set(v);
        known = true;
      }
    if (!known) {
      std::fprintf(stderr, "%s: unknown option %s\n", program, a.c_str());
      return false;
    }
  }
  return true;
}

/// Calls round(r) for r = 0 .. warmup - 1 untimed, then for the next
/// `rounds` r; returns the seconds those took.
template <class Round>
double timed_rounds(int warmup, int rounds, Round round) {
  int r = 0;
  for (; r < warmup; ++r)
    round(r);
  auto t0 = std::chrono::steady_clock::now();
  for (; r < warmup + rounds; ++r)
    round(r);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
    .count();
}

/// Runs this process's node of the ps-lite cluster the DMLC_* variables
/// describe: a server answers with `handle` (a KVServer<float> request
/// handle), a worker runs `work`, whose exit code this returns (0 for the
/// other roles).
template <class Handle, class Work>
int run_node(const char* argv0, Handle handle, Work work) {
  ps::Start(0, argv0);
  if (ps::IsServer()) {
    auto server = new ps::KVServer<float>(0);
    server->set_request_handle(handle);
    ps::RegisterExitCallback([server] { delete server; });
  }
  // ps-lite's KVServer starts taking requests in its constructor, before
  // set_request_handle (its tests race the same way: "Check failed:
  // request_handle_" when the worker's first push wins); one more barrier
  // of all nodes keeps the worker back until the handle is in place.
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup
                                      + ps::kScheduler);
  int code = 0;
  if (ps::IsWorker())
    code = work();
  ps::Finalize(0, true);
  return code;
}

} // namespace bench

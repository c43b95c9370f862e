// bench-shard: how fast one parameter shard applies pushes, next to a
// memcpy of the same bytes, and how many minor page faults each update
// costs. Runs runtime/param_block (the shard's rules without the actor), in
// two cases per size: no pull holding the values (the update is in place),
// and a pull holding them during every push (async workers pull while
// others push: the shard clones its values first, copy on write). The
// process's malloc is either glibc's default or set as every troupe
// process sets it (--keep-freed-memory, runtime/buffer_pool.hpp).
//
//   bench-shard [--optimizer adam|sgd|momentum] [--sizes 58786,235146]
//               [--updates N] [--keep-freed-memory]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/buffer_pool.hpp"
#include "runtime/param_block.hpp"
#include "runtime/random.hpp"

using namespace troupe;

namespace {

using clock_type = std::chrono::steady_clock;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct figure {
  double us = 0;      ///< per update
  double faults = 0;  ///< minor faults per update
};

/// Times `updates` calls of `step` after a warm-up of a tenth as many.
template <class Step>
figure measure(int updates, Step step) {
  for (int i = 0; i < updates / 10 + 1; ++i)
    step(i);
  auto f0 = minor_faults();
  auto t0 = clock_type::now();
  for (int i = 0; i < updates; ++i)
    step(i);
  auto t1 = clock_type::now();
  auto f1 = minor_faults();
  return {std::chrono::duration<double, std::micro>(t1 - t0).count() / updates,
          static_cast<double>(f1 - f0) / updates};
}

std::vector<size_t> parse_sizes(const std::string& text) {
  std::vector<size_t> out;
  std::stringstream in{text};
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(static_cast<size_t>(std::stoull(item)));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Updates per second of one parameter shard, next to memcpy."};
  std::string opt = "adam", sizes_text = "58786,235146,1048576";
  int updates = 2000;
  bool keep_freed = false;
  app.add_option("--optimizer", opt, "adam, sgd or momentum")
    ->check(CLI::IsMember({"adam", "sgd", "momentum"}));
  app.add_option("--sizes", sizes_text,
                 "floats per shard, comma-separated (58786: a quarter of "
                 "the MLP 784-256-128-10)");
  app.add_option("--updates", updates, "timed updates per case")
    ->check(CLI::PositiveNumber);
  app.add_flag("--keep-freed-memory", keep_freed,
               "malloc as every troupe process sets it (one arena, "
               "never trimmed, no mmap'd blocks; without: glibc's defaults)");
  CLI11_PARSE(app, argc, argv);
  if (keep_freed)
    keep_freed_memory();
  std::printf("%-9s %9s %12s %12s %8s %14s %8s %14s\n", "optimizer", "floats",
              "memcpy us", "apply us", "x memcpy", "faults/update",
              "cow us", "faults/update");
  for (auto n : parse_sizes(sizes_text)) {
    param_block::options o;
    o.mode = cluster_config::mode::async;
    o.optimizer.type = opt == "adam"       ? optimizer_config::kind::adam
                       : opt == "momentum" ? optimizer_config::kind::momentum
                                           : optimizer_config::kind::sgd;
    o.optimizer.learning_rate = 1e-4;
    std::vector<float> init(n), grad(n), dst(n);
    splitmix64 r{7};
    for (auto& x : init)
      x = static_cast<float>(r.uniform01() * 2 - 1);
    for (auto& x : grad)
      x = static_cast<float>((r.uniform01() * 2 - 1) * 1e-3);
    auto copy = measure(updates, [&](int) {
      std::memcpy(dst.data(), init.data(), n * sizeof(float));
      asm volatile("" ::"r"(dst.data()) : "memory");
    });
    param_block in_place{o, init};
    in_place.add_worker(0);
    int64_t batch = 0;
    auto apply = measure(updates, [&](int) {
      in_place.push(0, 0, grad.data(), n, batch++);
    });
    param_block shared{o, init};
    shared.add_worker(0);
    batch = 0;
    auto cow = measure(updates, [&](int) {
      auto pulled = shared.values(); // a worker's pull holds them
      shared.push(0, 0, grad.data(), n, batch++);
    });
    std::printf("%-9s %9zu %12.2f %12.2f %8.2f %14.2f %8.2f %14.2f\n",
                opt.c_str(), n, copy.us, apply.us, apply.us / copy.us,
                apply.faults, cow.us, cow.faults);
  }
  return 0;
}

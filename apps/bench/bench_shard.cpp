// bench-shard: how fast one parameter shard applies pushes, next to a
// memcpy of the same bytes, and how many minor page faults each update
// costs. Runs runtime/params/param_block (the shard's rules without the actor),
// in two cases per size: no pull holding the values (the update is in place),
// and a pull holding them during every push (async workers pull while
// others push: the shard clones its values first, copy on write). The
// process's malloc is either glibc's default or set as every troupe
// process sets it (--keep-freed-memory, runtime/params/buffer_pool.hpp).
//
// Two memcpy figures: of the values alone, and of every array the update
// streams (values, gradient and the optimizer's slots: four for Adam),
// the same bytes the update reads.
// --zero-gradients F zeroes a fraction of the gradient, in runs of 256
// floats, after the slots have filled, as blank input pixels and dead
// units do in real training; their slots then decay into denormals, which
// the optimizer flushes unless --keep-denormals
// (runtime/base/flush_denormals.hpp).
//
//   bench-shard [--optimizer adam|sgd|momentum] [--sizes 58786,235146]
//               [--updates N] [--keep-freed-memory] [--zero-gradients F]
//               [--keep-denormals]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "apps/command_line.hpp"
#include "runtime/params/buffer_pool.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/base/random.hpp"

using namespace troupe;

namespace {

using clock_type = std::chrono::steady_clock;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct figure {
  double us = 0;     ///< per update
  double faults = 0; ///< minor faults per update
};

/// Times `updates` calls of `step` after a warm-up of a tenth as many, in
/// 20 chunks, and reports the fastest chunk: on a shared machine a
/// neighbour's burst slows some chunks, never speeds one up. Faults count
/// over all chunks.
template <class Step>
figure measure(int updates, Step step) {
  for (int i = 0; i < updates / 10 + 1; ++i)
    step(i);
  constexpr int chunks = 20;
  const int per_chunk = updates / chunks + 1;
  double best_us = 0;
  auto f0 = minor_faults();
  for (int c = 0; c < chunks; ++c) {
    auto t0 = clock_type::now();
    for (int i = 0; i < per_chunk; ++i)
      step(i);
    auto t1 = clock_type::now();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count()
                / per_chunk;
    if (c == 0 || us < best_us)
      best_us = us;
  }
  auto f1 = minor_faults();
  return {best_us, static_cast<double>(f1 - f0)
                     / (static_cast<double>(chunks) * per_chunk)};
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
  bool keep_denormals = false;
  double zero_fraction = 0;
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
  app
    .add_option("--zero-gradients", zero_fraction,
                "fraction of the gradient that turns zero after the "
                "optimizer's slots have filled")
    ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--keep-denormals", keep_denormals,
               "run the update without flushing denormals to zero");
  if (auto code = troupe::parse_command_line(app, argc, argv, "bench-shard"))
    return *code;
  if (keep_freed)
    keep_freed_memory();
  std::printf("%-9s %9s %10s %10s %10s %8s %8s %14s %8s %14s\n", "optimizer",
              "floats", "memcpy us", "all us", "apply us", "x memcpy", "x all",
              "faults/update", "cow us", "faults/update");
  for (auto n : parse_sizes(sizes_text)) {
    param_block::options o;
    o.mode = consistency_mode::async;
    o.optimizer.type = opt == "adam"       ? optimizer_config::kind::adam
                       : opt == "momentum" ? optimizer_config::kind::momentum
                                           : optimizer_config::kind::sgd;
    o.optimizer.learning_rate = 1e-4;
    o.optimizer.flush_denormals = !keep_denormals;
    const size_t arrays = 2 + optimizer{o.optimizer, 0}.slots().size();
    std::vector<float> init(n), grad(n), dst(n), all_src(arrays * n);
    splitmix64 r{7};
    for (auto& x : init)
      x = static_cast<float>(r.uniform01() * 2 - 1);
    for (auto& x : grad)
      x = static_cast<float>((r.uniform01() * 2 - 1) * 1e-3);
    auto copy = measure(updates, [&](int) {
      std::memcpy(dst.data(), init.data(), n * sizeof(float));
      asm volatile("" ::"r"(dst.data()) : "memory");
    });
    // One memcpy per array into the same destination: it reads what the
    // update reads from a working set of about the update's size (a copy
    // of the whole into a second set would need twice the cache, and cross
    // glibc's threshold for non-temporal stores at large sizes).
    auto copy_all = measure(updates, [&](int) {
      for (size_t a = 0; a < arrays; ++a)
        std::memcpy(dst.data(), all_src.data() + a * n, n * sizeof(float));
      asm volatile("" ::"r"(dst.data()) : "memory");
    });
    std::vector<float> settled_grad = grad;
    for (size_t i = 0; i < n; ++i)
      if (static_cast<double>(i / 256 % 100) < zero_fraction * 100)
        settled_grad[i] = 0;
    // Fills the slots with the full gradient, then lets the zeroed part
    // decay for 1000 updates (0.9^1000 takes Adam's m below 1e-45).
    auto settle = [&](param_block& b, int64_t& batch) {
      if (zero_fraction == 0)
        return;
      for (int i = 0; i < 50; ++i)
        b.push(0, 0, grad.data(), n, batch++);
      for (int i = 0; i < 1000; ++i)
        b.push(0, 0, settled_grad.data(), n, batch++);
    };
    param_block in_place{o, init};
    in_place.add_worker(0);
    int64_t batch = 0;
    settle(in_place, batch);
    auto apply = measure(updates, [&](int) {
      in_place.push(0, 0, settled_grad.data(), n, batch++);
    });
    param_block shared{o, init};
    shared.add_worker(0);
    batch = 0;
    settle(shared, batch);
    auto cow = measure(updates, [&](int) {
      auto pulled = shared.values(); // a worker's pull holds them
      shared.push(0, 0, settled_grad.data(), n, batch++);
    });
    std::printf("%-9s %9zu %10.2f %10.2f %10.2f %8.2f %8.2f %14.2f %8.2f "
                "%14.2f\n",
                opt.c_str(), n, copy.us, copy_all.us, apply.us,
                apply.us / copy.us, apply.us / copy_all.us, apply.faults,
                cow.us, cow.faults);
  }
  return 0;
}

// bench-gpu-training: samples/s of the training step loop (forward,
// backward, SGD update) on the GPU backend for the MLP 784-256-128-10 and
// the CNN, at batch 128 and 1024, and how a step's device time splits
// between kernels and copies. Prints a table, or JSON lines with --json
// for scripts/bench-gpu.sh, which runs bench/pytorch_gpu.py beside it.
//
// The loop is troupe's own training step as a worker runs it: a batch in
// pinned host memory is uploaded, the loss comes back to the host every
// step. Inputs are a pool of 16 random batches made beforehand (no data
// loading), as in the PyTorch script.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command_line.hpp"
#include "gpu/gpu_backend.hpp"
#include "models/model.hpp"
#include "models/trainer.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/random.hpp"

using namespace troupe;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct result {
  std::string model, device;
  int batch = 0;
  double samples_per_sec = 0;
  double step_ms = 0;   ///< wall time per step in the profiled pass
  double kernel_ms = 0; ///< device time in kernels per step
  double copy_ms = 0;   ///< device time in host<->device copies per step
};

model_config model_named(const std::string& name) {
  model_config cfg;
  if (name == "cnn") {
    cfg.type = model_config::kind::cnn;
    cfg.conv_channels = {32, 64};
    cfg.kernel_size = 5;
  } else {
    cfg.type = model_config::kind::mlp;
    cfg.hidden = {256, 128};
  }
  return cfg;
}

result measure(gpu::gpu_backend& be, const std::string& name, int batch,
               double seconds) {
  auto m = std::move(*make_model(model_named(name), 28, 28, 1, 10, be));
  optimizer_config ocfg;
  ocfg.type = optimizer_config::kind::sgd; // fused into the backward pass
  ocfg.learning_rate = 0.01;
  local_trainer trainer{*m, ocfg};
  // The pool in the backend's host memory (pinned), as the PyTorch side
  // keeps its pool pinned: each step's batch is one DMA on both sides.
  const size_t pool = 16, per_batch = static_cast<size_t>(batch) * 784;
  auto x_buf = be.allocate_host(pool * per_batch * sizeof(float));
  auto y_buf = be.allocate_host(pool * batch * sizeof(int32_t));
  float* x = x_buf.floats();
  int32_t* y = y_buf.ints();
  splitmix64 rng{42};
  for (size_t i = 0; i < pool * per_batch; ++i)
    x[i] = static_cast<float>(rng.uniform01());
  for (size_t i = 0; i < pool * batch; ++i)
    y[i] = static_cast<int32_t>(rng.below(10));
  auto step = [&](int64_t i) {
    size_t slot = static_cast<size_t>(i) % pool;
    trainer.step(x + slot * per_batch, y + slot * batch, batch);
  };
  for (int i = 0; i < 20; ++i) // warm-up: allocation, cuBLAS heuristics
    step(i);
  be.synchronize();
  int64_t steps = 0;
  auto t0 = clock_type::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 20; ++i)
      step(steps++);
    be.synchronize();
    elapsed = seconds_since(t0);
  }
  result r;
  r.model = m->summary();
  r.device = be.describe();
  r.batch = batch;
  r.samples_per_sec = static_cast<double>(steps) * batch / elapsed;
  // The split, in a pass of its own: the events cost a little.
  const int profiled = 50;
  be.set_profiling(true);
  t0 = clock_type::now();
  for (int i = 0; i < profiled; ++i)
    step(i);
  auto split = be.profile();
  double wall = seconds_since(t0);
  be.set_profiling(false);
  r.step_ms = 1e3 * wall / profiled;
  r.kernel_ms = split.kernel_ms / profiled;
  r.copy_ms = split.copy_ms / profiled;
  return r;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPU training-loop samples/s and the kernel/copy split."};
  bool json = false;
  double seconds = 2.0;
  int device = 0;
  std::vector<std::string> models{"mlp", "cnn"};
  std::vector<int> batches{128, 1024};
  app.add_flag("--json", json, "JSON lines instead of a table");
  app.add_option("--seconds", seconds, "time per measurement")
    ->check(CLI::PositiveNumber);
  app.add_option("--device", device, "CUDA device index");
  app.add_option("--models", models, "mlp and/or cnn")
    ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--batches", batches, "batch sizes")
    ->check(CLI::Range(1, 1 << 16));
  if (auto code = troupe::parse_command_line(app, argc, argv,
                                             "bench-gpu-training"))
    return *code;
  auto be = gpu::make_gpu_backend(device);
  if (!be) {
    std::fprintf(stderr, "bench-gpu-training: error: %s\n",
                 describe(be.error()).c_str());
    return 2;
  }
  if (!json)
    std::printf("%s\n%-44s %6s %11s %8s %10s %8s\n", (*be)->describe().c_str(),
                "model", "batch", "samples/s", "step ms", "kernel ms",
                "copy ms");
  for (auto& name : models)
    for (int batch : batches) {
      try {
        auto r = measure(**be, name, batch, seconds);
        if (json)
          std::printf(
            "{\"impl\":\"troupe\",\"model\":\"%s\",\"batch\":%d,"
            "\"samples_per_sec\":%.1f,\"step_ms\":%.4f,"
            "\"kernel_ms\":%.4f,\"copy_ms\":%.4f,\"device\":\"%s\"}\n",
            name.c_str(), r.batch, r.samples_per_sec, r.step_ms, r.kernel_ms,
            r.copy_ms, r.device.c_str());
        else
          std::printf("%-44s %6d %11.0f %8.3f %10.3f %8.3f\n", r.model.c_str(),
                      r.batch, r.samples_per_sec, r.step_ms, r.kernel_ms,
                      r.copy_ms);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-gpu-training: %s batch %d: %s\n",
                     name.c_str(), batch, e.what());
        return 1;
      }
      std::fflush(stdout);
    }
  return 0;
}

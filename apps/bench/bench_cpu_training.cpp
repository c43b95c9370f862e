// bench-cpu-training: samples/s of the training step loop (forward,
// backward, SGD update) for MLPs on the CPU backend, and the GFLOP/s this
// means next to OpenBLAS sgemm alone on exactly the gemm calls of one step,
// measured in the same run. Prints a table, or JSON lines with --json.
//
// Inputs are random and pre-made (no data loading), as in
// bench/pytorch_mlp.py, so both sides time the same loop.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "apps/command_line.hpp"
#include "models/model.hpp"
#include "runtime/compute/blas_loader.hpp"
#include "runtime/compute/conv_kernels.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "models/trainer.hpp"
#include "runtime/base/random.hpp"

using namespace troupe;

namespace {

/// Forwards to the CPU backend and records the shape of every gemm.
class recording_backend final : public compute_backend {
public:
  struct gemm_call {
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta; // beta 1 where the SGD update rides on the gemm
  };
  explicit recording_backend(compute_backend& inner) : in_(inner) {}
  bool recording = false;
  std::vector<gemm_call> calls;

  std::string describe() const override { return in_.describe(); }
  bool host_accessible() const override { return in_.host_accessible(); }
  backend_buffer allocate(size_t bytes) override { return in_.allocate(bytes); }
  void release(void* p) noexcept override { in_.release(p); }
  backend_buffer allocate_host(size_t bytes) override {
    return in_.allocate_host(bytes);
  }
  void release_host(void* p) noexcept override { in_.release_host(p); }
  void upload(void* d, const void* s, size_t n) override {
    in_.upload(d, s, n);
  }
  void download(void* d, const void* s, size_t n) override {
    in_.download(d, s, n);
  }
  void fill(float* x, size_t n, float v) override { in_.fill(x, n, v); }
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c,
            int ldc) override {
    if (recording)
      calls.push_back({ta, tb, m, n, k, lda, ldb, ldc, alpha, beta});
    in_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void axpy(size_t n, float a, const float* x, float* y) override {
    in_.axpy(n, a, x, y);
  }
  void bias_activation_forward(activation act, float* y, const float* b, int r,
                               int c) override {
    in_.bias_activation_forward(act, y, b, r, c);
  }
  void activation_backward(activation act, const float* y, float* dy,
                           size_t n) override {
    in_.activation_backward(act, y, dy, n);
  }
  void bias_backward(const float* dy, float* db, int r, int c) override {
    in_.bias_backward(dy, db, r, c);
  }
  batch_loss softmax_cross_entropy(const float* z, const int32_t* l, int r,
                                   int c, float* d, float s) override {
    return in_.softmax_cross_entropy(z, l, r, c, d, s);
  }
  void im2col(const float* x, const conv_shape& s, float* c) override {
    in_.im2col(x, s, c);
  }
  void col2im(const float* d, const conv_shape& s, float* x) override {
    in_.col2im(d, s, x);
  }
  void maxpool_forward(const float* x, int b, int h, int w, int c, int s,
                       int st, float* y, int32_t* a) override {
    in_.maxpool_forward(x, b, h, w, c, s, st, y, a);
  }
  void maxpool_backward(const float* dy, const int32_t* a, size_t ny, float* dx,
                        size_t nx) override {
    in_.maxpool_backward(dy, a, ny, dx, nx);
  }
  size_t conv_workspace(const conv_shape& s, int out_c) const override {
    return in_.conv_workspace(s, out_c);
  }
  // A direct convolution is recorded as the gemms of im2col + gemm, so the
  // sgemm column still times OpenBLAS on the convolution's own shapes.
  void conv2d_forward(const float* x, const conv_shape& s, const float* w,
                      int out_c, const float* bias, activation act, float* y,
                      float* ws) override {
    int rows = s.batch * s.out_height() * s.out_width();
    if (recording)
      calls.push_back({false, false, rows, out_c, s.patch(), s.patch(), out_c,
                       out_c, 1.f, 0.f});
    in_.conv2d_forward(x, s, w, out_c, bias, act, y, ws);
  }
  void conv2d_backward(const conv_shape& s, const float* w, int out_c,
                       const float* dy, float* dw, float* db, float* dx,
                       float* ws) override {
    int rows = s.batch * s.out_height() * s.out_width();
    if (recording) {
      calls.push_back({true, false, s.patch(), out_c, rows, s.patch(), out_c,
                       out_c, 1.f, 0.f});
      if (dx != nullptr)
        calls.push_back({false, true, rows, s.patch(), out_c, out_c, out_c,
                         s.patch(), 1.f, 0.f});
    }
    in_.conv2d_backward(s, w, out_c, dy, dw, db, dx, ws);
  }

private:
  compute_backend& in_;
};

using clock_type = std::chrono::steady_clock;

struct result {
  std::string model;
  int batch, threads;
  double samples_per_sec, loop_gflops, sgemm_gflops;
};

/// A model of the benchmark: the MLPs with SGD 0.01, the CNN of
/// config/cnn.json with Adam 0.001 (as bench/pytorch_mlp.py and
/// bench/pytorch_cnn.py).
struct spec {
  model_config model;
  optimizer_config opt;
  std::string name;
};

spec mlp_spec(std::vector<int> hidden, activation act) {
  spec s;
  s.model.type = model_config::kind::mlp;
  s.model.hidden = std::move(hidden);
  s.model.act = act;
  s.opt.type = optimizer_config::kind::sgd;
  s.opt.learning_rate = 0.01;
  s.name = "784";
  for (int h : s.model.hidden)
    s.name += "-" + std::to_string(h);
  s.name += "-10 " + std::string{to_string(act)};
  return s;
}

spec cnn_spec() {
  spec s;
  s.model.type = model_config::kind::cnn;
  s.model.hidden = {};
  s.model.conv_channels = {32, 64};
  s.model.kernel_size = 5;
  s.model.act = activation::relu;
  s.opt.type = optimizer_config::kind::adam;
  s.opt.learning_rate = 0.001;
  s.name = "cnn 32-64 relu";
  return s;
}

result measure(const spec& sp, int batch, int threads, double seconds) {
  auto cpu = make_cpu_backend(threads);
  recording_backend be{*cpu};
  auto m = std::move(*make_model(sp.model, 28, 28, 1, 10, be));
  local_trainer trainer{*m, sp.opt};
  // A pool of random batches, cycled.
  const int pool = 16;
  splitmix64 rng{42};
  std::vector<float> x(static_cast<size_t>(pool) * batch * 784);
  std::vector<int32_t> y(static_cast<size_t>(pool) * batch);
  for (auto& v : x)
    v = static_cast<float>(rng.uniform01());
  for (auto& v : y)
    v = static_cast<int32_t>(rng.below(10));
  auto step = [&](int64_t i) {
    size_t slot = static_cast<size_t>(i % pool);
    trainer.step(x.data() + slot * batch * 784, y.data() + slot * batch, batch);
  };
  be.recording = true;
  step(0);
  be.recording = false;
  // Steps between clock reads: a CNN step takes ~1000x an MLP step.
  const int chunk = sp.model.type == model_config::kind::cnn ? 5 : 50;
  for (int i = 1; i < 2 * chunk; ++i) // warm-up
    step(i);
  int64_t steps = 0;
  auto t0 = clock_type::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < chunk; ++i)
      step(steps++);
    elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  result r;
  r.model = sp.name;
  r.batch = batch;
  r.threads = threads;
  r.samples_per_sec = static_cast<double>(steps) * batch / elapsed;
  double flops = m->gemm_flops(batch);
  r.loop_gflops = flops * static_cast<double>(steps) / elapsed / 1e9;
  // sgemm alone on the recorded calls, same buffers sizes, same count.
  std::vector<std::vector<float>> a, b, c;
  double recorded_flops = 0;
  for (auto& call : be.calls) {
    size_t rows_a = call.ta ? call.k : call.m,
           rows_b = call.tb ? call.n : call.k;
    a.emplace_back(rows_a * static_cast<size_t>(call.lda), 0.5f);
    b.emplace_back(rows_b * static_cast<size_t>(call.ldb), 0.25f);
    c.emplace_back(static_cast<size_t>(call.m) * call.ldc, 0.f);
    recorded_flops += 2.0 * call.m * call.n * call.k;
  }
  if (recorded_flops != flops)
    std::cerr << "warning: recorded gemm flops " << recorded_flops
              << " differ from the model's count " << flops << "\n";
  auto replay = [&] {
    for (size_t i = 0; i < be.calls.size(); ++i) {
      auto& k = be.calls[i];
      cpu->gemm(k.ta, k.tb, k.m, k.n, k.k, k.alpha, a[i].data(), k.lda,
                b[i].data(), k.ldb, k.beta, c[i].data(), k.ldc);
    }
  };
  for (int i = 0; i < 2 * chunk; ++i)
    replay();
  int64_t reps = 0;
  t0 = clock_type::now();
  elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < chunk; ++i, ++reps)
      replay();
    elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  r.sgemm_gflops = recorded_flops * static_cast<double>(reps) / elapsed / 1e9;
  return r;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training-loop samples/s and GFLOP/s next to OpenBLAS sgemm."};
  bool json = false;
  double seconds = 1.0;
  std::vector<int> threads{1, 2};
  app.add_flag("--json", json, "JSON lines instead of a table");
  app.add_option("--seconds", seconds, "time per measurement")
    ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "thread counts to measure");
  std::string model = "mlp";
  app.add_option("--model", model, "models: the MLPs, the CNN, or all")
    ->check(CLI::IsMember({"mlp", "cnn", "all"}));
  if (auto code = troupe::parse_command_line(app, argc, argv,
                                             "bench-cpu-training"))
    return *code;
  auto& lib = blas::get();
  const char* conv_isa = conv::chosen_kernels().isa;
  if (!json)
    std::printf("OpenBLAS kernels: %s (%s), troupe's convolution: %s\n"
                "%-22s %5s %7s %12s %11s %12s %7s\n",
                lib.core.c_str(), lib.choice.c_str(), conv_isa, "model",
                "batch", "threads", "samples/s", "loop GF/s", "sgemm GF/s",
                "ratio");
  std::vector<std::pair<spec, int>> runs; // model, batch
  if (model == "mlp" || model == "all")
    for (auto& s : {mlp_spec({100}, activation::sigmoid),
                    mlp_spec({256, 128}, activation::relu)})
      for (int batch : {100, 128})
        runs.emplace_back(s, batch);
  if (model == "cnn" || model == "all")
    runs.emplace_back(cnn_spec(), 64);
  for (auto& [s, batch] : runs)
    for (int t : threads) {
      auto r = measure(s, batch, t, seconds);
      if (json)
        std::printf("{\"impl\":\"troupe\",\"kernels\":\"%s\",\"conv\":\"%s\","
                    "\"model\":\"%s\",\"batch\":%d,\"threads\":%d,"
                    "\"samples_per_sec\":%.1f,\"loop_gflops\":%.2f,"
                    "\"sgemm_gflops\":%.2f}\n",
                    lib.core.c_str(), conv_isa, r.model.c_str(), r.batch,
                    r.threads, r.samples_per_sec, r.loop_gflops,
                    r.sgemm_gflops);
      else
        std::printf("%-22s %5d %7d %12.0f %11.1f %12.1f %6.0f%%\n",
                    r.model.c_str(), r.batch, r.threads, r.samples_per_sec,
                    r.loop_gflops, r.sgemm_gflops,
                    100 * r.loop_gflops / r.sgemm_gflops);
      std::fflush(stdout);
    }
  return 0;
}

// A layer of your own in a troupe model: a residual block,
// y = x + act(x W + b), registered as layer type "residual" and named in
// a config's layer list like a built-in layer. The program checks the
// block's backward pass against finite differences, then trains a model
// with two blocks on troupe's embedded cluster (2 shards, 2 async workers
// that build the model from the list, the blocks included). It exits 0
// when every derivative agrees and the test accuracy is above 0.9.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/chief/chief.hpp"
#include "actors/protocol/system_config.hpp"
#include "models/gradient_check.hpp"
#include "models/layer_registry.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace {

/// y = x + act(x W + b) over flat inputs of `width` features; W is
/// (width, width). Made of the backend's operations only (gemm, the fused
/// bias and activation, axpy), so it runs on the GPU backend too.
class residual_layer final : public troupe::layer {
public:
  residual_layer(troupe::param_layout& layout, const std::string& name,
                 int width, troupe::activation act)
    : width_(width), act_(act) {
    w_ = layout.add(name + "/w", {width, width});
    b_ = layout.add(name + "/b", {width});
  }

  std::string describe() const override {
    return "residual " + std::to_string(width_) + " " + troupe::to_string(act_);
  }
  size_t output_size() const override { return width_; }
  bool supports(const troupe::compute_backend&) const override { return true; }
  void init(float* flat, const troupe::model_config& cfg,
            troupe::splitmix64& rng) const override {
    troupe::init_weights(flat + w_, static_cast<size_t>(width_) * width_,
                         width_, width_, cfg, rng);
    std::fill(flat + b_, flat + b_ + width_, 0.f);
  }
  void reserve(troupe::compute_backend& be, int batch) override {
    if (batch <= capacity_)
      return;
    const size_t n = static_cast<size_t>(batch) * width_ * sizeof(float);
    h_ = be.allocate(n);
    dh_ = be.allocate(n);
    capacity_ = batch;
  }
  void forward(troupe::compute_backend& be, const float* params, const float* x,
               float* y, int batch) override {
    const size_t n = static_cast<size_t>(batch) * width_;
    // h = act(x W + b), kept for backward; y = x + h.
    be.gemm(false, false, batch, width_, width_, 1.f, x, width_, params + w_,
            width_, 0.f, h_.floats(), width_);
    be.bias_activation_forward(act_, h_.floats(), params + b_, batch, width_);
    be.fill(y, n, 0.f);
    be.axpy(n, 1.f, x, y);
    be.axpy(n, 1.f, h_.floats(), y);
  }
  void backward(troupe::compute_backend& be, const float* params,
                const float* x, const float*, float* dy, float* dx,
                float* grads, int batch) override {
    const size_t n = static_cast<size_t>(batch) * width_;
    // dz = dy * act'(h); dW = x^T dz; db = sum of dz; dx = dy + dz W^T.
    float* dz = dh_.floats();
    be.fill(dz, n, 0.f);
    be.axpy(n, 1.f, dy, dz);
    be.activation_backward(act_, h_.floats(), dz, n);
    be.gemm(true, false, width_, width_, batch, 1.f, x, width_, dz, width_, 0.f,
            grads + w_, width_);
    be.bias_backward(dz, grads + b_, batch, width_);
    if (dx == nullptr)
      return;
    be.gemm(false, true, batch, width_, width_, 1.f, dz, width_, params + w_,
            width_, 0.f, dx, width_);
    be.axpy(n, 1.f, dy, dx);
  }
  troupe::flat_range param_range() const override {
    return {w_, b_ + static_cast<size_t>(width_)};
  }
  double gemm_flops(int batch, bool need_dx) const override {
    return 2.0 * batch * width_ * width_ * (need_dx ? 3 : 2);
  }

private:
  int width_;
  troupe::activation act_;
  size_t w_, b_;
  troupe::backend_buffer h_, dh_;
  int capacity_ = 0;
};

/// The "residual" type: { "type": "residual", "activation": "relu" |
/// "tanh" } on a flat input, which it keeps the width of.
caf::expected<std::unique_ptr<troupe::layer>>
make_residual(troupe::layer_args& a) {
  auto name = a.string("activation", "relu");
  if (name != "relu" && name != "tanh")
    return a.fail("activation must be relu or tanh, found " + name);
  if (!a.input().flat())
    return a.fail("needs flat input, found " + a.input().to_string()
                  + ": put a flatten layer before it");
  return std::make_unique<residual_layer>(
    a.layout(), a.name(), a.input().channels,
    name == "relu" ? troupe::activation::relu : troupe::activation::tanh);
}

int fail(const std::string& why) {
  std::cerr << "residual_mlp: " << why << std::endl;
  return 1;
}

} // namespace

int main() {
  if (auto err = troupe::register_layer("residual", make_residual))
    return fail(troupe::describe(err));

  // The block's backward pass against finite differences, on the CPU.
  auto cpu = troupe::make_cpu_backend(1);
  troupe::param_layout layout;
  residual_layer block{layout, "check", 6, troupe::activation::tanh};
  std::vector<float> values(layout.total());
  troupe::model_config init;
  troupe::splitmix64 rng{7};
  block.init(values.data(), init, rng);
  auto check = troupe::check_layer_gradients(block, *cpu, values.data(),
                                             values.size(), {1, 1, 6}, 4, 1);
  std::printf("gradient check: %d derivatives, %d wrong%s%s\n", check.checked,
              check.wrong, check.wrong > 0 ? ", first " : "",
              check.first.c_str());

  const std::string config_text = R"({
    "name": "residual-mlp",
    "model": {"layers": [
      {"type": "flatten"},
      {"type": "dense", "units": 32, "activation": "relu"},
      {"type": "residual"},
      {"type": "residual", "activation": "tanh"},
      {"type": "dense", "units": 4}]},
    "data": {"format": "synthetic", "width": 12, "classes": 4,
             "train_samples": 4000, "test_samples": 1000},
    "training": {"batch_size": 32, "epochs": 3,
                 "optimizer": {"type": "adam", "learning_rate": 0.01}},
    "cluster": {"shards": 2, "workers": 2, "mode": "async"}
  })";
  auto cfg = troupe::parse_run_config(config_text, "residual_mlp");
  if (!cfg)
    return fail(troupe::describe(cfg.error()));
  auto data = troupe::load_datasets(cfg->data);
  if (!data)
    return fail(troupe::describe(data.error()));
  // The model the workers will build, here once to show it (and to refuse
  // a list that does not fit the data before the cluster starts).
  const auto& train = data->train;
  auto model = troupe::make_model(cfg->model, train.height, train.width,
                                  train.channels, train.classes, *cpu);
  if (!model)
    return fail(troupe::describe(model.error()));
  std::printf("model: %s (%zu parameters)\n", (*model)->summary().c_str(),
              (*model)->layout().total());
  troupe::chief_options opts;
  opts.cfg = *cfg;
  opts.config_text = config_text;
  opts.data = std::make_shared<const troupe::train_test>(std::move(*data));
  opts.log = &std::cout;
  caf::actor_system_config sys_cfg;
  troupe::init_config(sys_cfg);
  caf::actor_system sys{sys_cfg};
  auto summary = troupe::run_cluster(sys, std::move(opts));
  if (!summary)
    return fail(troupe::describe(summary.error()));
  std::printf("test accuracy %.4f, %lld steps\n", summary->test_accuracy,
              static_cast<long long>(summary->steps));
  return check.wrong == 0 && summary->test_accuracy > 0.9 ? 0 : 1;
}

#include "models/dense_layer.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {

void init_weights(float* w, size_t n, int fan_in, int fan_out,
                  const model_config& cfg, splitmix64& rng) {
  switch (cfg.init) {
    case model_config::init_kind::normal:
      for (size_t i = 0; i < n; ++i)
        w[i] = static_cast<float>(cfg.init_stddev * rng.normal());
      return;
    case model_config::init_kind::xavier: { // Glorot uniform
      double limit = std::sqrt(6.0 / (fan_in + fan_out));
      for (size_t i = 0; i < n; ++i)
        w[i] = static_cast<float>((2 * rng.uniform01() - 1) * limit);
      return;
    }
    case model_config::init_kind::he: {
      double stddev = std::sqrt(2.0 / fan_in);
      for (size_t i = 0; i < n; ++i)
        w[i] = static_cast<float>(stddev * rng.normal());
      return;
    }
  }
}

dense_layer::dense_layer(param_layout& layout, const std::string& name, int in,
                         int out, activation act)
  : in_(in), out_(out), act_(act) {
  w_ = layout.add(name + "/w", {in, out});
  b_ = layout.add(name + "/b", {out});
}

std::string dense_layer::describe() const {
  return "dense " + std::to_string(in_) + "->" + std::to_string(out_) + " "
         + to_string(act_);
}

void dense_layer::init(float* flat, const model_config& cfg,
                       splitmix64& rng) const {
  init_weights(flat + w_, static_cast<size_t>(in_) * out_, in_, out_, cfg, rng);
  std::fill(flat + b_, flat + b_ + out_, 0.f);
}

void dense_layer::forward(compute_backend& be, const float* params,
                          const float* x, float* y, int batch) {
  // y (batch, out) = x (batch, in) * W (in, out); then y = act(y + b).
  be.gemm(false, false, batch, out_, in_, 1.f, x, in_, params + w_, out_, 0.f,
          y, out_);
  be.bias_activation_forward(act_, y, params + b_, batch, out_);
}

void dense_layer::backward(compute_backend& be, const float* params,
                           const float* x, const float* y, float* dy, float* dx,
                           float* grads, int batch) {
  // dz = dy * act'(y), in place.
  be.activation_backward(act_, y, dy, static_cast<size_t>(batch) * out_);
  // dW (in, out) = x^T (in, batch) * dz (batch, out); sets dW.
  be.gemm(true, false, in_, out_, batch, 1.f, x, in_, dy, out_, 0.f, grads + w_,
          out_);
  // db (out) = column sums of dz; sets db.
  be.bias_backward(dy, grads + b_, batch, out_);
  // dx (batch, in) = dz (batch, out) * W^T (out, in); sets dx.
  if (dx != nullptr)
    be.gemm(false, true, batch, in_, out_, 1.f, dy, out_, params + w_, out_,
            0.f, dx, in_);
}

void layer::backward_sgd(compute_backend& be, float* params, const float* x,
                         const float* y, float* dy, float* dx, float* grads,
                         float lr, int batch) {
  backward(be, params, x, y, dy, dx, grads, batch);
  flat_range r = param_range();
  if (r.size() > 0)
    be.axpy(r.size(), -lr, grads + r.begin, params + r.begin);
}

void dense_layer::backward_sgd(compute_backend& be, float* params,
                               const float* x, const float* y, float* dy,
                               float* dx, float* grads, float lr, int batch) {
  be.activation_backward(act_, y, dy, static_cast<size_t>(batch) * out_);
  // dx first: it needs W before the update.
  if (dx != nullptr)
    be.gemm(false, true, batch, in_, out_, 1.f, dy, out_, params + w_, out_,
            0.f, dx, in_);
  // W += -lr * x^T dz in the gemm itself (beta = 1): the weight gradient is
  // never written out, which saves zeroing it, storing it and reading it
  // back in an update pass -- about 5% of a step of 784-256-128-10.
  be.gemm(true, false, in_, out_, batch, -lr, x, in_, dy, out_, 1.f,
          params + w_, out_);
  be.bias_backward(dy, grads + b_, batch, out_);
  be.axpy(static_cast<size_t>(out_), -lr, grads + b_, params + b_);
}

double dense_layer::gemm_flops(int batch, bool need_dx) const {
  double one = 2.0 * batch * in_ * out_;
  return one * (need_dx ? 3 : 2);
}

} // namespace troupe

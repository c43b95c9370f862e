#include "models/layernorm_layer.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace troupe {

layernorm_layer::layernorm_layer(param_layout& layout, const std::string& name,
                                 image_shape in, double epsilon)
  : in_(in), epsilon_(static_cast<float>(epsilon)) {
  gamma_ = layout.add(name + "/gamma", {in.channels});
  beta_ = layout.add(name + "/beta", {in.channels});
}

std::string layernorm_layer::describe() const {
  std::ostringstream out;
  out << "layernorm " << in_.channels << " eps " << epsilon_;
  return out.str();
}

void layernorm_layer::init(float* flat, const model_config&,
                           splitmix64&) const {
  std::fill(flat + gamma_, flat + gamma_ + in_.channels, 1.f);
  std::fill(flat + beta_, flat + beta_ + in_.channels, 0.f);
}

void layernorm_layer::reserve(compute_backend&, int batch) {
  normalized_.resize(static_cast<size_t>(batch) * in_.size());
  inv_std_.resize(static_cast<size_t>(batch) * in_.height * in_.width);
}

void layernorm_layer::forward(compute_backend&, const float* params,
                              const float* x, float* y, int batch) {
  const size_t c = static_cast<size_t>(in_.channels);
  const size_t rows = static_cast<size_t>(batch) * in_.height * in_.width;
  const float* gamma = params + gamma_;
  const float* beta = params + beta_;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    // Two passes in double: the variance of values far from 0 stays exact.
    double mean = 0, var = 0;
    for (size_t i = 0; i < c; ++i)
      mean += xr[i];
    mean /= static_cast<double>(c);
    for (size_t i = 0; i < c; ++i)
      var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(c);
    const auto inv = static_cast<float>(1.0 / std::sqrt(var + epsilon_));
    inv_std_[r] = inv;
    float* nr = normalized_.data() + r * c;
    float* yr = y + r * c;
    for (size_t i = 0; i < c; ++i) {
      nr[i] = static_cast<float>(xr[i] - mean) * inv;
      yr[i] = nr[i] * gamma[i] + beta[i];
    }
  }
}

void layernorm_layer::backward(compute_backend&, const float* params,
                               const float*, const float*, float* dy, float* dx,
                               float* grads, int batch) {
  const size_t c = static_cast<size_t>(in_.channels);
  const size_t rows = static_cast<size_t>(batch) * in_.height * in_.width;
  const float* gamma = params + gamma_;
  float* dgamma = grads + gamma_;
  float* dbeta = grads + beta_;
  std::fill(dgamma, dgamma + c, 0.f);
  std::fill(dbeta, dbeta + c, 0.f);
  for (size_t r = 0; r < rows; ++r) {
    const float* nr = normalized_.data() + r * c;
    const float* gr = dy + r * c;
    double mean_g = 0, mean_gn = 0; // of dL/dnormalized, and times it
    for (size_t i = 0; i < c; ++i) {
      dgamma[i] += gr[i] * nr[i];
      dbeta[i] += gr[i];
      const float g = gr[i] * gamma[i];
      mean_g += g;
      mean_gn += g * nr[i];
    }
    if (dx == nullptr)
      continue;
    mean_g /= static_cast<double>(c);
    mean_gn /= static_cast<double>(c);
    float* dxr = dx + r * c;
    const float inv = inv_std_[r];
    for (size_t i = 0; i < c; ++i)
      dxr[i] =
        inv * static_cast<float>(gr[i] * gamma[i] - mean_g - nr[i] * mean_gn);
  }
}

} // namespace troupe

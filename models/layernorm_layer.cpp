#include "models/layernorm_layer.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/compute/vector_kernels.hpp"

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
  const vec::kernels& k = vec::chosen_kernels();
  for (size_t r = 0; r < rows; ++r)
    inv_std_[r] = k.layernorm_row(x + r * c, gamma, beta, epsilon_, c,
                                  normalized_.data() + r * c, y + r * c);
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
  const vec::kernels& k = vec::chosen_kernels();
  for (size_t r = 0; r < rows; ++r)
    k.layernorm_grad_row(normalized_.data() + r * c, dy + r * c, gamma,
                         inv_std_[r], c, dgamma, dbeta,
                         dx != nullptr ? dx + r * c : nullptr);
}

} // namespace troupe

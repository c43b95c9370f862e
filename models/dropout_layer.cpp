#include "models/dropout_layer.hpp"

#include <cstring>
#include <sstream>

namespace troupe {

dropout_layer::dropout_layer(image_shape in, double rate)
  : parameterless_layer(in), rate_(rate) {}

std::string dropout_layer::describe() const {
  std::ostringstream out;
  out << "dropout " << rate_;
  return out.str();
}

void dropout_layer::reserve(compute_backend&, int batch) {
  mask_.resize(static_cast<size_t>(batch) * in_.size());
}

void dropout_layer::forward(compute_backend&, const float*, const float* x,
                            float* y, int batch) {
  const size_t n = static_cast<size_t>(batch) * in_.size();
  if (!training_ || rate_ == 0) {
    std::memcpy(y, x, n * sizeof(float));
    return;
  }
  // One 64-bit draw gives four 16-bit uniforms: the mask costs a quarter
  // of a generator call per value.
  const auto keep_below = static_cast<uint32_t>((1.0 - rate_) * 65536.0);
  const auto scale = static_cast<float>(1.0 / (1.0 - rate_));
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 == 0)
      bits = rng_.next();
    const auto u = static_cast<uint32_t>(bits & 0xffff);
    bits >>= 16;
    mask_[i] = u < keep_below ? scale : 0.f;
    y[i] = x[i] * mask_[i];
  }
}

void dropout_layer::backward(compute_backend&, const float*, const float*,
                             const float*, float* dy, float* dx, float*,
                             int batch) {
  if (dx == nullptr)
    return;
  const size_t n = static_cast<size_t>(batch) * in_.size();
  if (!training_ || rate_ == 0) {
    std::memcpy(dx, dy, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i)
    dx[i] = dy[i] * mask_[i];
}

} // namespace troupe

#include "models/activation_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/compute/vector_kernels.hpp"

namespace troupe {

activation_layer::activation_layer(image_shape in, layer_activation act)
  : parameterless_layer(in), act_(act) {}

void activation_layer::forward(compute_backend&, const float*, const float* x,
                               float* y, int batch) {
  const size_t n = static_cast<size_t>(batch) * in_.size();
  switch (act_) {
    case layer_activation::identity:
      std::memcpy(y, x, n * sizeof(float));
      return;
    case layer_activation::relu:
      for (size_t i = 0; i < n; ++i)
        y[i] = x[i] > 0.f ? x[i] : 0.f;
      return;
    case layer_activation::tanh:
      for (size_t i = 0; i < n; ++i)
        y[i] = std::tanh(x[i]);
      return;
    case layer_activation::sigmoid:
      for (size_t i = 0; i < n; ++i)
        y[i] = 1.f / (1.f + std::exp(-x[i]));
      return;
    case layer_activation::gelu: vec::chosen_kernels().gelu(x, y, n); return;
    case layer_activation::softmax: {
      const size_t c = static_cast<size_t>(in_.channels);
      for (size_t r = 0; r < n / c; ++r) {
        const float* xr = x + r * c;
        float* yr = y + r * c;
        const float top = *std::max_element(xr, xr + c);
        float sum = 0;
        for (size_t i = 0; i < c; ++i)
          sum += yr[i] = std::exp(xr[i] - top);
        for (size_t i = 0; i < c; ++i)
          yr[i] /= sum;
      }
      return;
    }
  }
}

void activation_layer::backward(compute_backend&, const float*, const float* x,
                                const float* y, float* dy, float* dx, float*,
                                int batch) {
  if (dx == nullptr)
    return;
  const size_t n = static_cast<size_t>(batch) * in_.size();
  switch (act_) {
    case layer_activation::identity:
      std::memcpy(dx, dy, n * sizeof(float));
      return;
    case layer_activation::relu:
      for (size_t i = 0; i < n; ++i)
        dx[i] = x[i] > 0.f ? dy[i] : 0.f;
      return;
    case layer_activation::tanh:
      for (size_t i = 0; i < n; ++i)
        dx[i] = dy[i] * (1.f - y[i] * y[i]);
      return;
    case layer_activation::sigmoid:
      for (size_t i = 0; i < n; ++i)
        dx[i] = dy[i] * y[i] * (1.f - y[i]);
      return;
    case layer_activation::gelu:
      // d/dx x * Phi(x) = Phi(x) + x * phi(x)
      vec::chosen_kernels().gelu_grad(x, dy, dx, n);
      return;
    case layer_activation::softmax: {
      // dx = y * (dy - <dy, y>) per row
      const size_t c = static_cast<size_t>(in_.channels);
      for (size_t r = 0; r < n / c; ++r) {
        const float* yr = y + r * c;
        const float* gr = dy + r * c;
        float dot = 0;
        for (size_t i = 0; i < c; ++i)
          dot += gr[i] * yr[i];
        for (size_t i = 0; i < c; ++i)
          dx[r * c + i] = yr[i] * (gr[i] - dot);
      }
      return;
    }
  }
}

} // namespace troupe

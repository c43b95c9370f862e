// Activations in place over host floats, shared by the CPU backend's dense
// path and its direct convolution.
#pragma once

#include <cmath>
#include <cstddef>

#include "runtime/compute/backend.hpp"

namespace troupe {

inline void apply_activation(activation act, float* y, size_t n) {
  switch (act) {
    case activation::identity: return;
    case activation::sigmoid:
      for (size_t i = 0; i < n; ++i)
        y[i] = 1.f / (1.f + std::exp(-y[i]));
      return;
    case activation::tanh:
      for (size_t i = 0; i < n; ++i)
        y[i] = std::tanh(y[i]);
      return;
    case activation::relu:
      for (size_t i = 0; i < n; ++i)
        y[i] = y[i] > 0.f ? y[i] : 0.f;
      return;
  }
}

} // namespace troupe

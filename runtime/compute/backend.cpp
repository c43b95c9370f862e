#include "runtime/compute/backend.hpp"

namespace troupe {

const char* to_string(activation act) {
  switch (act) {
    case activation::identity: return "identity";
    case activation::sigmoid: return "sigmoid";
    case activation::tanh: return "tanh";
    case activation::relu: return "relu";
  }
  return "?";
}

void compute_backend::conv2d_forward(const float*, const conv_shape&,
                                     const float*, int, const float*,
                                     activation, float*, float*) {
  throw backend_error{describe() + " has no direct convolution"};
}

void compute_backend::conv2d_backward(const conv_shape&, const float*, int,
                                      const float*, float*, float*, float*,
                                      float*) {
  throw backend_error{describe() + " has no direct convolution"};
}

} // namespace troupe

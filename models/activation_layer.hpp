// A nonlinearity as a layer of its own: GELU (the exact, erf form, as
// PyTorch's nn.GELU() and Keras' default), softmax over the last axis, and
// relu, tanh and sigmoid where they follow a layer that does not fuse them.
#pragma once

#include "models/layer.hpp"

namespace troupe {

/// Host backends.
class activation_layer final : public parameterless_layer {
public:
  activation_layer(image_shape in, layer_activation act);

  std::string describe() const override { return to_string(act_); }
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;

private:
  layer_activation act_;
};

} // namespace troupe

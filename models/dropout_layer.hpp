// Dropout (inverted, as PyTorch's and Keras'): in training each value is
// zeroed with probability `rate` and the rest scaled by 1 / (1 - rate), so
// evaluation, where the layer passes its input through, needs no scaling.
#pragma once

#include <vector>

#include "models/layer.hpp"

namespace troupe {

/// Host backends.
class dropout_layer final : public parameterless_layer {
public:
  dropout_layer(image_shape in, double rate);

  std::string describe() const override;
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  void set_training(bool training) override { training_ = training; }
  void set_random_stream(uint64_t seed) override { rng_ = {seed}; }

private:
  double rate_;
  bool training_ = true;
  splitmix64 rng_{0};
  /// The last training forward's factors: 0 or 1 / (1 - rate).
  std::vector<float> mask_;
};

} // namespace troupe

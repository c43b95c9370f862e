// Dropout (inverted, as PyTorch's and Keras'): in training each value is
// zeroed with probability `rate` and the rest scaled by 1 / (1 - rate), so
// evaluation, where the layer passes its input through, needs no scaling.
#pragma once

#include <vector>

#include "models/layer.hpp"

namespace troupe {

/// Host backends.
class dropout_layer final : public layer {
public:
  dropout_layer(image_shape in, double rate);

  std::string describe() const override;
  size_t output_size() const override { return in_.size(); }
  image_shape output_shape() const override { return in_; }
  void init(float*, const model_config&, splitmix64&) const override {}
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  flat_range param_range() const override { return {}; }
  double gemm_flops(int, bool) const override { return 0; }
  void set_training(bool training) override { training_ = training; }
  void set_random_stream(uint64_t seed) override { rng_ = {seed}; }

private:
  image_shape in_;
  double rate_;
  bool training_ = true;
  splitmix64 rng_{0};
  /// The last training forward's factors: 0 or 1 / (1 - rate).
  std::vector<float> mask_;
};

} // namespace troupe

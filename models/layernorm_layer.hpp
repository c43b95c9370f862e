// Layer normalization over the last axis: each position's channels (a flat
// input's features) are brought to mean 0 and variance 1, then scaled by
// gamma and shifted by beta, one pair per channel (Keras'
// LayerNormalization, PyTorch's nn.LayerNorm(channels)).
#pragma once

#include <vector>

#include "models/layer.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// Host backends.
class layernorm_layer final : public layer {
public:
  layernorm_layer(param_layout& layout, const std::string& name, image_shape in,
                  double epsilon);

  std::string describe() const override;
  size_t output_size() const override { return in_.size(); }
  image_shape output_shape() const override { return in_; }
  /// gamma 1, beta 0.
  void init(float* flat, const model_config& cfg,
            splitmix64& rng) const override;
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  flat_range param_range() const override {
    return {gamma_, beta_ + static_cast<size_t>(in_.channels)};
  }
  double gemm_flops(int, bool) const override { return 0; }

private:
  image_shape in_;
  float epsilon_;
  size_t gamma_, beta_;
  /// The last forward's normalized values and 1 / std per position.
  std::vector<float> normalized_, inv_std_;
};

} // namespace troupe

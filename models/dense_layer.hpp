// Fully connected layer with fused bias and activation.
#pragma once

#include "models/layer.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// y = act(x W + b); x is (batch, in), W is (in, out), b is (out).
class dense_layer final : public layer {
public:
  dense_layer(param_layout& layout, const std::string& name, int in, int out,
              activation act);

  std::string describe() const override;
  size_t output_size() const override { return static_cast<size_t>(out_); }
  bool supports(const compute_backend&) const override { return true; }
  void init(float* flat, const model_config& cfg,
            splitmix64& rng) const override;
  void reserve(compute_backend&, int) override {}
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  void backward_sgd(compute_backend& be, float* params, const float* x,
                    const float* y, float* dy, float* dx, float* grads,
                    float lr, int batch) override;
  flat_range param_range() const override { return {w_, b_ + out_}; }
  double gemm_flops(int batch, bool need_dx) const override;

private:
  int in_, out_;
  activation act_;
  size_t w_, b_; // offsets in the flat vector
};

} // namespace troupe

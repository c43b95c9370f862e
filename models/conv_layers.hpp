// Convolution over NHWC activations.
#pragma once

#include "models/layer.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// y = act(conv(x, W) + b) with `stride` and `pad` zeros on every side.
/// W is (kernel*kernel*in_channels, out_channels) in (ky, kx, c) row order,
/// so the convolution is im2col followed by one gemm, or the backend's
/// direct convolution where it has one (the CPU backend: cpu_conv.hpp).
class conv2d_layer final : public layer {
public:
  conv2d_layer(param_layout& layout, const std::string& name, image_shape in,
               int out_channels, int kernel, int stride, int pad,
               activation act);

  image_shape output_shape() const override {
    auto g = geometry(1);
    return {g.out_height(), g.out_width(), out_c_};
  }
  bool supports(const compute_backend&) const override { return true; }
  std::string describe() const override;
  size_t output_size() const override { return output_shape().size(); }
  void init(float* flat, const model_config& cfg,
            splitmix64& rng) const override;
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  flat_range param_range() const override { return {w_, b_ + out_c_}; }
  double gemm_flops(int batch, bool need_dx) const override;

private:
  compute_backend::conv_shape geometry(int batch) const;

  image_shape in_;
  int out_c_, kernel_, stride_, pad_;
  activation act_;
  size_t w_, b_;
  // Direct convolution: the backend's scratch, kept from forward to
  // backward. Otherwise: im2col of the last forward input, reused for dcols.
  bool direct_ = false;
  backend_buffer workspace_;
  backend_buffer cols_;
  int capacity_ = 0;
};

} // namespace troupe

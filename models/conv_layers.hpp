// Convolution and max-pooling over NHWC activations.
#pragma once

#include "models/layer.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// Input geometry of one sample.
struct image_shape {
  int height, width, channels;
  size_t size() const { return static_cast<size_t>(height) * width * channels; }
};

/// y = act(conv(x, W) + b), stride 1, "same" padding (kernel odd).
/// W is (kernel*kernel*in_channels, out_channels) in (ky, kx, c) row order,
/// so the convolution is im2col followed by one gemm, or the backend's
/// direct convolution where it has one (the CPU backend: cpu_conv.hpp).
class conv2d_layer final : public layer {
public:
  conv2d_layer(param_layout& layout, const std::string& name, image_shape in,
               int out_channels, int kernel, activation act);

  image_shape output_shape() const { return {in_.height, in_.width, out_c_}; }
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
  int out_c_, kernel_;
  activation act_;
  size_t w_, b_;
  // Direct convolution: the backend's scratch, kept from forward to
  // backward. Otherwise: im2col of the last forward input, reused for dcols.
  bool direct_ = false;
  backend_buffer workspace_;
  backend_buffer cols_;
  int capacity_ = 0;
};

/// Non-overlapping max-pool, window = stride = `size`.
class maxpool_layer final : public layer {
public:
  maxpool_layer(image_shape in, int size);

  image_shape output_shape() const {
    return {in_.height / size_, in_.width / size_, in_.channels};
  }
  std::string describe() const override;
  size_t output_size() const override { return output_shape().size(); }
  void init(float*, const model_config&, splitmix64&) const override {}
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  flat_range param_range() const override { return {}; }
  double gemm_flops(int, bool) const override { return 0; }

private:
  image_shape in_;
  int size_;
  backend_buffer argmax_;
  int capacity_ = 0;
};

} // namespace troupe

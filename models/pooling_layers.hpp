// Max and average pooling over NHWC activations: a square window moved by
// `stride`, no padding (a window that would cross the edge is not taken,
// as PyTorch's and Keras' "valid" pools).
#pragma once

#include "models/layer.hpp"

namespace troupe {

/// Output rows or columns of a `size` window moved by `stride` over `in`.
inline int pooled_extent(int in, int size, int stride) {
  return in < size ? 0 : (in - size) / stride + 1;
}

/// The maximum of each window; runs on every backend.
class maxpool_layer final : public layer {
public:
  maxpool_layer(image_shape in, int size, int stride);

  image_shape output_shape() const override {
    return {pooled_extent(in_.height, size_, stride_),
            pooled_extent(in_.width, size_, stride_), in_.channels};
  }
  std::string describe() const override;
  size_t output_size() const override { return output_shape().size(); }
  bool supports(const compute_backend&) const override { return true; }
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
  int size_, stride_;
  backend_buffer argmax_;
  int capacity_ = 0;
};

/// The mean of each window; host backends.
class avgpool_layer final : public layer {
public:
  avgpool_layer(image_shape in, int size, int stride);

  image_shape output_shape() const override {
    return {pooled_extent(in_.height, size_, stride_),
            pooled_extent(in_.width, size_, stride_), in_.channels};
  }
  std::string describe() const override;
  size_t output_size() const override { return output_shape().size(); }
  void init(float*, const model_config&, splitmix64&) const override {}
  void reserve(compute_backend&, int) override {}
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
  flat_range param_range() const override { return {}; }
  double gemm_flops(int, bool) const override { return 0; }

private:
  image_shape in_;
  int size_, stride_;
};

} // namespace troupe

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

/// A square window moved over the input: what both pools share.
class pooling_layer : public parameterless_layer {
public:
  pooling_layer(image_shape in, int size, int stride)
    : parameterless_layer(in), size_(size), stride_(stride) {}

  image_shape output_shape() const override {
    return {pooled_extent(in_.height, size_, stride_),
            pooled_extent(in_.width, size_, stride_), in_.channels};
  }

protected:
  /// "<kind> 2x2", with "/<stride>" when the stride is not the size.
  std::string describe_window(const char* kind) const;

  int size_, stride_;
};

/// The maximum of each window; runs on every backend.
class maxpool_layer final : public pooling_layer {
public:
  using pooling_layer::pooling_layer;

  std::string describe() const override { return describe_window("maxpool"); }
  bool supports(const compute_backend&) const override { return true; }
  void reserve(compute_backend& be, int batch) override;
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;

private:
  backend_buffer argmax_;
  int capacity_ = 0;
};

/// The mean of each window; host backends.
class avgpool_layer final : public pooling_layer {
public:
  using pooling_layer::pooling_layer;

  std::string describe() const override { return describe_window("avgpool"); }
  void forward(compute_backend& be, const float* params, const float* x,
               float* y, int batch) override;
  void backward(compute_backend& be, const float* params, const float* x,
                const float* y, float* dy, float* dx, float* grads,
                int batch) override;
};

} // namespace troupe

#include "models/conv_layers.hpp"

#include <algorithm>

namespace troupe {

// -- conv2d -------------------------------------------------------------------

conv2d_layer::conv2d_layer(param_layout& layout, const std::string& name,
                           image_shape in, int out_channels, int kernel,
                           int stride, int pad, activation act)
  : in_(in), out_c_(out_channels), kernel_(kernel), stride_(stride), pad_(pad),
    act_(act) {
  w_ = layout.add(name + "/w", {kernel, kernel, in.channels, out_channels});
  b_ = layout.add(name + "/b", {out_channels});
}

std::string conv2d_layer::describe() const {
  return "conv " + std::to_string(kernel_) + "x" + std::to_string(kernel_)
         + (stride_ > 1 ? "/" + std::to_string(stride_) : "") + " "
         + std::to_string(in_.channels) + "->" + std::to_string(out_c_) + " "
         + to_string(act_);
}

void conv2d_layer::init(float* flat, const model_config& cfg,
                        splitmix64& rng) const {
  int fan_in = kernel_ * kernel_ * in_.channels;
  int fan_out = kernel_ * kernel_ * out_c_;
  init_weights(flat + w_, static_cast<size_t>(fan_in) * out_c_, fan_in, fan_out,
               cfg, rng);
  std::fill(flat + b_, flat + b_ + out_c_, 0.f);
}

compute_backend::conv_shape conv2d_layer::geometry(int batch) const {
  return {batch, in_.height, in_.width, in_.channels, kernel_, stride_, pad_};
}

void conv2d_layer::reserve(compute_backend& be, int batch) {
  if (batch <= capacity_)
    return;
  auto g = geometry(batch);
  if (size_t bytes = be.conv_workspace(g, out_c_); bytes > 0) {
    direct_ = true;
    cols_ = {};
    workspace_ = be.allocate(bytes);
  } else {
    size_t rows = static_cast<size_t>(batch) * g.out_height() * g.out_width();
    cols_ = be.allocate(rows * static_cast<size_t>(g.patch()) * sizeof(float));
  }
  capacity_ = batch;
}

void conv2d_layer::forward(compute_backend& be, const float* params,
                           const float* x, float* y, int batch) {
  auto g = geometry(batch);
  if (direct_) {
    be.conv2d_forward(x, g, params + w_, out_c_, params + b_, act_, y,
                      workspace_.floats());
    return;
  }
  int rows = batch * g.out_height() * g.out_width();
  be.im2col(x, g, cols_.floats());
  // y (rows, out_c) = cols (rows, patch) * W (patch, out_c); rows are
  // (image, y, x), so y is NHWC.
  be.gemm(false, false, rows, out_c_, g.patch(), 1.f, cols_.floats(), g.patch(),
          params + w_, out_c_, 0.f, y, out_c_);
  be.bias_activation_forward(act_, y, params + b_, rows, out_c_);
}

void conv2d_layer::backward(compute_backend& be, const float* params,
                            const float*, const float* y, float* dy, float* dx,
                            float* grads, int batch) {
  auto g = geometry(batch);
  int rows = batch * g.out_height() * g.out_width();
  be.activation_backward(act_, y, dy, static_cast<size_t>(rows) * out_c_);
  if (direct_) {
    be.conv2d_backward(g, params + w_, out_c_, dy, grads + w_, grads + b_, dx,
                       workspace_.floats());
    return;
  }
  // dW (patch, out_c) = cols^T (patch, rows) * dz (rows, out_c); sets dW.
  be.gemm(true, false, g.patch(), out_c_, rows, 1.f, cols_.floats(), g.patch(),
          dy, out_c_, 0.f, grads + w_, out_c_);
  be.bias_backward(dy, grads + b_, rows, out_c_);
  if (dx == nullptr)
    return;
  // dcols (rows, patch) = dz (rows, out_c) * W^T (out_c, patch), written over
  // cols, which dW no longer needs; then scatter back to image layout.
  be.gemm(false, true, rows, g.patch(), out_c_, 1.f, dy, out_c_, params + w_,
          out_c_, 0.f, cols_.floats(), g.patch());
  be.col2im(cols_.floats(), g, dx);
}

double conv2d_layer::gemm_flops(int batch, bool need_dx) const {
  auto g = geometry(batch);
  double rows = static_cast<double>(batch) * g.out_height() * g.out_width();
  double one = 2.0 * rows * kernel_ * kernel_ * in_.channels * out_c_;
  return one * (need_dx ? 3 : 2);
}

} // namespace troupe

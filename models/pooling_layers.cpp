#include "models/pooling_layers.hpp"

#include <algorithm>

namespace troupe {

std::string pooling_layer::describe_window(const char* kind) const {
  return std::string{kind} + " " + std::to_string(size_) + "x"
         + std::to_string(size_)
         + (stride_ != size_ ? "/" + std::to_string(stride_) : "");
}

// -- maxpool ------------------------------------------------------------------

void maxpool_layer::reserve(compute_backend& be, int batch) {
  if (batch <= capacity_)
    return;
  argmax_ = be.allocate(static_cast<size_t>(batch) * output_size()
                        * sizeof(int32_t));
  capacity_ = batch;
}

void maxpool_layer::forward(compute_backend& be, const float*, const float* x,
                            float* y, int batch) {
  be.maxpool_forward(x, batch, in_.height, in_.width, in_.channels, size_,
                     stride_, y, argmax_.ints());
}

void maxpool_layer::backward(compute_backend& be, const float*, const float*,
                             const float*, float* dy, float* dx, float*,
                             int batch) {
  if (dx == nullptr)
    return;
  // Adds where windows overlap (stride < size): both backends scatter-add.
  be.maxpool_backward(dy, argmax_.ints(),
                      static_cast<size_t>(batch) * output_size(), dx,
                      static_cast<size_t>(batch) * in_.size());
}

// -- avgpool ------------------------------------------------------------------

void avgpool_layer::forward(compute_backend&, const float*, const float* x,
                            float* y, int batch) {
  const auto out = output_shape();
  const int c = in_.channels;
  const float scale = 1.f / static_cast<float>(size_ * size_);
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < out.height; ++oy)
      for (int ox = 0; ox < out.width; ++ox) {
        float* sum =
          y + ((static_cast<size_t>(b) * out.height + oy) * out.width + ox) * c;
        std::fill(sum, sum + c, 0.f);
        for (int ky = 0; ky < size_; ++ky)
          for (int kx = 0; kx < size_; ++kx) {
            const float* xi = x
                              + ((static_cast<size_t>(b) * in_.height
                                  + oy * stride_ + ky)
                                   * in_.width
                                 + ox * stride_ + kx)
                                  * c;
            for (int ch = 0; ch < c; ++ch)
              sum[ch] += xi[ch];
          }
        for (int ch = 0; ch < c; ++ch)
          sum[ch] *= scale;
      }
}

void avgpool_layer::backward(compute_backend&, const float*, const float*,
                             const float*, float* dy, float* dx, float*,
                             int batch) {
  if (dx == nullptr)
    return;
  const auto out = output_shape();
  const int c = in_.channels;
  const float scale = 1.f / static_cast<float>(size_ * size_);
  std::fill(dx, dx + static_cast<size_t>(batch) * in_.size(), 0.f);
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < out.height; ++oy)
      for (int ox = 0; ox < out.width; ++ox) {
        const float* g =
          dy
          + ((static_cast<size_t>(b) * out.height + oy) * out.width + ox) * c;
        for (int ky = 0; ky < size_; ++ky)
          for (int kx = 0; kx < size_; ++kx) {
            float* di = dx
                        + ((static_cast<size_t>(b) * in_.height + oy * stride_
                            + ky)
                             * in_.width
                           + ox * stride_ + kx)
                            * c;
            for (int ch = 0; ch < c; ++ch)
              di[ch] += g[ch] * scale;
          }
      }
}

} // namespace troupe

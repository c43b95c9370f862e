// The portable kernels (plain loops, the reference) and the choice of set.
#include "runtime/compute/conv_kernels.hpp"
#include "runtime/compute/cpu_features.hpp"

namespace troupe::conv {

namespace {

/// The pixel of the padded batch where output row m's window starts.
const float* window(const padded_images& x, int64_t m) {
  const int64_t per_image = static_cast<int64_t>(x.out_height())
                            * x.out_width();
  const int64_t image = m / per_image, rest = m % per_image;
  const int64_t oy = rest / x.out_width(), ox = rest % x.out_width();
  return x.data + static_cast<size_t>(image) * x.image_floats()
         + static_cast<size_t>(oy * x.width + ox) * x.channels;
}

void forward(const padded_images& x, const float* filters, int n,
             const float* bias, bool relu, float* y, int64_t m0, int64_t m1) {
  const int run = x.kernel * x.channels, patch = x.patch();
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  for (int64_t m = m0; m < m1; ++m) {
    const float* pix = window(x, m);
    for (int j = 0; j < n; ++j) {
      const float* f = filters
                       + static_cast<size_t>(j / panel_width) * patch
                           * panel_width
                       + j % panel_width;
      float sum = 0.f;
      for (int ky = 0; ky < x.kernel; ++ky)
        for (int t = 0; t < run; ++t)
          sum += pix[ky * row_stride + t]
                 * f[static_cast<size_t>(ky * run + t) * panel_width];
      if (bias != nullptr)
        sum += bias[j];
      y[static_cast<size_t>(m) * n + j] = relu && !(sum > 0.f) ? 0.f : sum;
    }
  }
}

void filter_grad(const padded_images& x, const float* dy, int n,
                 int64_t batch_rows, int b0, int b1, float* dw) {
  const int run = x.kernel * x.channels, patch = x.patch();
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  const int64_t per_image = static_cast<int64_t>(x.out_height())
                            * x.out_width();
  for (int64_t m = b0 * per_image; m < b1 * per_image; ++m) {
    const float* pix = window(x, m);
    for (int q = 0; q < patch; ++q) {
      const float a = pix[(q / run) * row_stride + q % run];
      for (int j = 0; j < n; ++j)
        dw[static_cast<size_t>(q) * n + j] +=
          a
          * dy[(static_cast<size_t>(j / panel_width) * batch_rows + m)
                 * panel_width
               + j % panel_width];
    }
  }
}

} // namespace

void row_windows(const padded_images& x, int64_t m, int rows, int count,
                 const float** window) {
  const int out_h = x.out_height(), out_w = x.out_width();
  const int64_t per_image = static_cast<int64_t>(out_h) * out_w;
  int64_t image = m / per_image;
  const auto rest = static_cast<int>(m % per_image);
  int oy = rest / out_w, ox = rest % out_w;
  for (int r = 0; r < count; ++r) {
    if (r >= rows) {
      window[r] = window[rows - 1];
      continue;
    }
    window[r] = x.data + static_cast<size_t>(image) * x.image_floats()
                + (static_cast<size_t>(oy) * x.width + ox) * x.channels;
    if (++ox == out_w) {
      ox = 0;
      if (++oy == out_h) {
        oy = 0;
        ++image;
      }
    }
  }
}

const kernels& generic_kernels() {
  static const kernels set{"generic", 1, &forward, &filter_grad};
  return set;
}

const kernels& chosen_kernels() {
  static const kernels& chosen = pick_kernels(avx512_kernels(), avx2_kernels(),
                                              generic_kernels());
  return chosen;
}

} // namespace troupe::conv

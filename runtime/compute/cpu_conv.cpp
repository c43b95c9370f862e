#include "runtime/compute/cpu_conv.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/compute/cpu_activation.hpp"
#include "runtime/compute/thread_pool.hpp"

namespace troupe::cpu_conv {

namespace {

using conv::panel_width;
using conv::panels;

/// Regions start on 16-float (64-byte) boundaries.
size_t round_up(size_t floats) {
  return (floats + 15) / 16 * 16;
}

/// The zero border around dy that turns the input gradient into a
/// convolution: kernel - 1 - pad on each side.
int dx_border(const shape& s) {
  return s.kernel - 1 - s.pad;
}

/// Where each array lives in the workspace, in floats.
struct layout {
  size_t x_pad, filters, dy_pad, dy_packed, partials, partial_floats, end;
};

layout regions(const shape& s, int out_c, int threads) {
  const size_t batch = static_cast<size_t>(s.batch);
  const size_t padded = static_cast<size_t>(s.height + 2 * s.pad)
                        * (s.width + 2 * s.pad) * s.channels;
  const int q = dx_border(s);
  const size_t rows = batch * s.out_height() * s.out_width();
  const size_t dy_padded = static_cast<size_t>(s.out_height() + 2 * q)
                           * (s.out_width() + 2 * q) * out_c;
  const size_t taps = static_cast<size_t>(s.kernel) * s.kernel;
  layout l{};
  size_t at = 0;
  auto take = [&at](size_t floats) {
    size_t offset = at;
    at += round_up(floats);
    return offset;
  };
  l.x_pad = take(batch * padded);
  l.filters = take(std::max(panels(out_c) * taps * s.channels,
                            panels(s.channels) * taps * out_c)
                   * panel_width);
  l.dy_pad = take(batch * dy_padded);
  l.dy_packed = take(panels(out_c) * rows * panel_width);
  // Per thread: a filter gradient and a bias gradient to sum at the end.
  l.partial_floats = round_up(taps * s.channels * out_c + out_c);
  l.partials = take(static_cast<size_t>(threads) * l.partial_floats);
  l.end = at;
  return l;
}

/// out = images [b0, b1) of x (h, w, c) inside a zero border of `border`.
void pad_images(const float* x, int h, int w, int c, int border, float* out,
                int64_t b0, int64_t b1) {
  const size_t in_row = static_cast<size_t>(w) * c;
  const size_t out_row = static_cast<size_t>(w + 2 * border) * c;
  const size_t edge = static_cast<size_t>(border) * c;
  for (int64_t b = b0; b < b1; ++b) {
    const float* src = x + static_cast<size_t>(b) * h * in_row;
    float* img = out + static_cast<size_t>(b) * (h + 2 * border) * out_row;
    std::fill(img, img + border * out_row, 0.f);
    for (int y = 0; y < h; ++y) {
      float* row = img + (border + y) * out_row;
      std::fill(row, row + edge, 0.f);
      std::memcpy(row + edge, src + y * in_row, in_row * sizeof(float));
      std::fill(row + edge + in_row, row + out_row, 0.f);
    }
    float* bottom = img + (border + h) * out_row;
    std::fill(bottom, bottom + border * out_row, 0.f);
  }
}

/// packed panel p, row q, column j = w[q * n + p * 16 + j] (0 past n).
void pack_filters(const float* w, int rows, int n, float* packed) {
  for (int p = 0; p < panels(n); ++p)
    for (int q = 0; q < rows; ++q) {
      float* dst = packed + (static_cast<size_t>(p) * rows + q) * panel_width;
      for (int j = 0; j < panel_width; ++j) {
        const int col = p * panel_width + j;
        dst[j] = col < n ? w[static_cast<size_t>(q) * n + col] : 0.f;
      }
    }
}

/// The filters of the input gradient, packed: row (ky, kx, o), column c =
/// w[(kernel-1-ky, kernel-1-kx, c), o].
void pack_flipped_filters(const float* w, int kernel, int channels, int out_c,
                          float* packed) {
  const int rows = kernel * kernel * out_c;
  for (int p = 0; p < panels(channels); ++p)
    for (int ky = 0; ky < kernel; ++ky)
      for (int kx = 0; kx < kernel; ++kx)
        for (int o = 0; o < out_c; ++o) {
          const int q = (ky * kernel + kx) * out_c + o;
          const float* src = w
                             + static_cast<size_t>(((kernel - 1 - ky) * kernel
                                                    + (kernel - 1 - kx))
                                                   * channels)
                                 * out_c
                             + o;
          float* dst = packed
                       + (static_cast<size_t>(p) * rows + q) * panel_width;
          for (int j = 0; j < panel_width; ++j) {
            const int c = p * panel_width + j;
            dst[j] = c < channels ? src[static_cast<size_t>(c) * out_c] : 0.f;
          }
        }
}

/// Parts to split `rows` output rows into: one per thread when alone,
/// else four per thread, so a thread slowed by the machine hands work on.
int row_parts(thread_pool& pool, int64_t rows) {
  const int parts = pool.size() == 1 ? 1 : 4 * pool.size();
  return static_cast<int>(std::min<int64_t>(parts, std::max<int64_t>(rows, 1)));
}

/// Runs the forward loop over all rows of x's convolution, split by rows
/// at multiples of the set's tile.
void forward_rows(const conv::kernels& k, thread_pool& pool,
                  const conv::padded_images& x, int batch, const float* filters,
                  int n, const float* bias, bool relu, float* y) {
  const int64_t rows = static_cast<int64_t>(batch) * x.out_height()
                       * x.out_width();
  const int parts = row_parts(pool, rows);
  auto aligned = [&](int i) {
    return i == parts ? rows : rows * i / parts / k.tile_rows * k.tile_rows;
  };
  pool.parallel_for(parts, [&](int i) {
    const int64_t m0 = aligned(i), m1 = aligned(i + 1);
    if (m0 < m1)
      k.forward(x, filters, n, bias, relu, y, m0, m1);
  });
}

/// Runs fn(first image, end image) over `parts` near-equal ranges of the
/// batch, one pool task each.
template <class Fn>
void by_images(thread_pool& pool, int batch, int parts, Fn&& fn) {
  pool.parallel_for(parts, [&](int i) {
    auto [b0, b1] = split_range(batch, parts, i);
    fn(b0, b1, i);
  });
}

/// pad_images over the whole batch, split over the pool's threads.
void pad_batch(thread_pool& pool, const float* x, int batch, int h, int w,
               int c, int border, float* out) {
  by_images(pool, batch, std::min(pool.size(), std::max(batch, 1)),
            [&](int64_t b0, int64_t b1, int) {
              pad_images(x, h, w, c, border, out, b0, b1);
            });
}

} // namespace

bool supports(const shape& s) {
  return s.stride == 1 && s.pad >= 0 && s.pad < s.kernel && s.batch >= 0;
}

size_t workspace_floats(const shape& s, int out_c, int threads) {
  return regions(s, out_c, threads).end;
}

void forward(const conv::kernels& k, thread_pool& pool, const float* x,
             const shape& s, const float* w, int out_c, const float* bias,
             activation act, float* y, float* workspace) {
  const layout l = regions(s, out_c, pool.size());
  float* x_pad = workspace + l.x_pad;
  pad_batch(pool, x, s.batch, s.height, s.width, s.channels, s.pad, x_pad);
  float* filters = workspace + l.filters;
  pack_filters(w, s.patch(), out_c, filters);
  const conv::padded_images padded{x_pad, s.height + 2 * s.pad,
                                   s.width + 2 * s.pad, s.channels, s.kernel};
  const bool relu = act == activation::relu;
  forward_rows(k, pool, padded, s.batch, filters, out_c, bias, relu, y);
  if (act != activation::relu && act != activation::identity)
    apply_activation(act, y,
                     static_cast<size_t>(s.batch) * s.out_height()
                       * s.out_width() * out_c);
}

void backward(const conv::kernels& k, thread_pool& pool, const shape& s,
              const float* w, int out_c, const float* dy, float* dw, float* db,
              float* dx, float* workspace) {
  const int threads = pool.size();
  const layout l = regions(s, out_c, threads);
  const int64_t per_image = static_cast<int64_t>(s.out_height())
                            * s.out_width();
  const int64_t rows = per_image * s.batch;
  const size_t dw_floats = static_cast<size_t>(s.patch()) * out_c;
  float* packed = workspace + l.dy_packed;
  auto partial = [&](int i) {
    return workspace + l.partials + i * l.partial_floats;
  };
  // Each part packs its images' rows of dy into panels, sums their bias
  // gradient, and adds their filter gradient into its own partial sums.
  // (Split by rows of the filter gradient instead, each part over the
  // whole batch, the CNN ran 5% slower on two threads: each part reads all
  // of dy and of the input.)
  by_images(pool, s.batch, threads, [&](int64_t b0, int64_t b1, int i) {
    float* part_dw = partial(i);
    float* part_db = part_dw + dw_floats;
    std::fill(part_dw, part_dw + dw_floats + out_c, 0.f);
    for (int64_t m = b0 * per_image; m < b1 * per_image; ++m) {
      const float* row = dy + static_cast<size_t>(m) * out_c;
      for (int j = 0; j < out_c; ++j)
        part_db[j] += row[j];
      for (int p = 0; p < panels(out_c); ++p) {
        float* dst = packed + (static_cast<size_t>(p) * rows + m) * panel_width;
        const float* src = row + p * panel_width;
        const int cols = std::min(panel_width, out_c - p * panel_width);
        if (cols == panel_width) { // a copy of 16 the compiler unrolls
          for (int j = 0; j < panel_width; ++j) // (a call to memcpy each
            dst[j] = src[j];                    // was 1% of the step)
          continue;
        }
        std::memcpy(dst, src, cols * sizeof(float));
        std::fill(dst + cols, dst + panel_width, 0.f);
      }
    }
    const conv::padded_images x_pad{workspace + l.x_pad, s.height + 2 * s.pad,
                                    s.width + 2 * s.pad, s.channels, s.kernel};
    k.filter_grad(x_pad, packed, out_c, rows, static_cast<int>(b0),
                  static_cast<int>(b1), part_dw);
  });
  std::copy(partial(0), partial(0) + dw_floats, dw);
  std::copy(partial(0) + dw_floats, partial(0) + dw_floats + out_c, db);
  for (int i = 1; i < threads; ++i) {
    const float* part = partial(i);
    for (size_t j = 0; j < dw_floats; ++j)
      dw[j] += part[j];
    for (int j = 0; j < out_c; ++j)
      db[j] += part[dw_floats + j];
  }
  if (dx == nullptr)
    return;
  const int q = dx_border(s);
  float* dy_pad = workspace + l.dy_pad;
  pad_batch(pool, dy, s.batch, s.out_height(), s.out_width(), out_c, q, dy_pad);
  float* filters = workspace + l.filters;
  pack_flipped_filters(w, s.kernel, s.channels, out_c, filters);
  const conv::padded_images padded{dy_pad, s.out_height() + 2 * q,
                                   s.out_width() + 2 * q, out_c, s.kernel};
  forward_rows(k, pool, padded, s.batch, filters, s.channels, nullptr, false,
               dx);
}

} // namespace troupe::cpu_conv

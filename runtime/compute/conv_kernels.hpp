// The inner loops of the CPU backend's direct convolution (stride 1, any
// padding), one set per instruction set. A convolution is a matrix product
// whose left operand is never written out: row (image, oy, ox), column
// (ky, kx, c) of it is x[image, oy + ky, ox + kx, c] of the zero-padded
// input, so for each ky a row is kernel*channels contiguous floats of the
// padded image. The kernels read those runs in place. Against im2col + sgemm
// this saves the im2col matrix (40 MB at the CNN's batch of 64), the pass
// that writes it, and sgemm's packing of it; cpu_conv.cpp says how a
// convolution and its gradients map onto these loops.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::conv {

/// Filters and gradients are packed in panels of this many output columns.
constexpr int panel_width = 16;

inline int panels(int columns) {
  return (columns + panel_width - 1) / panel_width;
}

/// A batch of NHWC images whose zero border is already in place: height and
/// width include the padding.
struct padded_images {
  const float* data;
  int height, width, channels;
  int kernel; ///< of the convolution that reads them
  int out_height() const { return height - kernel + 1; }
  int out_width() const { return width - kernel + 1; }
  /// Columns of the implicit matrix: kernel * kernel * channels.
  int patch() const { return kernel * kernel * channels; }
  size_t image_floats() const {
    return static_cast<size_t>(height) * width * channels;
  }
};

/// window[r] = where output row m + r's window starts in x, for r < rows;
/// rows up to `count` repeat the last (a tile's rows past the output's
/// end). One division for the first row, steps after it: two divisions a
/// row were 2% of the CNN's step.
void row_windows(const padded_images& x, int64_t m, int rows, int count,
                 const float** window);

struct kernels {
  const char* isa; ///< "avx512", "avx2+fma" or "generic"
  /// Output rows forward() computes at once: a range it is given is best
  /// a multiple of this (a tail costs a whole tile).
  int tile_rows;

  /// Rows [m0, m1) of y (rows (image, oy, ox), n columns, row stride n) =
  /// the convolution of x with `filters` plus bias (n values, or null),
  /// then max(0, .) when `relu`. `filters` is packed: panels(n) panels,
  /// each (patch, panel_width) row-major, columns past n zero.
  void (*forward)(const padded_images& x, const float* filters, int n,
                  const float* bias, bool relu, float* y, int64_t m0,
                  int64_t m1);

  /// dw (patch, n), row stride n, += the sum over images [b0, b1) of the
  /// implicit matrix's rows times dy's rows. dy is packed: panels(n)
  /// panels, each (all rows of the batch, panel_width), columns past n
  /// zero; `batch_rows` is the batch's row count (the panel stride).
  void (*filter_grad)(const padded_images& x, const float* dy, int n,
                      int64_t batch_rows, int b0, int b1, float* dw);
};

/// The set chosen_cpu_kernels() names (cpu_features.hpp:
/// TROUPE_CPU_KERNELS, or the fastest this CPU runs).
const kernels& chosen_kernels();
/// Portable loops, the reference the others are tested against.
const kernels& generic_kernels();
/// The AVX2+FMA set, or null where it is not built or the CPU lacks it.
const kernels* avx2_kernels();
/// The AVX-512 set (F, with 32 zmm registers saved by the OS), or null
/// where it is not built or the CPU or OS lacks it.
const kernels* avx512_kernels();

} // namespace troupe::conv

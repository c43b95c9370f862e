// The per-element arithmetic of troupe's CUDA kernels (kernels.cu) as plain
// functions that compile for the device under nvcc and for the host under
// any compiler. The kernels are thin loops over these; the tests run them
// on the host against the CPU backend, so the index and formula logic is
// checked on every machine, GPU or not.
//
// No CUDA header is needed here, so unlike the rest of gpu/ this header
// does not require TROUPE_HAVE_CUDA: tests/gpu/kernel_math_test.cpp uses it
// in every build.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/compute/backend.hpp"

#if defined(__CUDACC__)
#define TROUPE_HD __host__ __device__
#else
#define TROUPE_HD
#endif

namespace troupe::gpu {

// -- gemm --------------------------------------------------------------------

/// The column-major gemm (cuBLAS's convention) that computes a row-major
/// one. A row-major (rows, cols) matrix with row stride ld is the
/// column-major (cols, rows) matrix with leading dimension ld, i.e. its
/// transpose, with no copy. So the row-major C (m, n) = op(A) op(B) is the
/// column-major C^T (n, m) = op(B)^T (n, k) * op(A)^T (k, m): B first,
/// then A, with the same transpose flags and m and n swapped.
struct col_major_gemm {
  bool trans_first, trans_second;
  int m, n, k;
  const float* first;
  int ld_first;
  const float* second;
  int ld_second;
};

inline col_major_gemm to_col_major(bool trans_a, bool trans_b, int m, int n,
                                   int k, const float* a, int lda,
                                   const float* b, int ldb) {
  return {trans_b, trans_a, n, m, k, b, ldb, a, lda};
}

// -- element-wise ------------------------------------------------------------

/// act(v), with the CPU backend's formulas (runtime/compute/cpu_backend.cpp).
TROUPE_HD inline float activate(activation act, float v) {
  switch (act) {
    case activation::identity: return v;
    case activation::sigmoid: return 1.f / (1.f + expf(-v));
    case activation::tanh: return tanhf(v);
    case activation::relu: return v > 0.f ? v : 0.f;
  }
  return v;
}

/// dy * act'(.) through the activation's output `out`.
TROUPE_HD inline float activation_grad(activation act, float out, float dy) {
  switch (act) {
    case activation::identity: return dy;
    case activation::sigmoid: return dy * (out * (1.f - out));
    case activation::tanh: return dy * (1.f - out * out);
    case activation::relu: return out > 0.f ? dy : 0.f;
  }
  return dy;
}

// -- softmax cross-entropy ---------------------------------------------------

/// One row: sets *loss (NaN for a label outside [0, classes)) and *hit,
/// and d (classes) = scale * (softmax - onehot) when d is not null. The
/// CPU backend's formulas, double-precision loss included.
TROUPE_HD inline void softmax_row(const float* z, int32_t label, int classes,
                                  float* d, float scale, double* loss,
                                  int32_t* hit) {
  int best = 0;
  for (int j = 1; j < classes; ++j)
    if (z[j] > z[best])
      best = j;
  const float zmax = z[best];
  double sum = 0;
  for (int j = 0; j < classes; ++j)
    sum += exp(static_cast<double>(z[j] - zmax));
  const bool valid = label >= 0 && label < classes;
  *loss = valid ? log(sum) - static_cast<double>(z[label] - zmax) : nan("");
  *hit = valid && best == label ? 1 : 0;
  if (d == nullptr)
    return;
  const float inv = static_cast<float>(1.0 / sum);
  for (int j = 0; j < classes; ++j)
    d[j] = scale * expf(z[j] - zmax) * inv;
  if (valid)
    d[label] -= scale;
  else
    d[0] = nanf("");
}

// -- convolution -------------------------------------------------------------

/// conv_shape's fields and derived sizes, passed by value to kernels.
struct conv_geometry {
  int batch, height, width, channels, kernel, stride, pad, oh, ow, patch;
};

inline conv_geometry geometry_of(const compute_backend::conv_shape& s) {
  return {s.batch,  s.height, s.width,        s.channels,    s.kernel,
          s.stride, s.pad,    s.out_height(), s.out_width(), s.patch()};
}

/// Element i of the im2col matrix (batch*oh*ow, patch), patch order
/// (ky, kx, c); 0 where the patch reaches into the padding.
TROUPE_HD inline float im2col_value(const float* x, const conv_geometry& g,
                                    size_t i) {
  const size_t row = i / g.patch;
  const int p = static_cast<int>(i - row * g.patch);
  const int ch = p % g.channels;
  const int kx = (p / g.channels) % g.kernel;
  const int ky = p / (g.channels * g.kernel);
  const int ox = static_cast<int>(row % g.ow);
  const int oy = static_cast<int>((row / g.ow) % g.oh);
  const size_t b = row / (static_cast<size_t>(g.ow) * g.oh);
  const int iy = oy * g.stride - g.pad + ky;
  const int ix = ox * g.stride - g.pad + kx;
  if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width)
    return 0.f;
  return x[((b * g.height + iy) * g.width + ix) * g.channels + ch];
}

/// Element i of dx (batch, h, w, c): the sum of every dcols entry that
/// im2col copied from that pixel. The CPU backend scatters in (oy, ox)
/// order, and oy grows as ky falls: walking ky and kx downwards adds the
/// same terms in the same order, so the two backends agree to the bit.
TROUPE_HD inline float col2im_value(const float* dcols, const conv_geometry& g,
                                    size_t i) {
  const int ch = static_cast<int>(i % g.channels);
  const int ix = static_cast<int>((i / g.channels) % g.width);
  const int iy = static_cast<int>((i / g.channels / g.width) % g.height);
  const size_t b = i / (static_cast<size_t>(g.channels) * g.width * g.height);
  float sum = 0.f;
  for (int ky = g.kernel - 1; ky >= 0; --ky) {
    const int ty = iy + g.pad - ky;
    if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh)
      continue;
    const int oy = ty / g.stride;
    for (int kx = g.kernel - 1; kx >= 0; --kx) {
      const int tx = ix + g.pad - kx;
      if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow)
        continue;
      const int ox = tx / g.stride;
      sum += dcols[((b * g.oh + oy) * g.ow + ox) * g.patch
                   + (ky * g.kernel + kx) * g.channels + ch];
    }
  }
  return sum;
}

/// Max-pool geometry: input (batch, h, w, c), windows size x size at
/// `stride`, output (batch, oh, ow, c).
struct pool_geometry {
  int h, w, c, size, stride, oh, ow;
};

/// Output element i of a max-pool: the maximum of its window (-inf for an
/// all-NaN window) and, in *where, its index into x; ties keep the first
/// in (ky, kx) order, as the CPU backend does.
TROUPE_HD inline float maxpool_value(const float* x, const pool_geometry& g,
                                     size_t i, int32_t* where) {
  const int ch = static_cast<int>(i % g.c);
  const int ox = static_cast<int>((i / g.c) % g.ow);
  const int oy = static_cast<int>((i / g.c / g.ow) % g.oh);
  const size_t b = i / (static_cast<size_t>(g.c) * g.ow * g.oh);
  float best = -INFINITY;
  *where = 0;
  for (int ky = 0; ky < g.size; ++ky)
    for (int kx = 0; kx < g.size; ++kx) {
      const size_t in =
        ((b * g.h + oy * g.stride + ky) * g.w + ox * g.stride + kx) * g.c + ch;
      if (x[in] > best) {
        best = x[in];
        *where = static_cast<int32_t>(in);
      }
    }
  return best;
}

} // namespace troupe::gpu

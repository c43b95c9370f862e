// The CPU's elementwise and per-row loops outside the matrix products:
// max-pooling, GELU and layer normalization, one set per instruction set
// (the same source, vector_loops.hpp, built three times: for baseline
// x86-64, for AVX2+FMA and for AVX-512), chosen at run time as the
// convolution's kernels are (conv_kernels.hpp, TROUPE_CPU_KERNELS).
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::vec {

struct kernels {
  const char* isa; ///< "avx512", "avx2+fma" or "generic"

  /// Max-pooling of images [b0, b1) of NHWC images (batch, h, w, c) over
  /// size x size windows every `stride` pixels: y (batch, oh, ow, c) and,
  /// per output, the index into x of the value that won (the first of
  /// equals).
  void (*maxpool)(const float* x, int b0, int b1, int h, int w, int c, int size,
                  int stride, float* y, int32_t* argmax);

  /// y = x * Phi(x), Phi the standard normal's distribution function.
  void (*gelu)(const float* x, float* y, size_t n);
  /// dx = dy * (Phi(x) + x * phi(x)), phi its density. dx may be dy.
  void (*gelu_grad)(const float* x, const float* dy, float* dx, size_t n);

  /// One row of c values: normalized = (x - mean) / sqrt(var + eps) (mean
  /// and variance in double, two passes), y = normalized * gamma + beta;
  /// returns 1 / sqrt(var + eps).
  float (*layernorm_row)(const float* x, const float* gamma, const float* beta,
                         float eps, size_t c, float* normalized, float* y);
  /// The gradients of one row: dgamma += dy * normalized, dbeta += dy, and
  /// (dx not null) dx = inv_std * (g - mean(g) - normalized *
  /// mean(g * normalized)) with g = dy * gamma.
  void (*layernorm_grad_row)(const float* normalized, const float* dy,
                             const float* gamma, float inv_std, size_t c,
                             float* dgamma, float* dbeta, float* dx);
};

/// The set TROUPE_CPU_KERNELS names, or the fastest this CPU runs.
const kernels& chosen_kernels();
/// Built for baseline x86-64 (or whatever the target is): the reference.
const kernels& generic_kernels();
/// Null where not built or the CPU (or OS) does not run it.
const kernels* avx2_kernels();
const kernels* avx512_kernels();

} // namespace troupe::vec

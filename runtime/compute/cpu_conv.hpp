// Direct convolution for the CPU backend (stride 1, padding below the
// kernel size): the forward pass, the filter and bias gradients and the
// input gradient, all through the loops of conv_kernels.hpp, split over the
// backend's threads by images.
//
//   forward   y  = conv(pad(x), W) + b           kernels.forward
//   filters   dW = patches(pad(x))^T dy           kernels.filter_grad
//   input     dx = conv(pad'(dy), flip(W)^T)      kernels.forward again
//
// The input gradient is the "full" correlation of dy with the filters
// rotated by 180 degrees and input/output channels swapped, so one forward
// loop serves both passes. The padded input the forward pass writes into
// the workspace is what the filter gradient reads: a layer keeps its
// workspace from forward to backward.
#pragma once

#include <cstddef>

#include "runtime/compute/backend.hpp"
#include "runtime/compute/conv_kernels.hpp"

namespace troupe {

class thread_pool;

namespace cpu_conv {

using shape = compute_backend::conv_shape;

/// Whether the direct path computes `s`: stride 1 and pad < kernel.
bool supports(const shape& s);

/// Floats of workspace a convolution of `s` with `out_c` filters needs when
/// split over `threads` threads.
size_t workspace_floats(const shape& s, int out_c, int threads);

/// y (rows (image, oy, ox), out_c) = act(conv(x, w) + bias); w is
/// (kernel, kernel, channels, out_c), bias (out_c) or null.
void forward(const conv::kernels& k, thread_pool& pool, const float* x,
             const shape& s, const float* w, int out_c, const float* bias,
             activation act, float* y, float* workspace);

/// Given dy (rows, out_c), the gradient at the convolution's output after
/// the activation's derivative: sets dw (w's shape), db (out_c) and, when
/// dx is not null, dx (x's shape). `workspace` must hold what the last
/// forward() of this shape left in it.
void backward(const conv::kernels& k, thread_pool& pool, const shape& s,
              const float* w, int out_c, const float* dy, float* dw, float* db,
              float* dx, float* workspace);

} // namespace cpu_conv
} // namespace troupe

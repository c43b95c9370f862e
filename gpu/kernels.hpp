// troupe's own CUDA kernels: what cuBLAS does not do. Each function
// launches on `stream` and returns at once; shapes and set/accumulate
// conventions are those of runtime/compute/backend.hpp. A bad launch throws
// backend_error; a fault inside a kernel surfaces at the next sync.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

#include "runtime/compute/backend.hpp"

namespace troupe::gpu {

/// x[0..n) = value.
void launch_fill(float* x, size_t n, float value, cudaStream_t stream);

/// y[i] += alpha * x[i], i < n.
void launch_axpy(size_t n, float alpha, const float* x, float* y,
                 cudaStream_t stream);

/// y (rows, cols) = act(y + bias), bias (cols) or null: the bias and the
/// activation in one pass over y.
void launch_bias_activation(activation act, float* y, const float* bias,
                            int rows, int cols, cudaStream_t stream);

/// dy *= act'(y) through the activation's output y; n elements.
void launch_activation_backward(activation act, const float* y, float* dy,
                                size_t n, cudaStream_t stream);

/// Column sums, deterministic: partial (blocks, cols) gets one partial sum
/// per block of rows, then db (cols) = the sum of the partials in block
/// order. `partial` must hold column_sum_blocks(rows) * cols floats.
int column_sum_blocks(int rows);
void launch_column_sum(const float* dy, float* db, int rows, int cols,
                       float* partial, cudaStream_t stream);

/// What softmax_cross_entropy accumulates on the device.
struct loss_totals {
  double loss_sum;
  long long correct;
};

/// Softmax cross-entropy, one thread per row: row_loss (rows) and row_hit
/// (rows) per row, dlogits (rows, classes) = scale * (softmax - onehot)
/// when not null; then *totals = the sums over rows, added in row order.
/// A label outside [0, classes) gives a NaN loss (reported upstream as a
/// non-finite loss), not an out-of-bounds read.
void launch_softmax_cross_entropy(const float* logits, const int32_t* labels,
                                  int rows, int classes, float* dlogits,
                                  float scale, double* row_loss,
                                  int32_t* row_hit, loss_totals* totals,
                                  cudaStream_t stream);

/// cols (batch*oh*ow, k*k*c) = zero-padded patches of x (batch, h, w, c),
/// patch order (ky, kx, c).
void launch_im2col(const float* x, const compute_backend::conv_shape& s,
                   float* cols, cudaStream_t stream);

/// dx (batch, h, w, c) = the sum of every dcols entry that im2col copied
/// from that pixel; a gather per pixel, so no atomics, adding in the CPU
/// backend's order (bitwise the same result).
void launch_col2im(const float* dcols, const compute_backend::conv_shape& s,
                   float* dx, cudaStream_t stream);

/// y, argmax (batch, oh, ow, c) over windows of size x size, no padding;
/// argmax indexes x. Ties keep the first maximum in (ky, kx) order.
void launch_maxpool_forward(const float* x, int batch, int h, int w, int c,
                            int size, int stride, float* y, int32_t* argmax,
                            cudaStream_t stream);

/// dx (n_x) = 0, then dx[argmax[i]] += dy[i] for i < n_y (atomic: windows
/// may overlap; with stride = size, as troupe's CNN uses, no two outputs
/// share an input and the result is exact).
void launch_maxpool_backward(const float* dy, const int32_t* argmax, size_t n_y,
                             float* dx, size_t n_x, cudaStream_t stream);

} // namespace troupe::gpu

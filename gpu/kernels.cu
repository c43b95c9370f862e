#include "gpu/kernels.hpp"

#include <algorithm>
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernel_math.hpp"

namespace troupe::gpu {

namespace {

constexpr int threads_per_block = 256;

/// Enough blocks to cover n with grid-stride loops, capped so that a huge
/// n does not launch millions of blocks (an H100 holds about 2000 at once).
unsigned blocks_for(size_t n) {
  size_t blocks = (n + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 8192));
}

#define TROUPE_GRID_STRIDE(i, n)                                               \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;  \
       i < (n); i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void fill_kernel(float* x, size_t n, float value) {
  TROUPE_GRID_STRIDE(i, n) x[i] = value;
}

__global__ void axpy_kernel(size_t n, float alpha, const float* x, float* y) {
  TROUPE_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

__global__ void bias_activation_kernel(activation act, float* y,
                                       const float* bias, size_t n, int cols) {
  TROUPE_GRID_STRIDE(i, n) {
    float v = y[i];
    if (bias != nullptr)
      v += bias[i % cols];
    y[i] = activate(act, v);
  }
}

__global__ void activation_backward_kernel(activation act, const float* y,
                                           float* dy, size_t n) {
  TROUPE_GRID_STRIDE(i, n) dy[i] = activation_grad(act, y[i], dy[i]);
}

// Column sums in two passes. Pass 1: block b sums rows [b*per, (b+1)*per)
// with a 32-column x 8-row thread tile, adding the 8 row lanes in lane
// order; pass 2: one block per column adds the blocks' partials in a fixed
// tree. No atomics, so every run adds in the same order.
constexpr int sum_tile_cols = 32, sum_tile_rows = 8;

__global__ void column_partial_kernel(const float* dy, float* partial, int rows,
                                      int cols, int per_block) {
  __shared__ float lanes[sum_tile_rows][sum_tile_cols];
  const int first = blockIdx.x * per_block;
  const int last = min(rows, first + per_block);
  for (int c0 = 0; c0 < cols; c0 += sum_tile_cols) {
    const int col = c0 + threadIdx.x;
    float sum = 0.f;
    if (col < cols)
      for (int r = first + threadIdx.y; r < last; r += sum_tile_rows)
        sum += dy[static_cast<size_t>(r) * cols + col];
    lanes[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      float total = 0.f;
      for (int lane = 0; lane < sum_tile_rows; ++lane)
        total += lanes[lane][threadIdx.x];
      partial[static_cast<size_t>(blockIdx.x) * cols + col] = total;
    }
    __syncthreads();
  }
}

__global__ void column_total_kernel(const float* partial, float* db, int blocks,
                                    int cols) {
  __shared__ float sums[threads_per_block];
  const int col = blockIdx.x;
  float sum = 0.f;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x)
    sum += partial[static_cast<size_t>(b) * cols + col];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    db[col] = sums[0];
}

// One thread per row: classification heads are narrow (10 classes here),
// and the CPU backend's formulas then carry over unchanged, double-precision
// loss included.
__global__ void softmax_cross_entropy_kernel(const float* logits,
                                             const int32_t* labels, int rows,
                                             int classes, float* dlogits,
                                             float scale, double* row_loss,
                                             int32_t* row_hit) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  const size_t first = static_cast<size_t>(r) * classes;
  softmax_row(logits + first, labels[r], classes,
              dlogits == nullptr ? nullptr : dlogits + first, scale,
              row_loss + r, row_hit + r);
}

__global__ void loss_total_kernel(const double* row_loss,
                                  const int32_t* row_hit, int rows,
                                  loss_totals* totals) {
  __shared__ double losses[threads_per_block];
  __shared__ long long hits[threads_per_block];
  double loss = 0;
  long long hit = 0;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    hit += row_hit[r];
  }
  losses[threadIdx.x] = loss;
  hits[threadIdx.x] = hit;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      losses[threadIdx.x] += losses[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss_sum = losses[0];
    totals->correct = hits[0];
  }
}

__global__ void im2col_kernel(const float* x, conv_geometry g, float* cols,
                              size_t n) {
  TROUPE_GRID_STRIDE(i, n) cols[i] = im2col_value(x, g, i);
}

__global__ void col2im_kernel(const float* dcols, conv_geometry g, float* dx,
                              size_t n) {
  TROUPE_GRID_STRIDE(i, n) dx[i] = col2im_value(dcols, g, i);
}

__global__ void maxpool_forward_kernel(const float* x, pool_geometry g,
                                       float* y, int32_t* argmax, size_t n) {
  TROUPE_GRID_STRIDE(i, n) y[i] = maxpool_value(x, g, i, argmax + i);
}

__global__ void maxpool_backward_kernel(const float* dy, const int32_t* argmax,
                                        size_t n_y, float* dx) {
  TROUPE_GRID_STRIDE(i, n_y) atomicAdd(dx + argmax[i], dy[i]);
}

} // namespace

void launch_fill(float* x, size_t n, float value, cudaStream_t stream) {
  if (n == 0)
    return;
  fill_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(x, n, value);
  TROUPE_LAUNCHED("fill_kernel");
}

void launch_axpy(size_t n, float alpha, const float* x, float* y,
                 cudaStream_t stream) {
  if (n == 0)
    return;
  axpy_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(n, alpha, x, y);
  TROUPE_LAUNCHED("axpy_kernel");
}

void launch_bias_activation(activation act, float* y, const float* bias,
                            int rows, int cols, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n == 0 || (bias == nullptr && act == activation::identity))
    return;
  bias_activation_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(
    act, y, bias, n, cols);
  TROUPE_LAUNCHED("bias_activation_kernel");
}

void launch_activation_backward(activation act, const float* y, float* dy,
                                size_t n, cudaStream_t stream) {
  if (n == 0 || act == activation::identity)
    return;
  activation_backward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(
    act, y, dy, n);
  TROUPE_LAUNCHED("activation_backward_kernel");
}

int column_sum_blocks(int rows) {
  // About 128 rows per block, at most 512 blocks: enough to fill the GPU
  // for the CNN's 800k-row gradients, few partials for the second pass.
  return std::clamp((rows + 127) / 128, 1, 512);
}

void launch_column_sum(const float* dy, float* db, int rows, int cols,
                       float* partial, cudaStream_t stream) {
  if (cols == 0)
    return;
  if (rows == 0) {
    launch_fill(db, static_cast<size_t>(cols), 0.f, stream);
    return;
  }
  const int blocks = column_sum_blocks(rows);
  const int per_block = (rows + blocks - 1) / blocks;
  column_partial_kernel<<<blocks, dim3(sum_tile_cols, sum_tile_rows), 0,
                          stream>>>(dy, partial, rows, cols, per_block);
  TROUPE_LAUNCHED("column_partial_kernel");
  column_total_kernel<<<cols, threads_per_block, 0, stream>>>(partial, db,
                                                              blocks, cols);
  TROUPE_LAUNCHED("column_total_kernel");
}

void launch_softmax_cross_entropy(const float* logits, const int32_t* labels,
                                  int rows, int classes, float* dlogits,
                                  float scale, double* row_loss,
                                  int32_t* row_hit, loss_totals* totals,
                                  cudaStream_t stream) {
  if (rows > 0) {
    const int blocks = (rows + threads_per_block - 1) / threads_per_block;
    softmax_cross_entropy_kernel<<<blocks, threads_per_block, 0, stream>>>(
      logits, labels, rows, classes, dlogits, scale, row_loss, row_hit);
    TROUPE_LAUNCHED("softmax_cross_entropy_kernel");
  }
  loss_total_kernel<<<1, threads_per_block, 0, stream>>>(row_loss, row_hit,
                                                         rows, totals);
  TROUPE_LAUNCHED("loss_total_kernel");
}

void launch_im2col(const float* x, const compute_backend::conv_shape& s,
                   float* cols, cudaStream_t stream) {
  auto g = geometry_of(s);
  const size_t n = static_cast<size_t>(g.batch) * g.oh * g.ow * g.patch;
  if (n == 0)
    return;
  im2col_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(x, g, cols, n);
  TROUPE_LAUNCHED("im2col_kernel");
}

void launch_col2im(const float* dcols, const compute_backend::conv_shape& s,
                   float* dx, cudaStream_t stream) {
  auto g = geometry_of(s);
  const size_t n = static_cast<size_t>(g.batch) * g.height * g.width
                   * g.channels;
  if (n == 0)
    return;
  col2im_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(dcols, g, dx,
                                                                 n);
  TROUPE_LAUNCHED("col2im_kernel");
}

void launch_maxpool_forward(const float* x, int batch, int h, int w, int c,
                            int size, int stride, float* y, int32_t* argmax,
                            cudaStream_t stream) {
  const pool_geometry g{
    h, w, c, size, stride, (h - size) / stride + 1, (w - size) / stride + 1};
  const size_t n = static_cast<size_t>(batch) * g.oh * g.ow * c;
  if (n == 0)
    return;
  maxpool_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(
    x, g, y, argmax, n);
  TROUPE_LAUNCHED("maxpool_forward_kernel");
}

void launch_maxpool_backward(const float* dy, const int32_t* argmax, size_t n_y,
                             float* dx, size_t n_x, cudaStream_t stream) {
  if (n_x > 0)
    TROUPE_CUDA(cudaMemsetAsync(dx, 0, n_x * sizeof(float), stream));
  if (n_y == 0)
    return;
  maxpool_backward_kernel<<<blocks_for(n_y), threads_per_block, 0, stream>>>(
    dy, argmax, n_y, dx);
  TROUPE_LAUNCHED("maxpool_backward_kernel");
}

} // namespace troupe::gpu

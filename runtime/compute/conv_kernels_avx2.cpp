// AVX2+FMA kernels. This file alone is compiled with -mavx2 -mfma (see
// runtime/CMakeLists.txt) and runs only after the CPU said it has both.
//
// Both loops compute a 6 x 16 tile of their output in twelve registers: per
// step of the sum they load 16 floats of the packed right operand (two
// vectors) and broadcast one float of each of 6 rows, then issue 12 FMAs,
// the register blocking of BLIS's Haswell sgemm kernel. Twelve independent
// accumulators cover the FMA latency (4 cycles, 2 per cycle on Zen 3 and
// Skylake); 8 loads per 12 FMAs stay within the load ports. Rows past the
// end of the output repeat the last real row and are not stored, so a tail
// costs a partial tile of work and no second code path.
#include "runtime/compute/conv_kernels.hpp"
#include "runtime/compute/cpu_features.hpp"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include <algorithm>
#include <immintrin.h>

namespace troupe::conv {

namespace {

constexpr int tile_rows = 6;

struct tile {
  __m256 c[tile_rows][2];
  void zero() {
#pragma GCC unroll 6
    for (int r = 0; r < tile_rows; ++r)
      c[r][0] = c[r][1] = _mm256_setzero_ps();
  }
};

/// acc(r, :) += sum over o < outer, t < inner of a[r][o * a_outer + t *
/// a_step] * b[(o * inner + t) * panel_width + :]: the packed right operand
/// runs on through both loops, the left one jumps by a_outer between runs
/// (the next kernel row in forward(), the next image row in filter_grad()).
/// Both loops are in here so that the sums stay in registers for the whole
/// tile (a call per run stored and reloaded them every 5 steps in the first
/// layer). They live in twelve named locals: GCC keeps a struct reached
/// through a reference in memory, and a store per FMA halves speed.
__attribute__((always_inline)) inline void
accumulate(tile& acc, const float* const (&a)[tile_rows], size_t a_step,
           size_t a_outer, const float* b, int inner, int outer) {
  __m256 c00 = acc.c[0][0], c01 = acc.c[0][1], c10 = acc.c[1][0],
         c11 = acc.c[1][1], c20 = acc.c[2][0], c21 = acc.c[2][1],
         c30 = acc.c[3][0], c31 = acc.c[3][1], c40 = acc.c[4][0],
         c41 = acc.c[4][1], c50 = acc.c[5][0], c51 = acc.c[5][1];
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4],
              *a5 = a[5];
  for (int o = 0; o < outer; ++o)
    for (int t = 0; t < inner; ++t) {
      const __m256 b0 = _mm256_loadu_ps(b);
      const __m256 b1 = _mm256_loadu_ps(b + 8);
      b += panel_width;
      const size_t i = static_cast<size_t>(o) * a_outer
                       + static_cast<size_t>(t) * a_step;
      __m256 v = _mm256_broadcast_ss(a0 + i);
      c00 = _mm256_fmadd_ps(v, b0, c00);
      c01 = _mm256_fmadd_ps(v, b1, c01);
      v = _mm256_broadcast_ss(a1 + i);
      c10 = _mm256_fmadd_ps(v, b0, c10);
      c11 = _mm256_fmadd_ps(v, b1, c11);
      v = _mm256_broadcast_ss(a2 + i);
      c20 = _mm256_fmadd_ps(v, b0, c20);
      c21 = _mm256_fmadd_ps(v, b1, c21);
      v = _mm256_broadcast_ss(a3 + i);
      c30 = _mm256_fmadd_ps(v, b0, c30);
      c31 = _mm256_fmadd_ps(v, b1, c31);
      v = _mm256_broadcast_ss(a4 + i);
      c40 = _mm256_fmadd_ps(v, b0, c40);
      c41 = _mm256_fmadd_ps(v, b1, c41);
      v = _mm256_broadcast_ss(a5 + i);
      c50 = _mm256_fmadd_ps(v, b0, c50);
      c51 = _mm256_fmadd_ps(v, b1, c51);
    }
  acc.c[0][0] = c00, acc.c[0][1] = c01, acc.c[1][0] = c10, acc.c[1][1] = c11;
  acc.c[2][0] = c20, acc.c[2][1] = c21, acc.c[3][0] = c30, acc.c[3][1] = c31;
  acc.c[4][0] = c40, acc.c[4][1] = c41, acc.c[5][0] = c50, acc.c[5][1] = c51;
}

/// Writes (accumulate: adds) rows [0, rows) and columns [0, cols) of the
/// tile to out (row stride ld); bias and relu as in forward().
void store(const tile& acc, int rows, int cols, float* out, size_t ld,
           const float* bias, bool relu, bool accumulate_into) {
  alignas(32) float row[panel_width];
  alignas(32) float b[panel_width] = {};
  if (bias != nullptr)
    std::copy(bias, bias + cols, b);
  const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
  const __m256 zero = _mm256_setzero_ps();
  for (int r = 0; r < rows; ++r) {
    __m256 v0 = _mm256_add_ps(acc.c[r][0], b0);
    __m256 v1 = _mm256_add_ps(acc.c[r][1], b1);
    if (relu) {
      v0 = _mm256_max_ps(v0, zero);
      v1 = _mm256_max_ps(v1, zero);
    }
    float* dst = out + r * ld;
    if (cols == panel_width) {
      if (accumulate_into) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(dst));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(dst + 8));
      }
      _mm256_storeu_ps(dst, v0);
      _mm256_storeu_ps(dst + 8, v1);
      continue;
    }
    _mm256_store_ps(row, v0);
    _mm256_store_ps(row + 8, v1);
    for (int j = 0; j < cols; ++j)
      dst[j] = accumulate_into ? dst[j] + row[j] : row[j];
  }
}

void forward(const padded_images& x, const float* filters, int n,
             const float* bias, bool relu, float* y, int64_t m0, int64_t m1) {
  const int run = x.kernel * x.channels;
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  const size_t panel_floats = static_cast<size_t>(x.patch()) * panel_width;
  for (int64_t m = m0; m < m1; m += tile_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(tile_rows, m1 - m));
    const float* window[tile_rows];
    row_windows(x, m, rows, tile_rows, window);
    for (int p = 0; p < panels(n); ++p) {
      tile acc;
      acc.zero();
      accumulate(acc, window, 1, row_stride, filters + p * panel_floats, run,
                 x.kernel);
      const int col0 = p * panel_width;
      store(acc, rows, std::min(panel_width, n - col0),
            y + static_cast<size_t>(m) * n + col0, static_cast<size_t>(n),
            bias != nullptr ? bias + col0 : nullptr, relu, false);
    }
  }
}

void filter_grad(const padded_images& x, const float* dy, int n,
                 int64_t batch_rows, int b0, int b1, float* dw) {
  const int out_h = x.out_height(), out_w = x.out_width();
  const int run = x.kernel * x.channels, patch = x.patch();
  const int64_t per_image = static_cast<int64_t>(out_h) * out_w;
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  for (int b = b0; b < b1; ++b) {
    const float* image = x.data + static_cast<size_t>(b) * x.image_floats();
    for (int p = 0; p < panels(n); ++p) {
      // This image's rows of dy's panel p: (per_image, 16), read once per
      // 6 filter rows, so it stays in L1 (12.5 KB for a 14x14 output).
      const float* d = dy
                       + (static_cast<size_t>(p) * batch_rows
                          + static_cast<size_t>(b) * per_image)
                           * panel_width;
      for (int q = 0; q < patch; q += tile_rows) {
        const int rows = std::min(tile_rows, patch - q);
        size_t offset[tile_rows];
        for (int r = 0; r < tile_rows; ++r) {
          const int col = q + std::min(r, rows - 1);
          offset[r] = (col / run) * row_stride + col % run;
        }
        const float* a[tile_rows];
        for (int r = 0; r < tile_rows; ++r)
          a[r] = image + offset[r];
        tile acc;
        acc.zero();
        accumulate(acc, a, static_cast<size_t>(x.channels), row_stride, d,
                   out_w, out_h);
        const int col0 = p * panel_width;
        store(acc, rows, std::min(panel_width, n - col0),
              dw + static_cast<size_t>(q) * n + col0, static_cast<size_t>(n),
              nullptr, false, true);
      }
    }
  }
}

} // namespace

const kernels* avx2_kernels() {
  static const kernels set{"avx2+fma", tile_rows, &forward, &filter_grad};
  return cpu_runs_avx2_fma() ? &set : nullptr;
}

} // namespace troupe::conv

#else

namespace troupe::conv {
const kernels* avx2_kernels() {
  return nullptr;
}
} // namespace troupe::conv

#endif

// AVX-512 kernels. This file alone is compiled with -mavx512f and friends
// (see runtime/CMakeLists.txt) and runs only after the CPU and the OS said
// they run AVX-512 (the OS must save the 32 zmm registers).
//
// Both loops compute a 14 x 32 tile of their output (two 16-column panels)
// in 28 of the 32 zmm registers: per step of the sum they load one vector
// of each panel and broadcast one float of each of 14 rows, then issue 28
// FMAs, the register blocking of BLIS's SkylakeX sgemm kernel (there 32 x
// 12, column major) with two more rows: 14 rows ran the CNN's convolutions
// 5-7% faster than 12 (fewer loads of the panels per FMA). 28 independent
// accumulators cover the FMA latency of two 512-bit units (4 cycles, 2 per
// cycle); 16 loads per 28 FMAs stay within the load ports. A lone last
// panel (an odd panel count) takes a 14 x 16 tile. Rows past the end
// repeat the last real row and are not stored; columns past n are masked
// off at the store.
#include "runtime/compute/conv_kernels.hpp"
#include "runtime/compute/cpu_features.hpp"

#if defined(__x86_64__) && defined(__AVX512F__)

#include <algorithm>
#include <immintrin.h>

namespace troupe::conv {

namespace {

constexpr int tile_rows = 14;

/// A tile of 14 rows by `Panels` panels of 16 columns.
template <int Panels>
struct tile {
  __m512 c[tile_rows][Panels];
};

/// acc(r, panel) += sum over o < outer, t < inner of
/// a[r][o * a_outer + t * a_step] * b[panel][(o * inner + t) * panel_width
/// + :]: the packed right operand runs on through both loops, the left
/// one jumps by a_outer between runs (the next kernel row in forward(), the
/// next image row in filter_grad()). Both loops are in here so that the
/// 14 * Panels sums stay in registers for the whole tile; the compiler
/// unrolls the loops over rows and panels (no struct through a reference:
/// GCC keeps those in memory, and a store per FMA halves speed).
template <int Panels>
__attribute__((always_inline)) inline void
accumulate(tile<Panels>& acc, const float* const (&a)[tile_rows], size_t a_step,
           size_t a_outer, const float* const (&b)[Panels], int inner,
           int outer) {
  __m512 c[tile_rows][Panels];
#pragma GCC unroll 14
  for (int r = 0; r < tile_rows; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < Panels; ++p)
      c[r][p] = acc.c[r][p];
  const float* bp[Panels];
#pragma GCC unroll 2
  for (int p = 0; p < Panels; ++p)
    bp[p] = b[p];
  for (int o = 0; o < outer; ++o) {
    const size_t run_start = static_cast<size_t>(o) * a_outer;
    for (int t = 0; t < inner; ++t) {
      __m512 bv[Panels];
#pragma GCC unroll 2
      for (int p = 0; p < Panels; ++p) {
        bv[p] = _mm512_loadu_ps(bp[p]);
        bp[p] += panel_width;
      }
      const size_t i = run_start + static_cast<size_t>(t) * a_step;
#pragma GCC unroll 14
      for (int r = 0; r < tile_rows; ++r) {
        const __m512 v = _mm512_set1_ps(a[r][i]);
#pragma GCC unroll 2
        for (int p = 0; p < Panels; ++p)
          c[r][p] = _mm512_fmadd_ps(v, bv[p], c[r][p]);
      }
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < tile_rows; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < Panels; ++p)
      acc.c[r][p] = c[r][p];
}

template <int Panels>
void zero(tile<Panels>& acc) {
  for (auto& row : acc.c)
    for (auto& v : row)
      v = _mm512_setzero_ps();
}

/// Writes (accumulate_into: adds) rows [0, rows) and columns [0, cols) of
/// the tile to out (row stride ld), plus bias (cols values, or null), then
/// max(0, .) when relu.
template <int Panels>
void store(const tile<Panels>& acc, int rows, int cols, float* out, size_t ld,
           const float* bias, bool relu, bool accumulate_into) {
  for (int p = 0; p < Panels; ++p) {
    const int here = std::min(panel_width, cols - p * panel_width);
    if (here <= 0)
      return;
    const __mmask16 mask = static_cast<__mmask16>((1u << here) - 1);
    const __m512 b = bias != nullptr
                       ? _mm512_maskz_loadu_ps(mask, bias + p * panel_width)
                       : _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      float* dst = out + r * ld + p * panel_width;
      __m512 v = _mm512_add_ps(acc.c[r][p], b);
      if (relu) // 0 where not above 0, NaN included, as the other sets
        v = _mm512_maskz_mov_ps(
          _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
      if (accumulate_into)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, dst));
      _mm512_mask_storeu_ps(dst, mask, v);
    }
  }
}

/// One output tile of forward(): rows whose windows start at `window`,
/// panels [p, p + Panels) of the packed filters.
template <int Panels>
void forward_tile(const padded_images& x,
                  const float* const (&window)[tile_rows], const float* filters,
                  int p, int n, const float* bias, bool relu, float* y_rows,
                  int rows) {
  const int run = x.kernel * x.channels;
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  const size_t panel_floats = static_cast<size_t>(x.patch()) * panel_width;
  tile<Panels> acc;
  zero(acc);
  const float* b[Panels];
  for (int q = 0; q < Panels; ++q)
    b[q] = filters + (p + q) * panel_floats;
  accumulate(acc, window, 1, row_stride, b, run, x.kernel);
  const int col0 = p * panel_width;
  store(acc, rows, n - col0, y_rows + col0, static_cast<size_t>(n),
        bias != nullptr ? bias + col0 : nullptr, relu, false);
}

void forward(const padded_images& x, const float* filters, int n,
             const float* bias, bool relu, float* y, int64_t m0, int64_t m1) {
  for (int64_t m = m0; m < m1; m += tile_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(tile_rows, m1 - m));
    const float* window[tile_rows];
    row_windows(x, m, rows, tile_rows, window);
    float* y_rows = y + static_cast<size_t>(m) * n;
    int p = 0;
    for (; p + 2 <= panels(n); p += 2)
      forward_tile<2>(x, window, filters, p, n, bias, relu, y_rows, rows);
    if (p < panels(n))
      forward_tile<1>(x, window, filters, p, n, bias, relu, y_rows, rows);
  }
}

/// Rows [q, q + rows) of one image's filter gradient, panels
/// [p, p + Panels): the sum over output pixels of the patch values times
/// dy's rows.
template <int Panels>
void filter_grad_tile(const padded_images& x, const float* image,
                      const float* dy_image, int64_t batch_rows, int p, int q,
                      int n, float* dw) {
  const int out_h = x.out_height(), out_w = x.out_width();
  const int run = x.kernel * x.channels;
  const int rows = std::min(tile_rows, x.patch() - q);
  const size_t row_stride = static_cast<size_t>(x.width) * x.channels;
  size_t offset[tile_rows];
  for (int r = 0; r < tile_rows; ++r) {
    const int col = q + std::min(r, rows - 1);
    offset[r] = (col / run) * row_stride + col % run;
  }
  const float* a[tile_rows];
  for (int r = 0; r < tile_rows; ++r)
    a[r] = image + offset[r];
  const float* b[Panels];
  for (int k = 0; k < Panels; ++k)
    b[k] = dy_image + static_cast<size_t>(p + k) * batch_rows * panel_width;
  tile<Panels> acc;
  zero(acc);
  accumulate(acc, a, static_cast<size_t>(x.channels), row_stride, b, out_w,
             out_h);
  const int col0 = p * panel_width;
  store(acc, rows, n - col0, dw + static_cast<size_t>(q) * n + col0,
        static_cast<size_t>(n), nullptr, false, true);
}

void filter_grad(const padded_images& x, const float* dy, int n,
                 int64_t batch_rows, int b0, int b1, float* dw) {
  const int64_t per_image = static_cast<int64_t>(x.out_height())
                            * x.out_width();
  for (int b = b0; b < b1; ++b) {
    const float* image = x.data + static_cast<size_t>(b) * x.image_floats();
    // This image's rows of dy, in each panel: (per_image, 16) floats, read
    // once per 14 filter rows, so two panels stay in L1 (25 KB for a 14x14
    // output).
    const float* dy_image = dy
                            + static_cast<size_t>(b) * per_image * panel_width;
    int p = 0;
    for (; p + 2 <= panels(n); p += 2)
      for (int q = 0; q < x.patch(); q += tile_rows)
        filter_grad_tile<2>(x, image, dy_image, batch_rows, p, q, n, dw);
    if (p < panels(n))
      for (int q = 0; q < x.patch(); q += tile_rows)
        filter_grad_tile<1>(x, image, dy_image, batch_rows, p, q, n, dw);
  }
}

} // namespace

const kernels* avx512_kernels() {
  static const kernels set{"avx512", tile_rows, &forward, &filter_grad};
  return cpu_runs_avx512() ? &set : nullptr;
}

} // namespace troupe::conv

#else

namespace troupe::conv {
const kernels* avx512_kernels() {
  return nullptr;
}
} // namespace troupe::conv

#endif

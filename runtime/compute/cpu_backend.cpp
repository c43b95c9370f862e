#include "runtime/compute/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>

#include "runtime/compute/blas_loader.hpp"
#include "runtime/compute/conv_kernels.hpp"
#include "runtime/compute/cpu_activation.hpp"
#include "runtime/compute/cpu_conv.hpp"
#include "runtime/compute/vector_kernels.hpp"
#include "runtime/compute/thread_pool.hpp"

namespace troupe {

namespace {

constexpr int cblas_row_major = 101;
constexpr int cblas_no_trans = 111;
constexpr int cblas_trans = 112;

// Buffers of 2 MiB and more get transparent huge pages: first-touch faults
// of 4 KiB pages cost ~13 us each on these VMs (~300 MB/s), so a fresh
// 100 MB activation buffer would otherwise take a third of a second.
constexpr size_t huge_page = size_t{2} << 20;

class cpu_backend final : public compute_backend {
public:
  cpu_backend(int threads, bool direct_conv)
    : threads_(threads < 1 ? 1 : threads), pool_(threads_),
      conv_(direct_conv ? &conv::chosen_kernels() : nullptr),
      vec_(&vec::chosen_kernels()) {
    blas::get(); // loads OpenBLAS now: a missing library fails at start
  }

  std::string describe() const override {
    auto& lib = blas::get();
    return "cpu (OpenBLAS " + lib.core + " kernels, troupe " + vec_->isa
           + " kernels, "
           + (conv_ != nullptr ? std::string{"direct conv"}
                               : std::string{"im2col conv"})
           + ", " + std::to_string(threads_)
           + (threads_ == 1 ? " thread)" : " threads)");
  }

  bool host_accessible() const override { return true; }

  backend_buffer allocate(size_t bytes) override {
    return backend_buffer{this, aligned(bytes), bytes};
  }

  void release(void* ptr) noexcept override { std::free(ptr); }

  // The CPU computes in host memory: both kinds are the same.
  backend_buffer allocate_host(size_t bytes) override {
    return backend_buffer{this, aligned(bytes), bytes, true};
  }

  void release_host(void* ptr) noexcept override { std::free(ptr); }

  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0)
      std::memcpy(dst, src, bytes);
  }

  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0)
      std::memcpy(dst, src, bytes);
  }

  void fill(float* x, size_t n, float value) override {
    std::fill(x, x + n, value);
  }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
            const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) override {
    if (m == 0 || n == 0)
      return;
    if (k == 0) { // BLAS leaves C untouched for k = 0 only when beta = 1
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
      return;
    }
    auto& lib = blas::get();
    const int ta = trans_a ? cblas_trans : cblas_no_trans;
    const int tb = trans_b ? cblas_trans : cblas_no_trans;
    const int parts = gemm_parts(m, n, k);
    if (parts == 1) {
      lib.sgemm(cblas_row_major, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                c, ldc);
      return;
    }
    // Each part is a block of C's rows (or, for a C with few rows, of its
    // columns) computed by one single-threaded sgemm call: op(A)'s row r is
    // A's row r, or column r when A is stored transposed; likewise for B's
    // columns.
    const bool by_rows = m >= n || m >= 4 * parts;
    pool_.parallel_for(parts, [&](int i) {
      if (by_rows) {
        auto [r0, r1] = split_range(m, parts, i);
        const float* ai = trans_a ? a + r0 : a + r0 * lda;
        lib.sgemm(cblas_row_major, ta, tb, static_cast<int>(r1 - r0), n, k,
                  alpha, ai, lda, b, ldb, beta, c + r0 * ldc, ldc);
      } else {
        auto [c0, c1] = split_range(n, parts, i);
        const float* bi = trans_b ? b + c0 * ldb : b + c0;
        lib.sgemm(cblas_row_major, ta, tb, m, static_cast<int>(c1 - c0), k,
                  alpha, a, lda, bi, ldb, beta, c + c0, ldc);
      }
    });
  }

  void axpy(size_t n, float alpha, const float* x, float* y) override {
    for (size_t i = 0; i < n; ++i)
      y[i] += alpha * x[i];
  }

  void bias_activation_forward(activation act, float* y, const float* bias,
                               int rows, int cols) override {
    for (int r = 0; r < rows; ++r) {
      float* row = y + static_cast<size_t>(r) * cols;
      if (bias != nullptr)
        for (int j = 0; j < cols; ++j)
          row[j] += bias[j];
      apply_activation(act, row, static_cast<size_t>(cols));
    }
  }

  void activation_backward(activation act, const float* y, float* dy,
                           size_t n) override {
    switch (act) {
      case activation::identity: return;
      case activation::sigmoid:
        for (size_t i = 0; i < n; ++i)
          dy[i] *= y[i] * (1.f - y[i]);
        return;
      case activation::tanh:
        for (size_t i = 0; i < n; ++i)
          dy[i] *= 1.f - y[i] * y[i];
        return;
      case activation::relu:
        // Split over the threads when large (a convolution's output, 1.6M
        // floats in the CNN's first layer): on one thread it was 2-3% of
        // the step, which a second thread would otherwise wait out.
        in_chunks(n, [y, dy](size_t i0, size_t i1) {
          for (size_t i = i0; i < i1; ++i)
            dy[i] = y[i] > 0.f ? dy[i] : 0.f;
        });
        return;
    }
  }

  void bias_backward(const float* dy, float* db, int rows, int cols) override {
    std::fill(db, db + cols, 0.f);
    for (int r = 0; r < rows; ++r) {
      const float* row = dy + static_cast<size_t>(r) * cols;
      for (int j = 0; j < cols; ++j)
        db[j] += row[j];
    }
  }

  batch_loss softmax_cross_entropy(const float* logits, const int32_t* labels,
                                   int rows, int classes, float* dlogits,
                                   float scale) override {
    batch_loss out;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + static_cast<size_t>(r) * classes;
      int best = 0;
      for (int j = 1; j < classes; ++j)
        if (z[j] > z[best])
          best = j;
      float zmax = z[best];
      double sum = 0;
      for (int j = 0; j < classes; ++j)
        sum += std::exp(static_cast<double>(z[j] - zmax));
      int label = labels[r];
      out.loss_sum += std::log(sum) - static_cast<double>(z[label] - zmax);
      out.correct += best == label ? 1 : 0;
      if (dlogits != nullptr) {
        float* d = dlogits + static_cast<size_t>(r) * classes;
        float inv = static_cast<float>(1.0 / sum);
        for (int j = 0; j < classes; ++j)
          d[j] = scale * std::exp(z[j] - zmax) * inv;
        d[label] -= scale;
      }
    }
    return out;
  }

  void im2col(const float* x, const conv_shape& s, float* cols) override {
    const int oh = s.out_height(), ow = s.out_width(), patch = s.patch();
    const size_t run = static_cast<size_t>(s.channels) * sizeof(float);
    for (int b = 0; b < s.batch; ++b)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          float* dst = cols
                       + ((static_cast<size_t>(b) * oh + oy) * ow + ox) * patch;
          for (int ky = 0; ky < s.kernel; ++ky) {
            int iy = oy * s.stride - s.pad + ky;
            for (int kx = 0; kx < s.kernel; ++kx, dst += s.channels) {
              int ix = ox * s.stride - s.pad + kx;
              if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width)
                std::memset(dst, 0, run);
              else
                std::memcpy(dst, x + pixel(s, b, iy, ix), run);
            }
          }
        }
  }

  void col2im(const float* dcols, const conv_shape& s, float* dx) override {
    const int oh = s.out_height(), ow = s.out_width(), patch = s.patch();
    std::fill(
      dx, dx + static_cast<size_t>(s.batch) * s.height * s.width * s.channels,
      0.f);
    for (int b = 0; b < s.batch; ++b)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const float* src =
            dcols + ((static_cast<size_t>(b) * oh + oy) * ow + ox) * patch;
          for (int ky = 0; ky < s.kernel; ++ky) {
            int iy = oy * s.stride - s.pad + ky;
            for (int kx = 0; kx < s.kernel; ++kx, src += s.channels) {
              int ix = ox * s.stride - s.pad + kx;
              if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width)
                continue;
              float* dst = dx + pixel(s, b, iy, ix);
              for (int ch = 0; ch < s.channels; ++ch)
                dst[ch] += src[ch];
            }
          }
        }
  }

  void maxpool_forward(const float* x, int batch, int h, int w, int c, int size,
                       int stride, float* y, int32_t* argmax) override {
    const size_t in = static_cast<size_t>(batch) * h * w * c;
    const int parts = in < parallel_floats
                        ? 1
                        : std::min(threads_, std::max(batch, 1));
    pool_.parallel_for(parts, [&](int i) {
      auto [b0, b1] = split_range(batch, parts, i);
      vec_->maxpool(x, static_cast<int>(b0), static_cast<int>(b1), h, w, c,
                    size, stride, y, argmax);
    });
  }

  void maxpool_backward(const float* dy, const int32_t* argmax, size_t n_y,
                        float* dx, size_t n_x) override {
    in_chunks(n_x,
              [dx](size_t i0, size_t i1) { std::fill(dx + i0, dx + i1, 0.f); });
    // One thread: windows may overlap (stride < size), and two outputs
    // then add into one input.
    for (size_t i = 0; i < n_y; ++i)
      dx[argmax[i]] += dy[i];
  }

  size_t conv_workspace(const conv_shape& s, int out_c) const override {
    if (conv_ == nullptr || !cpu_conv::supports(s))
      return 0;
    return cpu_conv::workspace_floats(s, out_c, threads_) * sizeof(float);
  }

  void conv2d_forward(const float* x, const conv_shape& s, const float* w,
                      int out_c, const float* bias, activation act, float* y,
                      float* workspace) override {
    cpu_conv::forward(*conv_, pool_, x, s, w, out_c, bias, act, y, workspace);
  }

  void conv2d_backward(const conv_shape& s, const float* w, int out_c,
                       const float* dy, float* dw, float* db, float* dx,
                       float* workspace) override {
    cpu_conv::backward(*conv_, pool_, s, w, out_c, dy, dw, db, dx, workspace);
  }

private:
  /// Arrays from this many floats up are split over the threads by the
  /// element-wise passes: a part then takes tens of microseconds, against
  /// the few a wake-up of the pool costs.
  static constexpr size_t parallel_floats = size_t{1} << 16;

  /// fn(i0, i1) over [0, n) in one part per thread, or in one call when n
  /// is small.
  template <class Fn>
  void in_chunks(size_t n, Fn&& fn) {
    if (threads_ == 1 || n < parallel_floats) {
      fn(size_t{0}, n);
      return;
    }
    pool_.parallel_for(threads_, [&](int i) {
      auto [i0, i1] = split_range(static_cast<int64_t>(n), threads_, i);
      fn(static_cast<size_t>(i0), static_cast<size_t>(i1));
    });
  }

  /// Threads a gemm of this size is split over: all of them above ~2
  /// MFLOP, where a part runs for tens of microseconds against the few a
  /// wake-up of the pool costs; one below.
  int gemm_parts(int m, int n, int k) const {
    constexpr double split_flops = 2e6;
    if (threads_ == 1 || 2.0 * m * n * k < split_flops)
      return 1;
    return std::min(threads_, std::max(m, n));
  }

  static void* aligned(size_t bytes) {
    size_t align = bytes >= huge_page ? huge_page : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    void* ptr = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (ptr == nullptr)
      throw std::bad_alloc{};
    if (align == huge_page)
      madvise(ptr, rounded, MADV_HUGEPAGE); // a hint; failure is harmless
    return ptr;
  }

  static size_t pixel(const conv_shape& s, int b, int iy, int ix) {
    return ((static_cast<size_t>(b) * s.height + iy) * s.width + ix)
           * s.channels;
  }

  int threads_;
  thread_pool pool_;
  const conv::kernels* conv_; ///< null: convolutions go through im2col
  const vec::kernels* vec_;   ///< pooling, same instruction set as conv_
};

} // namespace

std::unique_ptr<compute_backend> make_cpu_backend(int threads,
                                                  bool direct_conv) {
  return std::make_unique<cpu_backend>(threads, direct_conv);
}

} // namespace troupe

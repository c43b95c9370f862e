// gpu_backend on CUDA: one stream and one cuBLAS handle per backend (per
// worker); device memory from cudaMalloc, allocated when a model reserves
// its buffers and reused step to step; host copies through a pinned ring.
#include "gpu/gpu_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda_check.hpp"
#include "gpu/kernel_math.hpp"
#include "gpu/kernels.hpp"
#include "gpu/pinned_ring.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::gpu {

namespace {

// Two 4 MiB slots for uploads from ordinary host memory (a pull's
// parameters, 0.9 MB for the MLP, fit one) and for downloads (gradients);
// bigger transfers alternate, so the host fills or empties one slot while
// the other's DMA runs. Batches come from allocate_host() memory and skip
// the ring.
constexpr size_t staging_slot_bytes = size_t{4} << 20;
constexpr int staging_slots = 2;

/// Device scratch that only grows (the largest batch seen so far).
class scratch {
public:
  void* reserve(size_t bytes) {
    if (bytes > bytes_) {
      if (ptr_ != nullptr)
        TROUPE_CUDA(cudaFree(ptr_));
      ptr_ = nullptr;
      bytes_ = 0;
      TROUPE_CUDA(cudaMalloc(&ptr_, bytes));
      bytes_ = bytes;
    }
    return ptr_;
  }
  /// Called by the backend with its device current.
  void free() noexcept {
    if (ptr_ != nullptr)
      cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class cuda_backend final : public gpu_backend {
public:
  explicit cuda_backend(int device) : device_(device) {
    device_scope scope{device_};
    try {
      open();
    } catch (...) {
      close();
      throw;
    }
  }

  ~cuda_backend() override {
    device_scope scope{device_};
    cudaStreamSynchronize(stream_);
    close();
  }

  std::string describe() const override { return name_; }
  bool host_accessible() const override { return false; }
  int device() const override { return device_; }

  // -- memory ---------------------------------------------------------------

  backend_buffer allocate(size_t bytes) override {
    device_scope scope{device_};
    void* ptr = nullptr;
    if (bytes > 0)
      TROUPE_CUDA(cudaMalloc(&ptr, bytes));
    return backend_buffer{this, ptr, bytes};
  }

  void release(void* ptr) noexcept override {
    free_after_stream([ptr] { cudaFree(ptr); });
  }

  backend_buffer allocate_host(size_t bytes) override {
    device_scope scope{device_};
    void* ptr = nullptr;
    if (bytes > 0) {
      TROUPE_CUDA(cudaMallocHost(&ptr, bytes));
      pinned_[reinterpret_cast<uintptr_t>(ptr)] = bytes;
    }
    return backend_buffer{this, ptr, bytes, true};
  }

  void release_host(void* ptr) noexcept override {
    pinned_.erase(reinterpret_cast<uintptr_t>(ptr));
    free_after_stream([ptr] { cudaFreeHost(ptr); });
  }

  void upload(void* dst, const void* src, size_t bytes) override {
    device_scope scope{device_};
    if (is_pinned(src, bytes)) {
      // Page-locked already: one DMA, no staging copy. The caller keeps
      // src unchanged until the next waiting call (backend.hpp).
      timed(true, [&] {
        TROUPE_CUDA(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
      });
      return;
    }
    ring_->upload(dst, src, bytes, stream_, copy_timer());
  }

  void download(void* dst, const void* src, size_t bytes) override {
    device_scope scope{device_};
    ring_->download(dst, src, bytes, stream_, copy_timer());
  }

  void fill(float* x, size_t n, float value) override {
    device_scope scope{device_};
    timed(false, [&] {
      if (value == 0.f && n > 0)
        TROUPE_CUDA(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
      else
        launch_fill(x, n, value, stream_);
    });
  }

  // -- dense algebra --------------------------------------------------------

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
            const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) override {
    if (m == 0 || n == 0)
      return;
    device_scope scope{device_};
    timed(false, [&] {
      if (k == 0)
        return scale(m, n, beta, c, ldc);
      // cuBLAS is column-major: to_col_major swaps the operands and m, n
      // (see gpu/kernel_math.hpp; tests/gpu/kernel_math_test.cpp checks
      // the mapping against OpenBLAS's column-major sgemm). C keeps its
      // pointer and ldc.
      auto g = to_col_major(trans_a, trans_b, m, n, k, a, lda, b, ldb);
      TROUPE_CUBLAS(cublasSgemm(
        blas_, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
        g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
        g.first, g.ld_first, g.second, g.ld_second, &beta, c, ldc));
    });
  }

  void axpy(size_t n, float alpha, const float* x, float* y) override {
    device_scope scope{device_};
    timed(false, [&] { launch_axpy(n, alpha, x, y, stream_); });
  }

  // -- layers ---------------------------------------------------------------

  void bias_activation_forward(activation act, float* y, const float* bias,
                               int rows, int cols) override {
    device_scope scope{device_};
    timed(false,
          [&] { launch_bias_activation(act, y, bias, rows, cols, stream_); });
  }

  void activation_backward(activation act, const float* y, float* dy,
                           size_t n) override {
    device_scope scope{device_};
    timed(false, [&] { launch_activation_backward(act, y, dy, n, stream_); });
  }

  void bias_backward(const float* dy, float* db, int rows, int cols) override {
    device_scope scope{device_};
    auto* partial = static_cast<float*>(column_partials_.reserve(
      static_cast<size_t>(column_sum_blocks(rows)) * cols * sizeof(float)));
    timed(false,
          [&] { launch_column_sum(dy, db, rows, cols, partial, stream_); });
  }

  batch_loss softmax_cross_entropy(const float* logits, const int32_t* labels,
                                   int rows, int classes, float* dlogits,
                                   float scale_by) override {
    device_scope scope{device_};
    auto* row_loss = static_cast<double*>(
      row_loss_.reserve(std::max(rows, 1) * sizeof(double)));
    auto* row_hit = static_cast<int32_t*>(
      row_hit_.reserve(std::max(rows, 1) * sizeof(int32_t)));
    auto* totals = static_cast<loss_totals*>(
      totals_.reserve(sizeof(loss_totals)));
    timed(false, [&] {
      launch_softmax_cross_entropy(logits, labels, rows, classes, dlogits,
                                   scale_by, row_loss, row_hit, totals,
                                   stream_);
    });
    // The one wait of a training step: the caller needs the loss now.
    timed(true, [&] {
      TROUPE_CUDA(cudaMemcpyAsync(totals_host_, totals, sizeof(loss_totals),
                                  cudaMemcpyDeviceToHost, stream_));
    });
    TROUPE_CUDA(cudaStreamSynchronize(stream_));
    batch_loss out;
    out.loss_sum = totals_host_->loss_sum;
    out.correct = totals_host_->correct;
    return out;
  }

  void im2col(const float* x, const conv_shape& s, float* cols) override {
    device_scope scope{device_};
    timed(false, [&] { launch_im2col(x, s, cols, stream_); });
  }

  void col2im(const float* dcols, const conv_shape& s, float* dx) override {
    device_scope scope{device_};
    timed(false, [&] { launch_col2im(dcols, s, dx, stream_); });
  }

  void maxpool_forward(const float* x, int batch, int h, int w, int c, int size,
                       int stride, float* y, int32_t* argmax) override {
    device_scope scope{device_};
    timed(false, [&] {
      launch_maxpool_forward(x, batch, h, w, c, size, stride, y, argmax,
                             stream_);
    });
  }

  void maxpool_backward(const float* dy, const int32_t* argmax, size_t n_y,
                        float* dx, size_t n_x) override {
    device_scope scope{device_};
    timed(false,
          [&] { launch_maxpool_backward(dy, argmax, n_y, dx, n_x, stream_); });
  }

  // -- gpu_backend ----------------------------------------------------------

  void set_profiling(bool on) override {
    device_scope scope{device_};
    if (on && !profiling_) {
      TROUPE_CUDA(cudaStreamSynchronize(stream_));
      marks_used_ = 0;
      split_ = time_split{};
    }
    profiling_ = on;
  }

  time_split profile() override {
    device_scope scope{device_};
    TROUPE_CUDA(cudaStreamSynchronize(stream_));
    for (size_t i = 0; i < marks_used_; ++i) {
      float ms = 0;
      TROUPE_CUDA(cudaEventElapsedTime(&ms, marks_[i].start, marks_[i].stop));
      if (marks_[i].copy) {
        split_.copy_ms += ms;
        ++split_.copy_ops;
      } else {
        split_.kernel_ms += ms;
        ++split_.kernel_ops;
      }
    }
    marks_used_ = 0;
    return split_;
  }

  void synchronize() override {
    device_scope scope{device_};
    TROUPE_CUDA(cudaStreamSynchronize(stream_));
  }

private:
  /// Creates the stream, the cuBLAS handle and the staging memory.
  void open() {
    cudaDeviceProp prop{};
    TROUPE_CUDA(cudaGetDeviceProperties(&prop, device_));
    int runtime = 0;
    TROUPE_CUDA(cudaRuntimeGetVersion(&runtime));
    name_ = "gpu:" + std::to_string(device_) + " (" + prop.name + ", sm_"
            + std::to_string(prop.major) + std::to_string(prop.minor)
            + ", CUDA " + std::to_string(runtime / 1000) + "."
            + std::to_string(runtime % 1000 / 10) + ", cuBLAS)";
    TROUPE_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TROUPE_CUBLAS(cublasCreate(&blas_));
    TROUPE_CUBLAS(cublasSetStream(blas_, stream_));
    // FP32 arithmetic throughout, no TF32 tensor cores: the results must
    // match the CPU backend's to a tight tolerance (PyTorch's default for
    // float32 matmuls is the same).
    TROUPE_CUBLAS(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
    TROUPE_CUDA(cudaMallocHost(&totals_host_, sizeof(loss_totals)));
    ring_ = std::make_unique<pinned_ring>(staging_slot_bytes, staging_slots);
  }

  /// Frees what open() made, as far as it got; never throws.
  void close() noexcept {
    ring_.reset();
    release_events();
    column_partials_.free();
    row_loss_.free();
    row_hit_.free();
    totals_.free();
    if (totals_host_ != nullptr)
      cudaFreeHost(totals_host_);
    totals_host_ = nullptr;
    if (blas_ != nullptr)
      cublasDestroy(blas_);
    blas_ = nullptr;
    if (stream_ != nullptr)
      cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  /// A pair of events around one operation, while profiling.
  struct mark {
    cudaEvent_t start = nullptr, stop = nullptr;
    bool copy = false;
  };

  /// Runs `enqueue`, bracketed by events when profiling. The bracket
  /// measures the stream's time from the start event to the stop event,
  /// so a gap where the device waited for the host to queue the operation
  /// counts toward it; benchmarks keep the device busy to keep that small.
  template <class Enqueue>
  void timed(bool copy, Enqueue&& enqueue) {
    if (!profiling_) {
      enqueue();
      return;
    }
    mark& m = next_mark();
    m.copy = copy;
    TROUPE_CUDA(cudaEventRecord(m.start, stream_));
    enqueue();
    TROUPE_CUDA(cudaEventRecord(m.stop, stream_));
  }

  /// Runs `free` once the stream has finished everything queued, so no
  /// kernel or DMA still uses the memory (a worker that failed mid-step
  /// leaves work queued). noexcept: errors here have nobody to go to.
  template <class Free>
  void free_after_stream(Free free) noexcept {
    device_scope scope{device_, std::nothrow};
    cudaStreamSynchronize(stream_);
    free();
  }

  /// Whether [p, p + bytes) lies inside one allocate_host() buffer.
  bool is_pinned(const void* p, size_t bytes) const {
    auto at = reinterpret_cast<uintptr_t>(p);
    auto it = pinned_.upper_bound(at);
    if (bytes == 0 || it == pinned_.begin())
      return false;
    --it;
    return at + bytes <= it->first + it->second;
  }

  pinned_ring::dma_wrapper copy_timer() {
    return [this](const std::function<void()>& dma) { timed(true, dma); };
  }

  mark& next_mark() {
    if (marks_used_ == marks_.size()) {
      mark m;
      TROUPE_CUDA(cudaEventCreate(&m.start));
      TROUPE_CUDA(cudaEventCreate(&m.stop));
      marks_.push_back(m);
    }
    return marks_[marks_used_++];
  }

  void release_events() {
    for (auto& m : marks_) {
      cudaEventDestroy(m.start);
      cudaEventDestroy(m.stop);
    }
    marks_.clear();
  }

  /// C (m, n) row-major with stride ldc = beta * C, for gemm with k = 0
  /// (BLAS would leave NaNs in C when beta = 0).
  void scale(int m, int n, float beta, float* c, int ldc) {
    if (beta == 0.f) {
      TROUPE_CUDA(cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(float),
                                    0, static_cast<size_t>(n) * sizeof(float),
                                    static_cast<size_t>(m), stream_));
      return;
    }
    if (beta == 1.f)
      return;
    // In place (C = A, same leading dimension, no transpose) is allowed.
    const float zero = 0.f;
    TROUPE_CUBLAS(cublasSgeam(blas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, &beta, c,
                              ldc, &zero, c, ldc, c, ldc));
  }

  int device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  loss_totals* totals_host_ = nullptr; // pinned
  std::unique_ptr<pinned_ring> ring_;
  std::map<uintptr_t, size_t> pinned_; // allocate_host(): start -> bytes
  scratch column_partials_, row_loss_, row_hit_, totals_;
  bool profiling_ = false;
  std::vector<mark> marks_;
  size_t marks_used_ = 0;
  time_split split_;
};

} // namespace

caf::expected<std::unique_ptr<gpu_backend>> make_gpu_backend(int device) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    return make_error(errc::backend_unavailable,
                      "gpu:" + std::to_string(device)
                        + ": no usable CUDA device: "
                        + cudaGetErrorString(status));
  if (device < 0 || device >= count)
    return make_error(errc::backend_unavailable,
                      "gpu:" + std::to_string(device) + ": this machine has "
                        + std::to_string(count) + " CUDA device"
                        + (count == 1 ? "" : "s"));
  try {
    return std::unique_ptr<gpu_backend>{std::make_unique<cuda_backend>(device)};
  } catch (const backend_error& e) {
    return make_error(errc::backend_unavailable,
                      "gpu:" + std::to_string(device) + ": " + e.what());
  }
}

} // namespace troupe::gpu

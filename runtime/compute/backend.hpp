// The compute-backend interface: the operations a model needs for a
// forward/backward pass, over buffers that live where the backend computes
// (host memory for the CPU backend, device memory for the GPU backend).
//
// Conventions for every operation:
//  - matrices are row-major; "(rows, cols)" comments give shapes;
//  - activations of convolutional layers are NHWC, so a convolution is one
//    im2col plus one gemm whose output rows are (image, y, x) and columns are
//    channels, and a per-channel bias is the same operation as a dense bias;
//  - pointers are backend pointers (from allocate()); sizes are elements;
//  - an operation either sets (=) or accumulates (+=) its output, as stated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace troupe {

enum class activation { identity, sigmoid, tanh, relu };

/// "identity", "sigmoid", "tanh", "relu".
const char* to_string(activation act);

/// Loss and accuracy of one batch.
struct batch_loss {
  double loss_sum = 0;    ///< sum over rows of -log p(label) (or the row's
                          ///< mean loss, runtime/compute/losses.hpp)
  int64_t correct = 0;    ///< rows whose arg-max equals the label
  double abs_err_sum = 0; ///< mean squared error: sum over rows of the
                          ///< mean absolute error
};

/// A backend operation failed on its device (a CUDA or cuBLAS error, out of
/// device memory). The message names the call. A worker that meets one
/// fails, and the chief restarts it like any failed worker.
class backend_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class compute_backend;

/// A backend allocation; move-only, freed by its backend on destruction.
class backend_buffer {
public:
  backend_buffer() = default;
  /// `host`: memory from allocate_host(), freed by release_host().
  backend_buffer(compute_backend* owner, void* ptr, size_t bytes,
                 bool host = false)
    : owner_(owner), ptr_(ptr), bytes_(bytes), host_(host) {}
  backend_buffer(backend_buffer&& other) noexcept { swap(other); }
  backend_buffer& operator=(backend_buffer&& other) noexcept {
    backend_buffer tmp{std::move(other)};
    swap(tmp);
    return *this;
  }
  backend_buffer(const backend_buffer&) = delete;
  backend_buffer& operator=(const backend_buffer&) = delete;
  ~backend_buffer();

  float* floats() const { return static_cast<float*>(ptr_); }
  int32_t* ints() const { return static_cast<int32_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

private:
  void swap(backend_buffer& other) noexcept {
    std::swap(owner_, other.owner_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(host_, other.host_);
  }
  compute_backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool host_ = false;
};

class compute_backend {
public:
  virtual ~compute_backend() = default;

  /// E.g. "cpu (OpenBLAS SkylakeX, 1 thread)".
  virtual std::string describe() const = 0;

  /// True when backend pointers are ordinary host pointers (CPU backend), so
  /// callers may read and write them directly instead of copying.
  virtual bool host_accessible() const = 0;

  // -- memory ---------------------------------------------------------------

  /// Allocates `bytes` bytes (uninitialised). Throws std::bad_alloc or a
  /// backend error when out of memory.
  virtual backend_buffer allocate(size_t bytes) = 0;
  /// Frees memory from allocate(); called by backend_buffer only.
  virtual void release(void* ptr) noexcept = 0;
  /// Host memory (uninitialised) that upload() reads at full speed:
  /// page-locked on a GPU, so an upload from it is one DMA with no staging
  /// copy; plain memory on the CPU. For buffers refilled every step (a
  /// worker's batch). See upload() for when it may be written again.
  virtual backend_buffer allocate_host(size_t bytes) = 0;
  /// Frees memory from allocate_host(); called by backend_buffer only.
  virtual void release_host(void* ptr) noexcept = 0;
  /// Host -> backend copy of `bytes` bytes. The caller may change src once
  /// this returns, except src inside a buffer from allocate_host(): a GPU
  /// may still be reading that until the next call that waits for the
  /// device (download() or softmax_cross_entropy()).
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Backend -> host copy of `bytes` bytes; complete on return.
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  /// x[0..n) = value.
  virtual void fill(float* x, size_t n, float value) = 0;

  // -- dense algebra --------------------------------------------------------

  /// C = alpha * op(A) * op(B) + beta * C, row-major; op(A) is (m, k),
  /// op(B) is (k, n), C is (m, n); lda/ldb/ldc are row strides of the
  /// matrices as stored.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float* a, int lda, const float* b,
                    int ldb, float beta, float* c, int ldc) = 0;

  /// y[i] += alpha * x[i] for i < n.
  virtual void axpy(size_t n, float alpha, const float* x, float* y) = 0;

  // -- layers ---------------------------------------------------------------

  /// In place on y (rows, cols): y = act(y + bias), bias is (cols) or null.
  virtual void bias_activation_forward(activation act, float* y,
                                       const float* bias, int rows,
                                       int cols) = 0;

  /// In place on dy: dy *= act'(.) expressed through the output y of the
  /// activation (sigmoid y(1-y), tanh 1-y^2, relu y>0). n elements.
  virtual void activation_backward(activation act, const float* y, float* dy,
                                   size_t n) = 0;

  /// db (cols) = column sums of dy (rows, cols). Sets db.
  virtual void bias_backward(const float* dy, float* db, int rows,
                             int cols) = 0;

  /// Softmax cross-entropy over logits (rows, classes) with int labels
  /// (rows). Returns the loss sum and the arg-max hits. When dlogits is not
  /// null it is set to scale * (softmax - onehot), the gradient of
  /// scale * loss_sum.
  virtual batch_loss softmax_cross_entropy(const float* logits,
                                           const int32_t* labels, int rows,
                                           int classes, float* dlogits,
                                           float scale) = 0;

  /// Convolution geometry, NHWC, square kernel, same padding on all sides.
  struct conv_shape {
    int batch, height, width, channels; ///< input
    int kernel, stride, pad;
    int out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    int out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
    /// Columns of the im2col matrix: kernel * kernel * channels.
    int patch() const { return kernel * kernel * channels; }
  };

  /// cols (batch*oh*ow, k*k*c) = patches of x (batch, h, w, c), zero padded,
  /// patch order (ky, kx, c). Sets cols.
  virtual void im2col(const float* x, const conv_shape& s, float* cols) = 0;

  /// Adjoint of im2col: dx (batch, h, w, c) = scatter-add of dcols. Sets dx.
  virtual void col2im(const float* dcols, const conv_shape& s, float* dx) = 0;

  /// Max-pool with square window `size` and stride `stride`, no padding:
  /// y (batch, oh, ow, c) and argmax (same shape, index into x). Sets both.
  virtual void maxpool_forward(const float* x, int batch, int h, int w, int c,
                               int size, int stride, float* y,
                               int32_t* argmax) = 0;

  /// dx (x's shape, n_x elements) = scatter of dy through argmax (n_y
  /// elements). Sets dx.
  virtual void maxpool_backward(const float* dy, const int32_t* argmax,
                                size_t n_y, float* dx, size_t n_x) = 0;

  // -- direct convolution (optional) ----------------------------------------

  /// Bytes of scratch conv2d_forward() and conv2d_backward() need for `s`
  /// with `out_c` filters, or 0 when this backend has no direct convolution
  /// for `s`: then a layer runs im2col() and gemm() instead.
  virtual size_t conv_workspace(const conv_shape& /*s*/, int /*out_c*/) const {
    return 0;
  }

  /// y (batch*oh*ow, out_c) = act(x * w + bias): x (batch, h, w, c), w
  /// (kernel, kernel, c, out_c), bias (out_c) or null. `workspace` has
  /// conv_workspace(s, out_c) bytes. Sets y.
  virtual void conv2d_forward(const float* x, const conv_shape& s,
                              const float* w, int out_c, const float* bias,
                              activation act, float* y, float* workspace);

  /// Gradients of the last conv2d_forward() of this shape with the same
  /// workspace, given dy after the activation's derivative: sets dw, db
  /// and, when dx is not null, dx.
  virtual void conv2d_backward(const conv_shape& s, const float* w, int out_c,
                               const float* dy, float* dw, float* db, float* dx,
                               float* workspace);
};

inline backend_buffer::~backend_buffer() {
  if (owner_ == nullptr || ptr_ == nullptr)
    return;
  if (host_)
    owner_->release_host(ptr_);
  else
    owner_->release(ptr_);
}

} // namespace troupe

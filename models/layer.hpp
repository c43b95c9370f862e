// A layer of a sequential model over the compute-backend interface. A layer
// owns offsets into the model's flat parameter vector, not the values, so a
// pull or a checkpoint moves one buffer for the whole model.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/compute/backend.hpp"
#include "runtime/config/config.hpp"
#include "runtime/params/param_layout.hpp"
#include "runtime/base/random.hpp"

namespace troupe {

class layer {
public:
  virtual ~layer() = default;

  /// E.g. "dense 784->256 relu".
  virtual std::string describe() const = 0;

  /// Output elements per sample.
  virtual size_t output_size() const = 0;

  /// Writes initial values of this layer's parameters into the host copy of
  /// the flat vector (weights per `init`, biases 0).
  virtual void init(float* flat, const model_config& cfg,
                    splitmix64& rng) const = 0;

  /// Makes room for batches of up to `batch` samples (scratch buffers).
  virtual void reserve(compute_backend& be, int batch) = 0;

  /// y (batch, output_size) = layer(x). Sets y.
  virtual void forward(compute_backend& be, const float* params,
                       const float* x, float* y, int batch) = 0;

  /// Given x, y of the last forward() and dy = dLoss/dy, sets this layer's
  /// slice of `grads` and, when dx is not null, dx = dLoss/dx. Clobbers dy.
  virtual void backward(compute_backend& be, const float* params,
                        const float* x, const float* y, float* dy, float* dx,
                        float* grads, int batch) = 0;

  /// backward() fused with a plain SGD update of this layer's parameters,
  /// params -= lr * gradient, where dx still uses the weights before the
  /// update; `grads` is scratch. The default runs backward() and then one
  /// axpy over param_range(); layers override it where the update can ride
  /// on the gradient's own gemm (no separate gradient pass through memory).
  virtual void backward_sgd(compute_backend& be, float* params, const float* x,
                            const float* y, float* dy, float* dx, float* grads,
                            float lr, int batch);
  /// This layer's part of the flat vector (empty when it has none).
  virtual flat_range param_range() const = 0;
  /// Floating-point operations of the gemms of one forward+backward pass.
  virtual double gemm_flops(int batch, bool need_dx) const = 0;
};

/// Fills n weights per the initialisation scheme, given fan-in and fan-out.
void init_weights(float* w, size_t n, int fan_in, int fan_out,
                  const model_config& cfg, splitmix64& rng);

} // namespace troupe

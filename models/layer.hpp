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

/// The shape of one sample's activations, NHWC: a flat vector of n
/// features is 1x1xn.
struct image_shape {
  int height, width, channels;
  size_t size() const { return static_cast<size_t>(height) * width * channels; }
  bool flat() const { return height == 1 && width == 1; }
  /// "28x28x1", or "784" when flat.
  std::string to_string() const {
    return flat() ? std::to_string(channels)
                  : std::to_string(height) + "x" + std::to_string(width) + "x"
                      + std::to_string(channels);
  }
};

/// The interface every layer implements, troupe's own and a user's
/// (models/layer_registry.hpp registers a type a config can name).
/// Activations are batch-major: sample i's output_size() values start at
/// y + i * output_size().
class layer {
public:
  virtual ~layer() = default;

  /// E.g. "dense 784->256 relu".
  virtual std::string describe() const = 0;

  /// Output elements per sample.
  virtual size_t output_size() const = 0;
  /// Their shape; a flat 1x1xoutput_size() unless the layer says otherwise.
  virtual image_shape output_shape() const {
    return {1, 1, static_cast<int>(output_size())};
  }

  /// Whether this layer runs on `be`. The default: backends whose memory
  /// the host reaches (the CPU backend), for layers that loop over their
  /// arrays on the host; layers built on the backend's operations alone
  /// (gemm, im2col, ...) run everywhere. A model refuses at start a layer
  /// that does not run on its backend, naming it.
  virtual bool supports(const compute_backend& be) const {
    return be.host_accessible();
  }

  /// Training passes (true, the default) or evaluation (false): what a
  /// dropout layer drops. The model sets it before each pass.
  virtual void set_training(bool /*training*/) {}
  /// Seeds the layer's random draws (dropout's masks): the model passes its
  /// seed at construction and a worker its own stream, so two workers do
  /// not draw the same masks. The same seed gives the same draws.
  virtual void set_random_stream(uint64_t /*seed*/) {}

  /// Writes initial values of this layer's parameters into the host copy of
  /// the flat vector (weights per `init`, biases 0).
  virtual void init(float* flat, const model_config& cfg,
                    splitmix64& rng) const = 0;

  /// Makes room for batches of up to `batch` samples (scratch buffers).
  virtual void reserve(compute_backend& be, int batch) = 0;

  /// y (batch, output_size) = layer(x). Sets y.
  virtual void forward(compute_backend& be, const float* params, const float* x,
                       float* y, int batch) = 0;

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

/// A layer without parameters of its own (an activation, pooling,
/// dropout): nothing to initialise, no part of the flat vector, no gemm,
/// and an output shaped as its input unless it says otherwise.
class parameterless_layer : public layer {
public:
  explicit parameterless_layer(image_shape in) : in_(in) {}

  image_shape output_shape() const override { return in_; }
  size_t output_size() const override { return output_shape().size(); }
  void init(float*, const model_config&, splitmix64&) const override {}
  void reserve(compute_backend&, int) override {}
  flat_range param_range() const override { return {}; }
  double gemm_flops(int, bool) const override { return 0; }

protected:
  image_shape in_; ///< one sample's input
};

/// Fills n weights per the initialisation scheme, given fan-in and fan-out.
void init_weights(float* w, size_t n, int fan_in, int fan_out,
                  const model_config& cfg, splitmix64& rng);

} // namespace troupe

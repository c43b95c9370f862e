// A sequential model bound to one compute backend: layers over one flat
// parameter buffer and one flat gradient buffer, both in backend memory,
// with a loss on the last layer's output (softmax cross-entropy on class
// labels, or binary cross-entropy or squared error on float targets).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "models/layer.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/config/config.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// A batch's labels in host memory, as the model's loss reads them: class
/// labels (batch) for softmax cross-entropy, float targets (batch,
/// classes()) for the others.
struct batch_targets {
  batch_targets(const int32_t* class_labels) : labels(class_labels) {}
  batch_targets(const float* float_targets) : values(float_targets) {}
  const int32_t* labels = nullptr;
  const float* values = nullptr;
};

class model {
public:
  model(compute_backend& be, model_config cfg, std::string summary,
        param_layout layout, std::vector<std::unique_ptr<layer>> layers,
        size_t input_size, int classes);

  /// E.g. "mlp 784-256-128-10 relu".
  const std::string& summary() const { return summary_; }
  /// The loss, and what its labels are.
  loss_kind loss() const { return cfg_.loss; }
  const param_layout& layout() const { return layout_; }
  size_t input_size() const { return input_size_; }
  int classes() const { return classes_; }
  const std::vector<std::unique_ptr<layer>>& layers() const { return layers_; }
  compute_backend& backend() { return be_; }

  /// Initial parameters (host, layout.total() values) from the config's
  /// scheme and seed: the chief's job in a cluster.
  std::vector<float> initial_params() const;

  /// Backend pointers to the parameters and to the gradients of the last
  /// forward_backward(); both layout.total() floats.
  float* params() { return params_.floats(); }
  const float* grads() const {
    return grads_view_ ? grads_view_ : grads_.floats();
  }
  /// Host backends: the gradients of the next passes go to `external`
  /// (layout.total() floats) instead of the model's own buffer, so a worker
  /// can hand them to the shards without a copy; nullptr goes back to the
  /// model's buffer. errc::backend_unavailable on a non-host backend.
  caf::error bind_grads(float* external);

  /// Host -> model parameters, layout.total() values.
  void set_params(const float* host);
  /// Model parameters -> host, layout.total() values.
  void get_params(float* host) const;
  /// Model gradients -> host, layout.total() values.
  void get_grads(float* host) const;

  /// Forward and backward pass of a batch given in host memory: x is
  /// (batch, input_size), y its labels or targets. Sets grads() to the
  /// gradient of the batch's mean loss and returns the batch's loss sum and
  /// hits. std::invalid_argument when y is not what the loss reads.
  batch_loss forward_backward(const float* x, batch_targets y, int batch);
  /// The same, also setting input_grad (batch, input_size), in backend
  /// memory, to the gradient of the mean loss with respect to x: what an
  /// embedding lookup in front of the model backpropagates into its rows.
  batch_loss forward_backward(const float* x, batch_targets y, int batch,
                              float* input_grad);

  /// forward_backward() fused with a plain SGD update (params -= lr *
  /// gradient of the mean loss), layer by layer as the backward pass goes;
  /// grads() is left undefined. The same step as forward_backward() and
  /// optimizer::apply() for SGD without weight decay, with less memory
  /// traffic.
  batch_loss sgd_step(const float* x, batch_targets y, int batch, float lr);
  /// Forward pass only (evaluation).
  batch_loss forward(const float* x, batch_targets y, int batch);
  /// Forward pass of `batch` samples given in host memory; their outputs
  /// (logits, or a regression's values), (batch, classes()), to host
  /// memory at `out` (evaluation per sample, prediction).
  void logits(const float* x, int batch, float* out);

  /// Seeds the layers' random draws (dropout) from the model's seed and
  /// `stream`: each worker of a run passes its own, so that no two draw
  /// the same masks; the model starts on stream 0.
  void set_random_stream(uint64_t stream);

  /// Floating-point operations of the gemms of one forward_backward().
  double gemm_flops(int batch) const;

private:
  void reserve(int batch);
  /// Training (dropout on) or evaluation passes.
  void set_training(bool training);
  /// Forward and backward; with sgd_lr, the SGD update fused in.
  batch_loss train_pass(const float* x, batch_targets y, int batch,
                        const float* sgd_lr, float* input_grad = nullptr);
  /// Runs the layers; returns the logits.
  const float* run_forward(const float* x, int batch);
  /// Host input -> a backend pointer (no copy on a host backend).
  const float* stage_input(const float* x, int batch);
  /// The loss of the output `out` (backend memory) against y; with grad
  /// (backend memory), scale * its gradient there.
  batch_loss score(const float* out, batch_targets y, int batch, float* grad,
                   float scale);

  compute_backend& be_;
  model_config cfg_;
  std::string summary_;
  param_layout layout_;
  std::vector<std::unique_ptr<layer>> layers_;
  size_t input_size_;
  int classes_;
  backend_buffer params_, grads_;
  float* grads_view_ = nullptr; // see bind_grads
  float* grads_out() { return grads_view_ ? grads_view_ : grads_.floats(); }
  std::vector<backend_buffer> outputs_;     // one per layer
  backend_buffer delta_a_, delta_b_;        // ping-pong dLoss/d(activation)
  backend_buffer x_stage_, y_stage_;        // inputs, for non-host backends
  std::vector<float> host_out_, host_grad_; // float-target losses, ditto
  int capacity_ = 0;
  bool training_ = true;
};

/// Builds the model of `cfg` for samples of the given shape (NHWC) and class
/// count. errc::invalid_config when the architecture does not fit the data
/// (e.g. a CNN on samples too small for two 2x2 pools).
caf::expected<std::unique_ptr<model>> make_model(const model_config& cfg,
                                                 int height, int width,
                                                 int channels, int classes,
                                                 compute_backend& be);

} // namespace troupe

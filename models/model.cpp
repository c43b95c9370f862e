#include "models/model.hpp"

#include <algorithm>
#include <stdexcept>

#include "runtime/base/errc.hpp"
#include "runtime/compute/losses.hpp"

namespace troupe {

model::model(compute_backend& be, model_config cfg, std::string summary,
             param_layout layout, std::vector<std::unique_ptr<layer>> layers,
             size_t input_size, int classes)
  : be_(be), cfg_(std::move(cfg)), summary_(std::move(summary)),
    layout_(std::move(layout)), layers_(std::move(layers)),
    input_size_(input_size), classes_(classes) {
  params_ = be_.allocate(layout_.total() * sizeof(float));
  grads_ = be_.allocate(layout_.total() * sizeof(float));
  be_.fill(grads_.floats(), layout_.total(), 0.f);
  auto init = initial_params();
  set_params(init.data());
  set_random_stream(0);
  for (auto& l : layers_)
    l->set_training(true);
}

void model::set_random_stream(uint64_t stream) {
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->set_random_stream(
      mix64(cfg_.seed ^ mix64(stream ^ mix64(i + 1))));
}

void model::set_training(bool training) {
  if (training == training_)
    return;
  for (auto& l : layers_)
    l->set_training(training);
  training_ = training;
}

std::vector<float> model::initial_params() const {
  std::vector<float> flat(layout_.total());
  splitmix64 rng{cfg_.seed};
  for (auto& l : layers_)
    l->init(flat.data(), cfg_, rng);
  return flat;
}

void model::set_params(const float* host) {
  be_.upload(params_.floats(), host, layout_.total() * sizeof(float));
}

void model::get_params(float* host) const {
  be_.download(host, params_.floats(), layout_.total() * sizeof(float));
}

void model::get_grads(float* host) const {
  be_.download(host, grads(), layout_.total() * sizeof(float));
}

caf::error model::bind_grads(float* external) {
  if (external != nullptr && !be_.host_accessible())
    return make_error(errc::backend_unavailable,
                      "gradients can only be bound to host memory on a host "
                      "backend, not on "
                        + be_.describe());
  grads_view_ = external;
  return {};
}

void model::reserve(int batch) {
  if (batch <= capacity_)
    return;
  outputs_.clear();
  size_t widest = static_cast<size_t>(classes_);
  for (auto& l : layers_) {
    outputs_.push_back(be_.allocate(static_cast<size_t>(batch)
                                    * l->output_size() * sizeof(float)));
    widest = std::max(widest, l->output_size());
    l->reserve(be_, batch);
  }
  delta_a_ = be_.allocate(static_cast<size_t>(batch) * widest * sizeof(float));
  delta_b_ = be_.allocate(static_cast<size_t>(batch) * widest * sizeof(float));
  if (!be_.host_accessible()) {
    x_stage_ = be_.allocate(static_cast<size_t>(batch) * input_size_
                            * sizeof(float));
    y_stage_ = be_.allocate(static_cast<size_t>(batch) * sizeof(int32_t));
  }
  capacity_ = batch;
}

const float* model::stage_input(const float* x, int batch) {
  if (be_.host_accessible())
    return x;
  be_.upload(x_stage_.floats(), x,
             static_cast<size_t>(batch) * input_size_ * sizeof(float));
  return x_stage_.floats();
}

const float* model::run_forward(const float* x, int batch) {
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(be_, params_.floats(), in, outputs_[i].floats(), batch);
    in = outputs_[i].floats();
  }
  return in;
}

batch_loss model::score(const float* out, batch_targets y, int batch,
                        float* grad, float scale) {
  const bool classes = cfg_.loss == loss_kind::softmax_cross_entropy;
  if (classes ? y.labels == nullptr : y.values == nullptr)
    throw std::invalid_argument(std::string{to_string(cfg_.loss)} + " reads "
                                + (classes ? "class labels" : "float targets")
                                + ", the batch has the other kind");
  if (classes) {
    const int32_t* labels = y.labels;
    if (!be_.host_accessible()) {
      be_.upload(y_stage_.ints(), y.labels,
                 static_cast<size_t>(batch) * sizeof(int32_t));
      labels = y_stage_.ints();
    }
    return be_.softmax_cross_entropy(out, labels, batch, classes_, grad, scale);
  }
  // On the host: a backend's output comes over and its gradient goes back.
  const size_t values = static_cast<size_t>(batch) * classes_;
  const float* host_out = out;
  float* host_grad = grad;
  if (!be_.host_accessible()) {
    host_out_.resize(values);
    be_.download(host_out_.data(), out, values * sizeof(float));
    host_out = host_out_.data();
    if (grad != nullptr) {
      host_grad_.resize(values);
      host_grad = host_grad_.data();
    }
  }
  auto result = cfg_.loss == loss_kind::binary_cross_entropy
                  ? binary_cross_entropy(host_out, y.values, batch, classes_,
                                         host_grad, scale)
                  : mean_squared_error(host_out, y.values, batch, classes_,
                                       host_grad, scale);
  if (grad != nullptr && host_grad != grad)
    be_.upload(grad, host_grad, values * sizeof(float));
  return result;
}

batch_loss model::forward(const float* x, batch_targets y, int batch) {
  reserve(batch);
  set_training(false);
  const float* input = stage_input(x, batch);
  return score(run_forward(input, batch), y, batch, nullptr, 0.f);
}

void model::logits(const float* x, int batch, float* out) {
  reserve(batch);
  set_training(false);
  const float* result = run_forward(stage_input(x, batch), batch);
  be_.download(out, result,
               static_cast<size_t>(batch) * static_cast<size_t>(classes_)
                 * sizeof(float));
}

batch_loss model::forward_backward(const float* x, batch_targets y, int batch) {
  return train_pass(x, y, batch, nullptr);
}

batch_loss model::forward_backward(const float* x, batch_targets y, int batch,
                                   float* input_grad) {
  return train_pass(x, y, batch, nullptr, input_grad);
}

batch_loss model::sgd_step(const float* x, batch_targets y, int batch,
                           float lr) {
  return train_pass(x, y, batch, &lr);
}

batch_loss model::train_pass(const float* x, batch_targets y, int batch,
                             const float* sgd_lr, float* input_grad) {
  reserve(batch);
  set_training(true);
  const float* input = stage_input(x, batch);
  const float* output = run_forward(input, batch);
  float* dy = delta_a_.floats();
  float* dx = delta_b_.floats();
  // The gradient of the mean loss: scale 1/batch.
  auto result = score(output, y, batch, dy, 1.f / static_cast<float>(batch));
  for (size_t i = layers_.size(); i-- > 0;) {
    const float* layer_in = i == 0 ? input : outputs_[i - 1].floats();
    float* layer_dx = i == 0 ? input_grad : dx;
    if (sgd_lr != nullptr)
      layers_[i]->backward_sgd(be_, params_.floats(), layer_in,
                               outputs_[i].floats(), dy, layer_dx, grads_out(),
                               *sgd_lr, batch);
    else
      layers_[i]->backward(be_, params_.floats(), layer_in,
                           outputs_[i].floats(), dy, layer_dx, grads_out(),
                           batch);
    std::swap(dy, dx);
  }
  return result;
}

double model::gemm_flops(int batch) const {
  double total = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    total += layers_[i]->gemm_flops(batch, i > 0);
  return total;
}

} // namespace troupe

#include "models/model.hpp"

#include <algorithm>

#include "runtime/base/errc.hpp"

namespace troupe {

model::model(compute_backend& be, model_config cfg, std::string summary,
             param_layout layout, std::vector<std::unique_ptr<layer>> layers,
             size_t input_size, int classes)
  : be_(be),
    cfg_(std::move(cfg)),
    summary_(std::move(summary)),
    layout_(std::move(layout)),
    layers_(std::move(layers)),
    input_size_(input_size),
    classes_(classes) {
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
                      "backend, not on " + be_.describe());
  grads_view_ = external;
  return {};
}

void model::reserve(int batch) {
  if (batch <= capacity_)
    return;
  outputs_.clear();
  size_t widest = static_cast<size_t>(classes_);
  for (auto& l : layers_) {
    outputs_.push_back(
      be_.allocate(static_cast<size_t>(batch) * l->output_size() * sizeof(float)));
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

const float* model::stage_input(const float* x, const int32_t* labels,
                                int batch, const int32_t** labels_out) {
  if (be_.host_accessible()) {
    *labels_out = labels;
    return x;
  }
  be_.upload(x_stage_.floats(), x,
             static_cast<size_t>(batch) * input_size_ * sizeof(float));
  be_.upload(y_stage_.ints(), labels,
             static_cast<size_t>(batch) * sizeof(int32_t));
  *labels_out = y_stage_.ints();
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

batch_loss model::forward(const float* x, const int32_t* labels, int batch) {
  reserve(batch);
  set_training(false);
  const int32_t* y = nullptr;
  const float* input = stage_input(x, labels, batch, &y);
  const float* logits = run_forward(input, batch);
  return be_.softmax_cross_entropy(logits, y, batch, classes_, nullptr, 0.f);
}

void model::logits(const float* x, int batch, float* out) {
  reserve(batch);
  set_training(false);
  const float* input = x;
  if (!be_.host_accessible()) {
    be_.upload(x_stage_.floats(), x,
               static_cast<size_t>(batch) * input_size_ * sizeof(float));
    input = x_stage_.floats();
  }
  const float* result = run_forward(input, batch);
  be_.download(out, result,
               static_cast<size_t>(batch) * static_cast<size_t>(classes_)
                 * sizeof(float));
}

batch_loss model::forward_backward(const float* x, const int32_t* labels,
                                   int batch) {
  return train_pass(x, labels, batch, nullptr);
}

batch_loss model::forward_backward(const float* x, const int32_t* labels,
                                   int batch, float* input_grad) {
  return train_pass(x, labels, batch, nullptr, input_grad);
}

batch_loss model::sgd_step(const float* x, const int32_t* labels, int batch,
                           float lr) {
  return train_pass(x, labels, batch, &lr);
}

batch_loss model::train_pass(const float* x, const int32_t* labels, int batch,
                             const float* sgd_lr, float* input_grad) {
  reserve(batch);
  set_training(true);
  const int32_t* y = nullptr;
  const float* input = stage_input(x, labels, batch, &y);
  const float* logits = run_forward(input, batch);
  float* dy = delta_a_.floats();
  float* dx = delta_b_.floats();
  // The gradient of the mean loss: scale 1/batch.
  auto result = be_.softmax_cross_entropy(logits, y, batch, classes_, dy,
                                          1.f / static_cast<float>(batch));
  for (size_t i = layers_.size(); i-- > 0;) {
    const float* layer_in = i == 0 ? input : outputs_[i - 1].floats();
    float* layer_dx = i == 0 ? input_grad : dx;
    if (sgd_lr != nullptr)
      layers_[i]->backward_sgd(be_, params_.floats(), layer_in,
                               outputs_[i].floats(), dy, layer_dx,
                               grads_out(), *sgd_lr, batch);
    else
      layers_[i]->backward(be_, params_.floats(), layer_in,
                           outputs_[i].floats(), dy, layer_dx,
                           grads_out(), batch);
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

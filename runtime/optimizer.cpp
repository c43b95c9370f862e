#include "runtime/optimizer.hpp"

#include <cmath>

namespace troupe {

const char* to_string(optimizer_config::kind k) {
  switch (k) {
    case optimizer_config::kind::sgd: return "sgd";
    case optimizer_config::kind::momentum: return "momentum";
    case optimizer_config::kind::adam: return "adam";
  }
  return "?";
}

double learning_rate_at(const optimizer_config& cfg, int64_t step) {
  const auto& s = cfg.schedule;
  if (s.type == lr_schedule::kind::constant)
    return cfg.learning_rate;
  double exponent = static_cast<double>(step) / s.decay_steps;
  if (s.staircase)
    exponent = std::floor(exponent);
  return cfg.learning_rate * std::pow(s.decay_rate, exponent);
}

optimizer::optimizer(optimizer_config cfg, size_t size)
  : cfg_(cfg), size_(size) {
  if (cfg_.type != optimizer_config::kind::sgd)
    slot_a_.assign(size_, 0.f);
  if (cfg_.type == optimizer_config::kind::adam)
    slot_b_.assign(size_, 0.f);
}

void optimizer::apply(float* params, const float* grads, int64_t step) {
  const float lr = static_cast<float>(learning_rate_at(cfg_, step));
  const float wd = static_cast<float>(cfg_.weight_decay);
  const size_t n = size_;
  switch (cfg_.type) {
    case optimizer_config::kind::sgd:
      for (size_t i = 0; i < n; ++i)
        params[i] -= lr * (grads[i] + wd * params[i]);
      return;
    case optimizer_config::kind::momentum: {
      // tf.train.MomentumOptimizer: accum = m * accum + g; p -= lr * accum
      // (Nesterov: p -= lr * (g + m * accum)).
      const float m = static_cast<float>(cfg_.momentum);
      float* acc = slot_a_.data();
      if (cfg_.nesterov) {
        for (size_t i = 0; i < n; ++i) {
          float g = grads[i] + wd * params[i];
          acc[i] = m * acc[i] + g;
          params[i] -= lr * (g + m * acc[i]);
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          acc[i] = m * acc[i] + grads[i] + wd * params[i];
          params[i] -= lr * acc[i];
        }
      }
      return;
    }
    case optimizer_config::kind::adam: {
      // tf.train.AdamOptimizer: bias correction folded into the step size.
      const double t = static_cast<double>(step + 1);
      const float b1 = static_cast<float>(cfg_.beta1);
      const float b2 = static_cast<float>(cfg_.beta2);
      const float eps = static_cast<float>(cfg_.epsilon);
      const float alpha = static_cast<float>(
        lr * std::sqrt(1.0 - std::pow(cfg_.beta2, t))
        / (1.0 - std::pow(cfg_.beta1, t)));
      float* mv = slot_a_.data();
      float* vv = slot_b_.data();
      for (size_t i = 0; i < n; ++i) {
        float g = grads[i] + wd * params[i];
        mv[i] = b1 * mv[i] + (1.f - b1) * g;
        vv[i] = b2 * vv[i] + (1.f - b2) * g * g;
        params[i] -= alpha * mv[i] / (std::sqrt(vv[i]) + eps);
      }
      return;
    }
  }
}

std::vector<std::string> optimizer::slot_names() const {
  switch (cfg_.type) {
    case optimizer_config::kind::sgd: return {};
    case optimizer_config::kind::momentum: return {"momentum"};
    case optimizer_config::kind::adam: return {"adam_m", "adam_v"};
  }
  return {};
}

std::vector<std::pair<std::string, std::vector<float>*>> optimizer::slots() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  auto names = slot_names();
  for (size_t i = 0; i < names.size(); ++i)
    out.emplace_back(names[i], i == 0 ? &slot_a_ : &slot_b_);
  return out;
}

std::vector<std::pair<std::string, std::vector<float>>>
optimizer::copy_slots() const {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  auto names = slot_names();
  for (size_t i = 0; i < names.size(); ++i)
    out.emplace_back(names[i], i == 0 ? slot_a_ : slot_b_);
  return out;
}

} // namespace troupe

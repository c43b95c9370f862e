#include "runtime/params/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/base/flush_denormals.hpp"

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

namespace {

// The update loops, one per optimizer, over non-aliasing arrays so that the
// compiler vectorises them, each compiled for AVX-512, AVX2 and the
// baseline and picked at load time (GCC target_clones): on a parameter shard
// the optimizer is most of the work, and Adam's sqrt and division gain most
// from the wider units.
#define TROUPE_UPDATE_LOOP                                                     \
  __attribute__((target_clones("avx512f", "avx2", "default")))

TROUPE_UPDATE_LOOP
void sgd_update(float* __restrict p, const float* __restrict g, size_t n,
                float lr, float wd) {
  for (size_t i = 0; i < n; ++i)
    p[i] -= lr * (g[i] + wd * p[i]);
}

// tf.train.MomentumOptimizer: accum = m * accum + g; p -= lr * accum
// (Nesterov: p -= lr * (g + m * accum)).
TROUPE_UPDATE_LOOP
void momentum_update(float* __restrict p, const float* __restrict g,
                     float* __restrict acc, size_t n, float lr, float wd,
                     float m, bool nesterov) {
  if (nesterov) {
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * p[i];
      acc[i] = m * acc[i] + gi;
      p[i] -= lr * (gi + m * acc[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      acc[i] = m * acc[i] + g[i] + wd * p[i];
      p[i] -= lr * acc[i];
    }
  }
}

// tf.train.AdamOptimizer, with the bias correction folded into alpha.
TROUPE_UPDATE_LOOP
void adam_update(float* __restrict p, const float* __restrict g,
                 float* __restrict mv, float* __restrict vv, size_t n,
                 float alpha, float wd, float b1, float b2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] + wd * p[i];
    mv[i] = b1 * mv[i] + (1.f - b1) * gi;
    vv[i] = b2 * vv[i] + (1.f - b2) * gi * gi;
    p[i] -= alpha * mv[i] / (std::sqrt(vv[i]) + eps);
  }
}

// Adam with each coordinate's step scaled (the gap-aware rule).
TROUPE_UPDATE_LOOP
void adam_update_scaled(float* __restrict p, const float* __restrict g,
                        float* __restrict mv, float* __restrict vv,
                        const float* __restrict scale, size_t n, float alpha,
                        float wd, float b1, float b2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] + wd * p[i];
    mv[i] = b1 * mv[i] + (1.f - b1) * gi;
    vv[i] = b2 * vv[i] + (1.f - b2) * gi * gi;
    p[i] -= alpha * scale[i] * mv[i] / (std::sqrt(vv[i]) + eps);
  }
}

#undef TROUPE_UPDATE_LOOP

} // namespace

void optimizer::apply(float* params, const float* grads, int64_t step,
                      double lr_scale, double implicit_momentum,
                      const float* step_scale) {
  const float lr = static_cast<float>(learning_rate_at(cfg_, step) * lr_scale);
  const float wd = static_cast<float>(cfg_.weight_decay);
  auto lowered = [&](double momentum) {
    return implicit_momentum > 0 ? std::max(0.0, momentum - implicit_momentum)
                                 : momentum;
  };
  scoped_flush_denormals flush{cfg_.flush_denormals};
  if (step_scale && cfg_.type != optimizer_config::kind::adam) {
    scaled_.resize(size_);
    for (size_t i = 0; i < size_; ++i)
      scaled_[i] = grads[i] * step_scale[i];
    grads = scaled_.data();
  }
  switch (cfg_.type) {
    case optimizer_config::kind::sgd:
      return sgd_update(params, grads, size_, lr, wd);
    case optimizer_config::kind::momentum:
      return momentum_update(params, grads, slot_a_.data(), size_, lr, wd,
                             static_cast<float>(lowered(cfg_.momentum)),
                             cfg_.nesterov);
    case optimizer_config::kind::adam: {
      if (step == 0)
        lowered_beta1_ratio_ = 1.0;
      const double beta1 = lowered(cfg_.beta1);
      if (beta1 != cfg_.beta1)
        lowered_beta1_ratio_ *= cfg_.beta1 > 0 ? beta1 / cfg_.beta1 : 1.0;
      const double t = static_cast<double>(step + 1);
      const float alpha = static_cast<float>(
        lr * std::sqrt(1.0 - std::pow(cfg_.beta2, t))
        / (1.0 - std::pow(cfg_.beta1, t) * lowered_beta1_ratio_));
      if (step_scale)
        return adam_update_scaled(params, grads, slot_a_.data(), slot_b_.data(),
                                  step_scale, size_, alpha, wd,
                                  static_cast<float>(beta1),
                                  static_cast<float>(cfg_.beta2),
                                  static_cast<float>(cfg_.epsilon));
      return adam_update(params, grads, slot_a_.data(), slot_b_.data(), size_,
                         alpha, wd, static_cast<float>(beta1),
                         static_cast<float>(cfg_.beta2),
                         static_cast<float>(cfg_.epsilon));
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

#include "runtime/params/stale_compensation.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {

namespace {

/// How fast the gap's step means follow the steps: over about 100 updates,
/// long enough to tell a coordinate that oscillates from one that moves on.
constexpr float step_mean_decay = 0.99f;
/// DC-ASGD-a's moving mean of g*g and its epsilon (Zheng et al.).
constexpr float square_mean_decay = 0.95f;
constexpr float square_epsilon = 1e-7f;

} // namespace

size_t compensation_history(int workers, size_t floats) {
  constexpr size_t most = 64, most_bytes = size_t{256} << 20;
  size_t n = std::min(most, 2 * static_cast<size_t>(std::max(workers, 0)) + 2);
  size_t fit = most_bytes / std::max<size_t>(1, floats * sizeof(float));
  return std::max<size_t>(2, std::min(n, fit));
}

stale_compensation::stale_compensation(options opts, size_t size)
  : opts_(opts), size_(size) {
  if (!active())
    return;
  if (opts_.gap)
    step_mean_.assign(size_, 0.f);
  if (opts_.lambda > 0) {
    square_mean_.assign(size_, 0.f);
    grads_.resize(size_);
  }
  if (opts_.gap)
    scale_.resize(size_);
}

void stale_compensation::remember(int64_t version,
                                  std::shared_ptr<std::vector<float>> values) {
  if (!active())
    return;
  while (!ring_.empty() && ring_.back().first >= version)
    ring_.pop_back(); // a restore to an older version
  ring_.emplace_back(version, std::move(values));
  while (ring_.size() > opts_.history)
    ring_.pop_front();
}

void stale_compensation::forget() {
  ring_.clear();
}

const std::vector<float>* stale_compensation::values_at(int64_t version) const {
  for (auto it = ring_.rbegin(); it != ring_.rend(); ++it)
    if (it->first == version)
      return it->second.get();
  return nullptr;
}

stale_compensation::update
stale_compensation::prepare(const std::vector<float>& now,
                            const std::vector<float>& used,
                            const float* grads) {
  update u{grads, nullptr};
  if (opts_.lambda > 0) {
    const auto lambda = static_cast<float>(opts_.lambda);
    for (size_t i = 0; i < size_; ++i) {
      float g = grads[i];
      square_mean_[i] = square_mean_decay * square_mean_[i]
                        + (1.f - square_mean_decay) * g * g;
      grads_[i] = g
                  + lambda * g * g / std::sqrt(square_mean_[i] + square_epsilon)
                      * (now[i] - used[i]);
    }
    u.grads = grads_.data();
  }
  if (opts_.gap && stepped_) {
    for (size_t i = 0; i < size_; ++i) {
      float c = step_mean_[i];
      float gap = c > 0.f ? std::fabs(now[i] - used[i]) / c : 0.f;
      scale_[i] = gap > 1.f ? 1.f / gap : 1.f;
    }
    u.step_scale = scale_.data();
  }
  return u;
}

void stale_compensation::observe(const std::vector<float>& before,
                                 const std::vector<float>& after) {
  if (!opts_.gap)
    return;
  if (!stepped_) { // the first step is the mean
    for (size_t i = 0; i < size_; ++i)
      step_mean_[i] = std::fabs(after[i] - before[i]);
    stepped_ = true;
    return;
  }
  for (size_t i = 0; i < size_; ++i)
    step_mean_[i] = step_mean_decay * step_mean_[i]
                    + (1.f - step_mean_decay) * std::fabs(after[i] - before[i]);
}

stale_compensation::image stale_compensation::copy() const {
  image img;
  for (auto& [v, values] : ring_) {
    img.versions.push_back(v);
    img.values.push_back(*values);
  }
  if (stepped_)
    img.step_mean = step_mean_;
  img.square_mean = square_mean_;
  return img;
}

bool stale_compensation::load(const image& img) {
  if (img.versions.size() != img.values.size())
    return false;
  for (auto& v : img.values)
    if (v.size() != size_)
      return false;
  if (!img.step_mean.empty() && img.step_mean.size() != size_)
    return false;
  if (!img.square_mean.empty() && img.square_mean.size() != size_)
    return false;
  ring_.clear();
  if (!active())
    return true;
  for (size_t k = 0; k < img.versions.size(); ++k)
    ring_.emplace_back(img.versions[k],
                       std::make_shared<std::vector<float>>(img.values[k]));
  while (ring_.size() > opts_.history)
    ring_.pop_front();
  stepped_ = opts_.gap && !img.step_mean.empty();
  if (stepped_)
    step_mean_ = img.step_mean;
  else if (opts_.gap)
    std::fill(step_mean_.begin(), step_mean_.end(), 0.f);
  if (opts_.lambda > 0) {
    if (img.square_mean.empty())
      std::fill(square_mean_.begin(), square_mean_.end(), 0.f);
    else
      square_mean_ = img.square_mean;
  }
  return true;
}

} // namespace troupe

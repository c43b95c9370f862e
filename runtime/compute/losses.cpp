#include "runtime/compute/losses.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace troupe {

batch_loss binary_cross_entropy(const float* logits, const float* targets,
                                int rows, int cols, float* grad, float scale) {
  batch_loss out;
  const float per_output = scale / static_cast<float>(cols);
  for (int r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r) * cols;
    double row = 0;
    bool all_right = true;
    for (int c = 0; c < cols; ++c) {
      const double z = logits[at + c];
      const double t = targets[at + c];
      // -t log s(z) - (1 - t) log(1 - s(z)), stably: max(z, 0) - z t +
      // log(1 + e^-|z|).
      row += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
      all_right = all_right && ((z > 0) == (t > 0.5));
      if (grad != nullptr) {
        const double s = z >= 0 ? 1 / (1 + std::exp(-z))
                                : std::exp(z) / (1 + std::exp(z));
        grad[at + c] = per_output * static_cast<float>(s - t);
      }
    }
    out.loss_sum += row / cols;
    out.correct += all_right ? 1 : 0;
  }
  return out;
}

batch_loss mean_squared_error(const float* outputs, const float* targets,
                              int rows, int cols, float* grad, float scale) {
  batch_loss out;
  const float per_output = 2 * scale / static_cast<float>(cols);
  for (int r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r) * cols;
    double squared = 0, absolute = 0;
    for (int c = 0; c < cols; ++c) {
      const double e = static_cast<double>(outputs[at + c]) - targets[at + c];
      squared += e * e;
      absolute += std::abs(e);
      if (grad != nullptr)
        grad[at + c] = per_output * static_cast<float>(e);
    }
    out.loss_sum += squared / cols;
    out.abs_err_sum += absolute / cols;
  }
  return out;
}

} // namespace troupe

// The losses that read float targets, on host memory: binary
// cross-entropy on logits and mean squared error. (Softmax cross-entropy,
// which reads class labels, is a backend operation: it runs where the
// logits are.) A batch's outputs and targets are (rows, cols); a row's loss
// is the mean over its cols, as PyTorch's and Keras' mean reductions give
// it, so loss_sum / rows is their batch loss.
#pragma once

#include "runtime/compute/backend.hpp"

namespace troupe {

/// Binary cross-entropy of sigmoid(logits) against targets in [0, 1],
/// computed from the logits (no probability rounds to 0 or 1). correct
/// counts the rows whose every output is on the target's side of 1/2
/// (logit > 0 for a target > 1/2): subset accuracy, which for one label
/// per sample is plain accuracy. With grad, writes scale * dLoss/dlogits.
batch_loss binary_cross_entropy(const float* logits, const float* targets,
                                int rows, int cols, float* grad, float scale);

/// Mean squared error of outputs against targets; also sums each row's
/// mean absolute error (abs_err_sum). With grad, writes scale *
/// dLoss/doutputs.
batch_loss mean_squared_error(const float* outputs, const float* targets,
                              int rows, int cols, float* grad, float scale);

} // namespace troupe

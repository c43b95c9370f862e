// A layer's backward pass against central finite differences: the check a
// layer of your own should pass (docs/models.md), and the one troupe's own
// layers pass in tests/models/gradient_check_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "models/layer.hpp"
#include "runtime/compute/backend.hpp"

namespace troupe {

struct gradient_check_report {
  int checked = 0;   ///< derivatives compared
  int wrong = 0;     ///< of them, outside the tolerance
  std::string first; ///< the first wrong one, e.g. "d/dparam[12]: backward
                     ///< 0.31, finite differences 0.27"
};

/// Compares `l`'s backward() on a host backend with central differences of
/// L = sum(y * r), for random inputs x of `in`'s shape and a random r, over
/// the layer's parameters (`params` is the model's whole flat vector, of
/// which the layer owns param_range(); `n_params` floats) and its inputs:
/// at most about `samples` of each. The layer's random stream is reset
/// before every forward pass, so a dropout layer draws one mask for all.
/// A derivative is wrong when it differs from the finite difference by
/// more than 2e-3 + 2e-2 * |finite difference|.
gradient_check_report check_layer_gradients(layer& l, compute_backend& be,
                                            float* params, size_t n_params,
                                            image_shape in, int batch,
                                            uint64_t seed, int samples = 200);

} // namespace troupe

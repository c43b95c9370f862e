// What an evaluation says: troupe's own (models/trainer.hpp) or the one a
// user's evaluation function returns for an external model.
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

struct eval_result {
  double loss = 0;     ///< mean
  double accuracy = 0; ///< classification (subset accuracy for several
                       ///< binary labels); 0 for a regression
  int64_t count = 0;   ///< samples scored; 0 when the user's code did not say
  /// A regression (mean squared error): loss is the mean squared error,
  /// and these say the rest.
  bool regression = false;
  double mae = 0; ///< mean absolute error
  /// 1 - squared error / the targets' squared deviation from their
  /// per-target means, over all the set's targets (scikit-learn's
  /// r2_score, variance_weighted): 1 is exact, 0 no better than the means.
  double r2 = 0;
};

/// The figure a run is judged by, "accuracy" or "r2", and its value.
const char* headline_name(const eval_result& r);
double headline(const eval_result& r);

/// The scores as a progress line gives them, for the set `set`:
/// "test accuracy = 0.8812, test loss = 0.3311" or, for a regression,
/// "test mse = 0.0101, mae = 0.0802, r2 = 0.9893".
std::string describe_scores(const eval_result& r, const std::string& set);

} // namespace troupe

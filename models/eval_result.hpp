// What an evaluation says: troupe's own (models/trainer.hpp) or the one a
// user's evaluation function returns for an external model.
#pragma once

#include <cstdint>

namespace troupe {

struct eval_result {
  double loss = 0; ///< mean
  double accuracy = 0;
  int64_t count = 0; ///< samples scored; 0 when the user's code did not say
};

} // namespace troupe

// How the training set is divided among workers (training.data_partition).
//
// - shared: one plan for the cluster; each epoch visits every sample once,
//   whichever worker trains it (the default).
// - replicated: each worker runs its own epochs over the whole set, in its
//   own order, as TF1 between-graph workers each iterate the full dataset.
// - sharded: each epoch's order is cut into one contiguous part per
//   worker; worker i trains only its part, so each sample is still trained
//   once per epoch, always by the worker that owns it that epoch.
#pragma once

#include <optional>
#include <string>

namespace troupe {

enum class data_partition { shared, replicated, sharded };

inline const char* to_string(data_partition p) {
  switch (p) {
    case data_partition::replicated: return "replicated";
    case data_partition::sharded: return "sharded";
    default: return "shared";
  }
}

inline std::optional<data_partition>
parse_data_partition(const std::string& text) {
  for (auto p : {data_partition::shared, data_partition::replicated,
                 data_partition::sharded})
    if (text == to_string(p))
      return p;
  return std::nullopt;
}

} // namespace troupe

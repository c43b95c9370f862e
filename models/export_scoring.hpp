// A click model scored from a run's exports (runtime/sparse/table_export.hpp)
// alone, as a server that applies them would: the dense parameters of one
// export's dense file, the table its chain leaves (the full export and the
// deltas up to it), and for a key the table lacks what the run's own
// evaluation read (its initial row, or zeros where the table admits keys).
// What `troupe-predict --export` runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/expected.hpp"

namespace troupe {

struct export_scores {
  int64_t sequence = -1; ///< the export scored
  int64_t step = 0;      ///< its step
  int64_t count = 0;     ///< samples scored
  double log_loss = 0, auc = 0;
  uint64_t rows = 0;     ///< rows its table holds
  std::vector<double> p; ///< each sample's click probability
};

/// Scores the click log at `input` (one file, plain or gzipped) with
/// export `sequence` of folder `dir` (-1: its newest). Errors name what is
/// wrong: no manifest or export, an export of a model that is not a click
/// model, a chain that does not follow, a log of another schema.
caf::expected<export_scores> score_clicks_from_export(const std::string& dir,
                                                      int64_t sequence,
                                                      const std::string& input);

} // namespace troupe

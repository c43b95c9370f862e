// Scoring a checkpoint on the test set without training or writing
// anything: what `troupe-train --evaluate CKPT` prints.
#pragma once

#include <iosfwd>
#include <string>

#include "caf/error.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

/// Builds the model of `cfg`, loads the parameters of checkpoint `path`
/// into it and evaluates the test set of `data`, printing to `out` the
/// accuracy and mean loss, each class's accuracy and the confusion matrix
/// (rows: label, columns: predicted class). Reads the checkpoint only.
/// Errors: those of read_checkpoint (errc::file_not_found,
/// errc::bad_format), errc::layout_mismatch when the checkpoint belongs to
/// another model, make_model's.
caf::error evaluate_checkpoint(const run_config& cfg, const train_test& data,
                               compute_backend& be, const std::string& path,
                               std::ostream& out);

} // namespace troupe

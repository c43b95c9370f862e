// The one error type of troupe: an errc code plus a human-readable context
// string, carried as a caf::error so it crosses actor and node boundaries.
#pragma once

#include <cstdint>
#include <string>

#include "caf/error.hpp"
#include "caf/expected.hpp"
// CAF_ERROR_CODE_ENUM expands to code that calls make_message unqualified.
#include "caf/make_message.hpp"

namespace troupe {

/// Failure kinds. Values are stable: they travel between nodes.
enum class errc : uint8_t {
  invalid_config = 1,  ///< a config value is missing, mistyped or out of range
  file_not_found,      ///< a path named by the user does not exist
  io_error,            ///< reading or writing a file failed
  bad_format,          ///< a file exists but its contents are malformed
  wrong_size,          ///< a buffer has the wrong number of elements
  layout_mismatch,     ///< parameter layouts of two parties disagree
  non_finite,          ///< a value is NaN or Inf where that is not allowed
  backend_unavailable, ///< the requested compute backend cannot be used
  invalid_argument,    ///< a caller passed an argument outside the contract
  worker_failed,       ///< a worker threw (backend failure, injected fault)
  restart_limit,       ///< failures came faster than the restart intensity
  actor_down,          ///< a shard or the feeder stopped during a run
  node_unreachable,    ///< a node never came up, or cannot be connected to
  stopped,             ///< stopped (a signal) before training began
  unauthorized, ///< a peer did not prove the cluster's key, or we could not
  data_changed, ///< a dataset file changed or went missing while a run read it
  /// A user's step returned what its contract refuses (a gradient of the
  /// wrong shape, dtype or name), or the user's evaluation failed: every
  /// restart would fail alike.
  bad_step,
};

/// The enumerator's name, e.g. "invalid_config".
std::string to_string(errc code);

/// Makes an error of kind `code` whose context is the single line `what`.
caf::error make_error(errc code, std::string what);

/// One line for a person: the context string of a troupe error, CAF's
/// exit reasons and system errors in words, or CAF's own rendering of any
/// other error.
std::string describe(const caf::error& err);

} // namespace troupe

CAF_ERROR_CODE_ENUM(troupe::errc, "troupe")

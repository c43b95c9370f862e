// What a dataset file was when a run opened it (its size and modification
// time), so that a file replaced, cut or deleted while the run reads it is
// named in an error (errc::data_changed) instead of being read as other
// samples or ending the process with SIGBUS (a mapped file cut short).
#pragma once

#include <cstdint>
#include <string>

#include "caf/error.hpp"
#include "caf/expected.hpp"

namespace troupe {

struct file_stamp {
  std::string path;
  int64_t bytes = 0;
  int64_t modified_ns = 0;

  /// `path` as it is now: open_error's errors where it cannot be read.
  static caf::expected<file_stamp> of(const std::string& path);
  /// The same from an open descriptor of `path`.
  static caf::expected<file_stamp> of(int fd, const std::string& path);

  /// None while the file is as stamped; else errc::data_changed naming it:
  /// "<path>: this dataset file went missing during the run", or "...
  /// changed during the run (<bytes> bytes when opened, <bytes> now)", or
  /// "(modified since it was opened)".
  caf::error check() const;
};

} // namespace troupe

// Errors of opening a dataset file, shared by its readers: each names the
// file and says what is wrong with it.
#pragma once

#include <cstdint>
#include <string>

#include "caf/error.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// Why a file that failed to open did: errc::file_not_found when it does
/// not exist, errc::io_error otherwise (permissions).
caf::error open_error(const std::string& path);

/// An error when `path` is not a regular file (a FIFO would block the
/// reader, a folder reads as garbage); none when it is.
caf::error check_regular(const std::string& path);

/// The whole of a regular file of at most `max_bytes` bytes; the errors of
/// check_regular and open_error, errc::bad_format for a larger file.
caf::expected<std::string> read_whole_file(const std::string& path,
                                           uint64_t max_bytes);

} // namespace troupe

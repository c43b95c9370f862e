// The bytes of a safetensors file (8-byte little-endian header length, a
// JSON header, then the tensors' data), read with the checks every
// reader of one needs before it believes anything the file says: only a
// regular file is read (a FIFO would block the reader forever), and the
// header's length is checked against the file before anything the file
// names is allocated. Troupe's checkpoints (checkpoint.hpp) and the
// parameters a user declares (declared_params.hpp) are both read with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "caf/expected.hpp"

namespace troupe {

/// Far above any model's header (a tensor's entry is ~100 bytes).
constexpr uint64_t max_header_bytes = 16 << 20;

struct safetensors_file {
  nlohmann::json header;
  std::vector<char> bytes; ///< the whole file, when read in full
  uint64_t header_len = 0;
  uint64_t file_size = 0;

  /// The tensors' data: after the length and the header (whole files).
  const char* data() const { return bytes.data() + 8 + header_len; }
  uint64_t data_size() const { return file_size - 8 - header_len; }
};

/// Reads `path`'s header, and with `whole` the whole file. Errors name the
/// file: errc::file_not_found, errc::io_error, errc::bad_format (not a
/// regular file, truncated, a header too long or malformed).
caf::expected<safetensors_file> read_safetensors_file(const std::string& path,
                                                      bool whole);

} // namespace troupe

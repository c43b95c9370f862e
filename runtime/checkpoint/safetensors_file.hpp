// The bytes of a safetensors file (8-byte little-endian header length, a
// JSON header, then the tensors' data), read with the checks every
// reader of one needs before it believes anything the file says: only a
// regular file is read (a FIFO would block the reader forever), and the
// header's length is checked against the file before anything the file
// names is allocated. Troupe's checkpoints (checkpoint.hpp) and the
// parameters a user declares (declared_params.hpp) are both read and
// written with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "caf/error.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// The metadata key (in __metadata__) that names a file's buffers
/// (tensor_slot::buffer): a JSON object of buffer names and their dtypes,
/// as a string, since safetensors' metadata values are strings. The
/// parameters a user declares and troupe's checkpoints both carry it.
constexpr const char* buffers_key = "troupe.buffers";

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

/// Where one F32 tensor of a header lies: its shape and its data's
/// [begin, end) bytes, relative to the data section.
struct tensor_extent {
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

/// The extent of tensor `key` (an F32 tensor, or one of `element_bytes`
/// bytes an element; its dtype is the caller's to check) from its header
/// entry `value`, checked against a data section of `data_size` bytes: a
/// shape of at most 8 positive dimensions whose product stays within the
/// data (so no count overflows), data_offsets spanning exactly that many
/// elements, inside the data. errc::bad_format naming `path` and the
/// tensor otherwise.
caf::expected<tensor_extent>
read_f32_extent(const std::string& path, const std::string& key,
                const nlohmann::json& value, uint64_t data_size,
                size_t element_bytes = sizeof(float));

/// Reads `path`'s header, and with `whole` the whole file. Errors name the
/// file: errc::file_not_found, errc::io_error, errc::bad_format (not a
/// regular file, truncated, a header too long or malformed).
caf::expected<safetensors_file> read_safetensors_file(const std::string& path,
                                                      bool whole);

/// Writes `header` (each tensor's entry with its data_offsets, relative to
/// the data section) and then each of `data` back to back, atomically: a
/// temporary file in the same folder, fsync, then rename, so a crash
/// leaves the old file or the new one. errc::io_error naming the path.
caf::error
write_safetensors_file(const std::string& path, const nlohmann::json& header,
                       const std::vector<const std::vector<float>*>& data);

} // namespace troupe

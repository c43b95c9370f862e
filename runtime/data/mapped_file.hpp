// A dataset file mapped read-only: the readers point into its bytes instead
// of copying them, so a sample costs memory only while a batch reads it,
// and the kernel may drop its pages again (they are the page cache's,
// clean, and count against no one's limit once dropped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "caf/expected.hpp"
#include "runtime/data/file_stamp.hpp"

namespace troupe {

class mapped_file {
public:
  mapped_file(const unsigned char* data, size_t size, file_stamp stamp = {})
    : data_(data), size_(size), stamp_(std::move(stamp)) {}
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view bytes() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

  /// Tells the kernel that [first, first + n) is read once, front to
  /// back, and may be dropped behind the reader (a full scan at load).
  void done_with(const unsigned char* first, size_t n) const;

  /// The file as it was mapped. Cut short, it would end the process with
  /// SIGBUS at the next read past its new end: a reader checks it first.
  const file_stamp& stamp() const { return stamp_; }

private:
  const unsigned char* data_;
  size_t size_;
  file_stamp stamp_;
};

/// Maps the regular file `path` of at most `max_bytes` bytes; the errors
/// of read_whole_file (runtime/base/file_checks.hpp). An empty file maps
/// to no bytes.
caf::expected<std::shared_ptr<const mapped_file>>
map_file(const std::string& path, uint64_t max_bytes);

} // namespace troupe

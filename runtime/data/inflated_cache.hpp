// Compressed dataset files (gzipped IDX images, deflated .npz members)
// inflated once into a cache folder on local disk and mapped from there,
// as torchvision unpacks MNIST's archives: a process then holds none of
// their bytes (they are the page cache's, clean, and the kernel drops them
// under pressure), and every epoch reads them in place, in any order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "caf/error.hpp"
#include "caf/expected.hpp"
#include "runtime/data/mapped_file.hpp"

namespace troupe {

/// Where a cached copy's bytes go while it is written.
class inflated_sink {
public:
  virtual ~inflated_sink() = default;
  /// Appends n bytes; errc::io_error naming the cache file (a full disk).
  virtual caf::error append(const void* data, size_t n) = 0;
};

/// Writes a copy's bytes, checking them as it goes; an error leaves no
/// copy behind and is returned as it is.
using inflate_fn = std::function<caf::error(inflated_sink&)>;

/// The cache folder when data.cache_dir is not set: the first of
/// $XDG_CACHE_HOME/troupe, $HOME/.cache/troupe and /tmp/troupe-cache-<uid>
/// that is a writable folder or can be made one (made here).
std::string default_data_cache_dir();

/// The inflated bytes of `source` (of its member `member`, "" for the
/// whole file), mapped from the copy in `dir`. The copy is named by the
/// source's path, `member` and the source's size and modification time,
/// so a source that changes gets a new copy (and older copies of it are
/// removed). Without one, `inflate` writes it to a temporary file that is
/// synced and renamed into place: processes that share the folder see a
/// whole copy or none, and one made by a process that died is never used.
/// Errors: the folder cannot be made or written (errc::io_error naming it
/// and "data.cache_dir"), the copy exceeds `max_bytes`, or the error of
/// `inflate`.
caf::expected<std::shared_ptr<const mapped_file>>
cached_inflation(const std::string& dir, const std::string& source,
                 const std::string& member, uint64_t max_bytes,
                 const inflate_fn& inflate);

} // namespace troupe

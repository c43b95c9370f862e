// Checkpoints as safetensors files: readable by NumPy/PyTorch users, and
// self-describing enough for troupe to refuse a file that does not fit.
//
// File: 8-byte little-endian header length, a JSON header, then raw
// little-endian F32 data. Tensors are "params/<name>" for every tensor of the
// layout, in layout order, then "<slot>/<name>" for every optimizer slot
// (e.g. "adam_m/dense0/w"). __metadata__ holds format "troupe-checkpoint",
// version "1", the step, and any extra string keys of the writer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

struct checkpoint {
  int64_t step = 0;
  param_layout layout;
  std::vector<float> params; ///< layout.total() values
  /// Optimizer state vectors, each layout.total() long, by slot name.
  std::vector<std::pair<std::string, std::vector<float>>> slots;
  /// Extra metadata (e.g. "optimizer", the data feeder's position).
  std::map<std::string, std::string> metadata;
};

/// Writes `ckpt` to `path` atomically: a temporary file in the same
/// directory, fsync, then rename, so a crash leaves the old file or the new
/// one, never half of one. Returns errc::io_error naming the path,
/// errc::wrong_size when a vector does not match the layout, or
/// errc::invalid_argument for a metadata key the format reserves ("format",
/// "version", "step").
caf::error write_checkpoint(const std::string& path, const checkpoint& ckpt);

/// Reads a checkpoint written by write_checkpoint. Errors name the file:
/// errc::file_not_found, errc::io_error, errc::bad_format (not a regular
/// file, truncated file, corrupt header, not a troupe checkpoint, unknown
/// version, a step that is not a plain non-negative integer, tensor data
/// out of bounds, of the wrong size or overlapping another tensor, a NaN or
/// infinite value, a tensor the layout does not name).
caf::expected<checkpoint> read_checkpoint(const std::string& path);

/// The step and metadata of a checkpoint, reading its header only (no
/// tensors, no layout): what choosing among checkpoints needs.
caf::expected<checkpoint> read_checkpoint_metadata(const std::string& path);

/// errc::layout_mismatch naming `path` and the first difference when the
/// checkpoint's layout differs from `expected`, else none.
caf::error check_layout(const checkpoint& ckpt, const param_layout& expected,
                        const std::string& path);

} // namespace troupe

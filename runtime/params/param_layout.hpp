// Named tensors packed into one flat float vector, and the split of that
// vector into contiguous shard ranges. Everything that moves parameters
// (pulls, pushes, checkpoints) speaks in offsets of this layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "caf/error.hpp"

namespace troupe {

/// A tensor shape, outermost dimension first (row-major).
using shape = std::vector<int64_t>;

/// Number of elements of `s` (1 for a scalar shape {}).
int64_t element_count(const shape& s);

/// Renders `s` as "784x256".
std::string to_string(const shape& s);

/// One named tensor inside the flat vector.
struct tensor_slot {
  std::string name;
  shape dims;
  size_t offset = 0; ///< first element in the flat vector
  size_t size = 0;   ///< element count
  /// A buffer: a model's state that no optimizer trains, such as
  /// BatchNorm's running statistics. A step sets it; a push carries its
  /// change (old - new) and the shard subtracts that as it is (async:
  /// every worker's change adds up; sync: their mean), with no optimizer.
  bool buffer = false;
  /// The dtype the user's model holds it in, as safetensors names it
  /// ("F32", "I64", ...): the shards hold every value as a float, the
  /// Python module hands a buffer back in its own dtype.
  std::string dtype = "F32";
};

/// A half-open element range [begin, end) of the flat vector.
struct flat_range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  friend bool operator==(const flat_range& a, const flat_range& b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

/// The slices that bounds b cut the flat vector into: [b[i], b[i+1]) for
/// each i (the shards' map as the chief sends it to workers).
inline std::vector<flat_range> ranges_of(const std::vector<uint64_t>& bounds) {
  std::vector<flat_range> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    out.push_back(flat_range{bounds[i], bounds[i + 1]});
  return out;
}

/// An ordered list of named tensors laid out back to back.
class param_layout {
public:
  /// Appends a tensor and returns its offset. Names must be unique; a
  /// duplicate is a programming error and throws std::invalid_argument.
  size_t add(std::string name, shape dims);
  /// Appends a buffer (tensor_slot::buffer) of dtype `dtype`.
  size_t add_buffer(std::string name, shape dims, std::string dtype);

  /// Whether any tensor is a buffer.
  bool has_buffers() const;

  /// The parts of `range` that buffers hold, relative to range.begin (a
  /// shard's view of them), in order.
  std::vector<flat_range> buffers_within(flat_range range) const;

  /// Total element count.
  size_t total() const { return total_; }

  const std::vector<tensor_slot>& tensors() const { return tensors_; }

  /// The tensor called `name`, or nullptr.
  const tensor_slot* find(const std::string& name) const;

  /// Splits [0, total) into `n` contiguous ranges whose sizes differ by at
  /// most one element, cutting through tensors where needed (a shard owns
  /// bytes, not tensors, so one huge tensor still spreads over all shards).
  /// Returns errc::invalid_argument for n < 1 or n > total.
  caf::expected<std::vector<flat_range>> split(size_t n) const;

  /// Error naming the first difference between two layouts (names and
  /// shapes; which tensors are buffers is not compared), or none.
  caf::error compare(const param_layout& other) const;

  friend bool operator==(const param_layout& a, const param_layout& b);

private:
  std::vector<tensor_slot> tensors_;
  size_t total_ = 0;
};

/// Shard i's part of `flat`: [ranges[i].begin, ranges[i].end).
std::vector<float> slice_of(const std::vector<float>& flat, flat_range range);

/// The flat vector back from its parts: part i goes to ranges[i]. Returns
/// errc::wrong_size when a part's size is not its range's, or the ranges
/// do not tile [0, total) in order.
caf::expected<std::vector<float>>
gather_parts(const std::vector<flat_range>& ranges,
             const std::vector<const std::vector<float>*>& parts);

} // namespace troupe

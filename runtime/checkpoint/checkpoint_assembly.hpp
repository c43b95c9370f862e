// A run's checkpoint assembled from the states of its shards: each holds
// one slice of the flat vector and the same optimizer slots over it (one
// optimizer for the run), and the checkpoint holds the whole vector and
// each whole slot. The chief writes what this makes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// One shard's state, as it holds it: its slice's values and each
/// optimizer slot over the slice, in the order of the run's slot names.
struct shard_slice {
  const std::vector<float>* values = nullptr;
  const std::vector<std::vector<float>>* slots = nullptr;
};

/// The checkpoint at `step` of the model `layout` names, from `slices`
/// (slice i holds ranges[i] of the flat vector) and the slots
/// `slot_names`. errc::wrong_size when a slice or a slot does not fit its
/// range, or a shard lacks a slot.
caf::expected<checkpoint>
assemble_checkpoint(int64_t step, const param_layout& layout,
                    const std::vector<flat_range>& ranges,
                    const std::vector<shard_slice>& slices,
                    const std::vector<std::string>& slot_names);

} // namespace troupe

// The .npy reader's core, shared by load_npy (one file per array) and
// load_npz (members of one archive): arrays as bytes in memory.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/data/dataset.hpp"

namespace troupe {

/// The largest .npy file or .npz member read: the largest dataset's every
/// value as float64, plus room for the header.
constexpr uint64_t max_npy_bytes = max_dataset_values * 8 + (1 << 20);

/// A dataset from the bytes of a features array and a labels array in
/// .npy format (load_npy says which), named in errors by `*_name`.
caf::expected<dataset>
dataset_from_npy(const std::string& features, const std::string& features_name,
                 const std::string& labels, const std::string& labels_name,
                 target_kind targets = target_kind::classes);

} // namespace troupe

// The .npy reader's core, shared by load_npy (one file per array) and
// load_npz (members of one archive): arrays as bytes in a mapped file or
// in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/data/dataset.hpp"
#include "runtime/data/mapped_file.hpp"

namespace troupe {

/// The largest .npy file or .npz member read: the largest dataset's every
/// value as float64, plus room for the header.
constexpr uint64_t max_npy_bytes = max_dataset_values * 8 + (1 << 20);

/// An array's bytes in .npy format and what keeps them: a mapped file
/// (also in `mapped`, which may drop pages a full scan has read) or a
/// buffer.
struct npy_bytes {
  std::string_view bytes;
  std::shared_ptr<const void> owner;
  const mapped_file* mapped = nullptr;
};

/// A dataset from the bytes of a features array and a labels array in
/// .npy format (load_npy says which), named in errors by `*_name`. The
/// features stay in their bytes (without read_features, only their
/// header is read).
caf::expected<dataset>
dataset_from_npy(const npy_bytes& features, const std::string& features_name,
                 const npy_bytes& labels, const std::string& labels_name,
                 target_kind targets = target_kind::classes,
                 bool read_features = true);

} // namespace troupe

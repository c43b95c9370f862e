#include "runtime/checkpoint/checkpoint_assembly.hpp"

#include <utility>

namespace troupe {

caf::expected<checkpoint>
assemble_checkpoint(int64_t step, const param_layout& layout,
                    const std::vector<flat_range>& ranges,
                    const std::vector<shard_slice>& slices,
                    const std::vector<std::string>& slot_names) {
  checkpoint ckpt;
  ckpt.step = step;
  ckpt.layout = layout;
  // The values, then each optimizer slot, gathered from the slices.
  auto gather = [&](auto piece_of) -> caf::expected<std::vector<float>> {
    std::vector<const std::vector<float>*> pieces;
    for (auto& s : slices)
      pieces.push_back(piece_of(s));
    return gather_parts(ranges, pieces);
  };
  auto values = gather([](const shard_slice& s) { return s.values; });
  if (!values)
    return values.error();
  ckpt.params = std::move(*values);
  for (size_t n = 0; n < slot_names.size(); ++n) {
    auto slot = gather([n](const shard_slice& s) {
      return s.slots != nullptr && n < s.slots->size() ? &(*s.slots)[n]
                                                       : nullptr;
    });
    if (!slot)
      return slot.error();
    ckpt.slots.emplace_back(slot_names[n], std::move(*slot));
  }
  return ckpt;
}

} // namespace troupe

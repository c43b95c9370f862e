#include "runtime/params/block_reslice.hpp"

#include <algorithm>
#include <string>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// What part `k` must share with part 0; empty when it does.
std::string disagreement(const block_image& a, const block_image& b,
                         bool clocks_matter) {
  if (a.version != b.version)
    return "versions " + std::to_string(a.version) + " and "
           + std::to_string(b.version);
  if (a.workers != b.workers)
    return "workers";
  if (clocks_matter && a.clocks != b.clocks)
    return "workers' clocks";
  // Two workers' pushes may reach two shards in either order, so the
  // logs agree as sets; the first part's order is one every shard could
  // have taken (the feeder's pause makes every set whole).
  auto sorted = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (a.log_base != b.log_base || a.unnamed_through != b.unnamed_through
      || a.log.size() != b.log.size() || sorted(a.log) != sorted(b.log))
    return "applied logs";
  if (a.pushed != b.pushed || a.last_update != b.last_update
      || a.sum.empty() != b.sum.empty())
    return "the pushes of the sync update under way";
  if (a.slot_names != b.slot_names)
    return "optimizer slots";
  if (a.aggregate != b.aggregate || a.learning_rate != b.learning_rate)
    return "settings (aggregate, learning rate)";
  return {};
}

/// The floats of `parts`' field `of`, joined.
template <class Of>
std::vector<float> joined(const std::vector<block_image>& parts, Of of) {
  std::vector<float> out;
  for (auto& p : parts) {
    auto& v = of(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

} // namespace

caf::expected<std::vector<block_image>>
reslice(const std::vector<block_image>& parts, const std::vector<size_t>& sizes,
        bool clocks_matter) {
  if (parts.empty() || sizes.empty())
    return make_error(errc::invalid_argument,
                      "reslicing needs at least one part and one size");
  for (size_t k = 1; k < parts.size(); ++k)
    if (auto why = disagreement(parts[0], parts[k], clocks_matter);
        !why.empty())
      return make_error(errc::invalid_argument, "shards 0 and "
                                                  + std::to_string(k)
                                                  + " differ in their " + why);
  auto values = joined(
    parts, [](auto& p) -> auto& { return p.values; });
  size_t total = 0;
  for (auto n : sizes)
    total += n;
  if (total != values.size())
    return make_error(errc::wrong_size,
                      "reslicing " + std::to_string(values.size())
                        + " values into slices of " + std::to_string(total));
  std::vector<std::vector<float>> slots;
  for (size_t s = 0; s < parts[0].slots.size(); ++s) {
    slots.push_back(joined(
      parts, [s](auto& p) -> auto& { return p.slots[s]; }));
    if (slots.back().size() != total)
      return make_error(errc::wrong_size, "optimizer slot "
                                            + parts[0].slot_names[s]
                                            + " does not match the values");
  }
  auto sum = joined(
    parts, [](auto& p) -> auto& { return p.sum; });
  if (!sum.empty() && sum.size() != total)
    return make_error(errc::wrong_size,
                      "a sync update's sum does not match the values");
  auto cut = [](const std::vector<float>& v, size_t from, size_t n) {
    return std::vector<float>(v.begin() + static_cast<ptrdiff_t>(from),
                              v.begin() + static_cast<ptrdiff_t>(from + n));
  };
  // What every new image shares: the first part without its floats, so
  // that they are not copied once per image only to be replaced.
  block_image shared = parts[0];
  shared.values.clear();
  for (auto& slot : shared.slots)
    slot.clear();
  shared.sum.clear();
  // The kept versions start over at the new slices' (stale pushes of
  // before are updated as divide would); the moving means are cut.
  shared.compensation = {};
  auto step_mean = joined(
    parts, [](auto& p) -> auto& { return p.compensation.step_mean; });
  auto square_mean = joined(
    parts, [](auto& p) -> auto& { return p.compensation.square_mean; });
  std::vector<block_image> out;
  size_t from = 0;
  for (auto n : sizes) {
    block_image img = shared;
    img.values = cut(values, from, n);
    for (size_t s = 0; s < slots.size(); ++s)
      img.slots[s] = cut(slots[s], from, n);
    if (!sum.empty())
      img.sum = cut(sum, from, n);
    if (step_mean.size() == total)
      img.compensation.step_mean = cut(step_mean, from, n);
    if (square_mean.size() == total)
      img.compensation.square_mean = cut(square_mean, from, n);
    out.push_back(std::move(img));
    from += n;
  }
  return out;
}

} // namespace troupe

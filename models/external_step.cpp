#include "models/external_step.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

namespace {

/// The shard whose range holds all of `t`; ranges.size() when none does.
size_t holder_of(const std::vector<flat_range>& ranges, const tensor_slot& t) {
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].begin <= t.offset && t.offset + t.size <= ranges[i].end)
      return i;
  return ranges.size();
}

} // namespace

std::shared_ptr<const std::vector<float>>
pulled_params::block_holding(const tensor_slot& t) const {
  auto i = holder_of(ranges, t);
  return i < ranges.size() ? blocks[i] : nullptr;
}

const float* pulled_params::tensor(const tensor_slot& t,
                                   std::vector<float>& scratch) const {
  const size_t begin = t.offset;
  const size_t end = t.offset + t.size;
  if (auto i = holder_of(ranges, t); i < ranges.size())
    return blocks[i]->data() + (begin - ranges[i].begin);
  scratch.resize(t.size);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto from = std::max(begin, ranges[i].begin);
    auto to = std::min(end, ranges[i].end);
    if (from < to)
      std::memcpy(scratch.data() + (from - begin),
                  blocks[i]->data() + (from - ranges[i].begin),
                  (to - from) * sizeof(float));
  }
  return scratch.data();
}

} // namespace troupe

#include "models/external_step.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

const float* pulled_params::tensor(const tensor_slot& t,
                                   std::vector<float>& scratch) const {
  const size_t begin = t.offset;
  const size_t end = t.offset + t.size;
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].begin <= begin && end <= ranges[i].end)
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

#include "runtime/sparse/admission_filter.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/base/random.hpp"

namespace troupe {

admission_filter::admission_filter(uint64_t expected_keys,
                                   double false_positive, uint64_t seed)
  : seed_(mix64(seed ^ 0x61646d6974ull)) {
  const double n = static_cast<double>(std::max<uint64_t>(expected_keys, 1));
  const double p = std::clamp(false_positive, 1e-9, 0.5);
  const double ln2 = std::log(2.0);
  const double m = std::ceil(-n * std::log(p) / (ln2 * ln2));
  counts_.assign(static_cast<size_t>(std::max(m, 64.0)), 0);
  hashes_ = std::clamp(static_cast<int>(std::lround(
                         static_cast<double>(counts_.size()) / n * ln2)),
                       1, 16);
}

int admission_filter::add(uint64_t id) {
  const uint64_t a = mix64(id ^ seed_), b = mix64(a) | 1;
  int least = max_count;
  for (int i = 0; i < hashes_; ++i)
    least = std::min<int>(least, counts_[at(a, b, i)]);
  if (least == max_count)
    return least;
  // Conservative update: only the counters at the key's minimum grow, so
  // a counter shared with a more frequent key is not raised further.
  for (int i = 0; i < hashes_; ++i) {
    auto& c = counts_[at(a, b, i)];
    if (c == least)
      c = static_cast<uint8_t>(least + 1);
  }
  return least + 1;
}

int admission_filter::count(uint64_t id) const {
  const uint64_t a = mix64(id ^ seed_), b = mix64(a) | 1;
  int least = max_count;
  for (int i = 0; i < hashes_; ++i)
    least = std::min<int>(least, counts_[at(a, b, i)]);
  return least;
}

} // namespace troupe

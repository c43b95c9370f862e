#include "runtime/sparse/admission_filter.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/base/random.hpp"

namespace troupe {

size_t admission_filter::counters_for(uint64_t expected_keys,
                                      double false_positive) {
  const double n = static_cast<double>(std::max<uint64_t>(expected_keys, 1));
  const double p = std::clamp(false_positive, 1e-9, 0.5);
  const double ln2 = std::log(2.0);
  return static_cast<size_t>(
    std::max(std::ceil(-n * std::log(p) / (ln2 * ln2)), 64.0));
}

int admission_filter::hashes_for(uint64_t expected_keys,
                                 double false_positive) {
  const double n = static_cast<double>(std::max<uint64_t>(expected_keys, 1));
  const double m = static_cast<double>(
    counters_for(expected_keys, false_positive));
  return std::clamp(static_cast<int>(std::lround(m / n * std::log(2.0))), 1,
                    16);
}

admission_filter::admission_filter(uint64_t expected_keys,
                                   double false_positive, uint64_t seed)
  : counts_(counters_for(expected_keys, false_positive), 0),
    hashes_(hashes_for(expected_keys, false_positive)),
    seed_(mix64(seed ^ 0x61646d6974ull)) {}

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

bool admission_filter::add_counts(size_t first, const uint8_t* counts,
                                  size_t n) {
  if (first > counts_.size() || n > counts_.size() - first)
    return false;
  add_saturating(counts_.data() + first, counts, n);
  return true;
}

void admission_filter::add_saturating(uint8_t* into, const uint8_t* from,
                                      size_t n) {
  for (size_t i = 0; i < n; ++i)
    into[i] = static_cast<uint8_t>(std::min(into[i] + from[i], max_count));
}

bool admission_filter::set_counts(size_t first, const uint8_t* counts,
                                  size_t n) {
  if (first > counts_.size() || n > counts_.size() - first)
    return false;
  std::copy(counts, counts + n, counts_.begin() + static_cast<long>(first));
  return true;
}

int admission_filter::count(uint64_t id) const {
  const uint64_t a = mix64(id ^ seed_), b = mix64(a) | 1;
  int least = max_count;
  for (int i = 0; i < hashes_; ++i)
    least = std::min<int>(least, counts_[at(a, b, i)]);
  return least;
}

size_t admission_filter::used() const {
  return counts_.size()
         - static_cast<size_t>(std::count(counts_.begin(), counts_.end(), 0));
}

} // namespace troupe

// How often a shard has seen each key, in bounded memory: a counting Bloom
// filter with conservative update (the minimum-increase rule of Cohen and
// Matias' spectral Bloom filters; a count-min sketch in one array). A key's
// count is the smallest of its k counters, never below the true count; it
// is above it only when every one of the k counters is shared with other
// keys. DeepRec's CounterFilter keeps an exact count per key instead,
// which grows with every key ever seen: what admission is there to stop.
//
// Sized for n distinct keys at a false-positive rate p (a key never seen
// reading a count of at least 1) by the Bloom filter's formulas:
// m = -n ln p / (ln 2)^2 counters of one byte, k = (m / n) ln 2 hashes.
// n = 1M, p = 0.01 is 9.6 MB and 7 hashes. Past n keys it still answers,
// with more keys counted too high (admitted early).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe {

class admission_filter {
public:
  /// Counters saturate here: min_count is at most this.
  static constexpr int max_count = 255;

  admission_filter(uint64_t expected_keys, double false_positive,
                   uint64_t seed);

  /// The counters and hashes a filter for these settings has.
  static size_t counters_for(uint64_t expected_keys, double false_positive);
  static int hashes_for(uint64_t expected_keys, double false_positive);

  /// into[i] += from[i] for i < n, saturating at max_count: how the
  /// counts of several filters of one size add up.
  static void add_saturating(uint8_t* into, const uint8_t* from, size_t n);

  /// Counts one more sighting of `id`; its count after.
  int add(uint64_t id);
  /// Its count now.
  int count(uint64_t id) const;

  size_t counters() const { return counts_.size(); }
  /// Counters above zero (a scan): how full the filter is. Past about
  /// half of counters() its false-positive rate is above the one it was
  /// sized for (its expected_keys are too few).
  size_t used() const;
  int hashes() const { return hashes_; }
  size_t memory_bytes() const { return counts_.capacity(); }

  /// The counters, for a checkpoint or a copy.
  const uint8_t* counts() const { return counts_.data(); }
  /// Adds counters [first, first + n) of a filter of the same size, hashes
  /// and seed (saturating): the counts of the shards a restore gathers on
  /// this one add up, so no key's count falls below its true one. False,
  /// changing nothing, for counters past the end.
  bool add_counts(size_t first, const uint8_t* counts, size_t n);
  /// Sets counters [first, first + n) (a replica's copy of its primary's);
  /// false, changing nothing, past the end.
  bool set_counts(size_t first, const uint8_t* counts, size_t n);

private:
  /// The i-th counter of a key whose hashes are (a, b): double hashing
  /// (Kirsch and Mitzenmacher), as good as k independent hashes.
  size_t at(uint64_t a, uint64_t b, int i) const {
    return static_cast<size_t>((a + static_cast<uint64_t>(i) * b)
                               % counts_.size());
  }

  std::vector<uint8_t> counts_;
  int hashes_ = 1;
  uint64_t seed_;
};

} // namespace troupe

// An open-addressing hash index from 64-bit row ids to 32-bit slots: what a
// sparse table uses to find a row, and what a batch uses to deduplicate its
// ids. std::unordered_map spends ~40 bytes and an allocation per entry; at
// 50M rows that is 2 GB of pointers and 50M mallocs. This one is two flat
// arrays (12 bytes per bucket, at most 70% full) and linear probing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/base/random.hpp"

namespace troupe {

class id_index {
public:
  static constexpr uint32_t absent = UINT32_MAX;

  explicit id_index(size_t expected = 16);

  /// The slot of `id`, or `absent`.
  uint32_t find(uint64_t id) const;

  /// The slot of `id`; when absent, stores `slot_if_new` for it (which must
  /// not be `absent`) and sets `inserted`.
  uint32_t find_or_insert(uint64_t id, uint32_t slot_if_new, bool& inserted);

  /// Forgets `id` (false when absent). Backward-shift deletion: the ids
  /// after it in its probe run move up, so no tombstone is left and a
  /// table that evicts as many rows as it makes keeps short probes.
  bool erase(uint64_t id);

  /// Points present `id` at `slot` (a row moved to another slot).
  void set_slot(uint64_t id, uint32_t slot);

  size_t size() const { return size_; }
  /// Bytes held by the buckets.
  size_t memory_bytes() const {
    return keys_.capacity() * sizeof(uint64_t)
           + slots_.capacity() * sizeof(uint32_t);
  }
  /// Forgets every id, keeping the buckets (a batch's scratch index).
  void clear();

private:
  size_t bucket_of(uint64_t id) const;
  void grow();

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> slots_; ///< absent: an empty bucket
  size_t mask_ = 0;
  size_t size_ = 0;
};

/// Deduplicates ids[0..n): `unique` gets each id once, in order of first
/// appearance, and `position[i]` the index in `unique` of ids[i]. `scratch`
/// is reused between calls (cleared here).
void dedup_ids(const uint64_t* ids, size_t n, id_index& scratch,
               std::vector<uint64_t>& unique, std::vector<uint32_t>& position);

} // namespace troupe

#include "runtime/sparse/id_index.hpp"

#include <algorithm>

namespace troupe {

id_index::id_index(size_t expected) {
  size_t buckets = 16;
  while (buckets * 7 / 10 < expected)
    buckets *= 2;
  keys_.assign(buckets, 0);
  slots_.assign(buckets, absent);
  mask_ = buckets - 1;
}

size_t id_index::bucket_of(uint64_t id) const {
  return static_cast<size_t>(mix64(id)) & mask_;
}

uint32_t id_index::find(uint64_t id) const {
  for (size_t b = bucket_of(id);; b = (b + 1) & mask_) {
    if (slots_[b] == absent)
      return absent;
    if (keys_[b] == id)
      return slots_[b];
  }
}

uint32_t id_index::find_or_insert(uint64_t id, uint32_t slot_if_new,
                                  bool& inserted) {
  inserted = false;
  for (size_t b = bucket_of(id);; b = (b + 1) & mask_) {
    if (slots_[b] == absent) {
      if ((size_ + 1) * 10 > keys_.size() * 7) {
        grow();
        return find_or_insert(id, slot_if_new, inserted);
      }
      keys_[b] = id;
      slots_[b] = slot_if_new;
      ++size_;
      inserted = true;
      return slot_if_new;
    }
    if (keys_[b] == id)
      return slots_[b];
  }
}

bool id_index::erase(uint64_t id) {
  size_t hole = bucket_of(id);
  for (;; hole = (hole + 1) & mask_) {
    if (slots_[hole] == absent)
      return false;
    if (keys_[hole] == id)
      break;
  }
  slots_[hole] = absent;
  --size_;
  // Each later id of the run moves into the hole unless its home bucket
  // lies cyclically in (hole, b]: then the hole is before its home.
  for (size_t b = (hole + 1) & mask_; slots_[b] != absent;
       b = (b + 1) & mask_) {
    size_t home = bucket_of(keys_[b]);
    bool stays = hole <= b ? (hole < home && home <= b)
                           : (hole < home || home <= b);
    if (stays)
      continue;
    keys_[hole] = keys_[b];
    slots_[hole] = slots_[b];
    slots_[b] = absent;
    hole = b;
  }
  return true;
}

void id_index::set_slot(uint64_t id, uint32_t slot) {
  for (size_t b = bucket_of(id); slots_[b] != absent; b = (b + 1) & mask_)
    if (keys_[b] == id) {
      slots_[b] = slot;
      return;
    }
}

void id_index::grow() {
  std::vector<uint64_t> keys(keys_.size() * 2, 0);
  std::vector<uint32_t> slots(slots_.size() * 2, absent);
  keys.swap(keys_);
  slots.swap(slots_);
  mask_ = keys_.size() - 1;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (slots[i] == absent)
      continue;
    size_t b = bucket_of(keys[i]);
    while (slots_[b] != absent)
      b = (b + 1) & mask_;
    keys_[b] = keys[i];
    slots_[b] = slots[i];
  }
}

void id_index::clear() {
  if (size_ == 0)
    return;
  std::fill(slots_.begin(), slots_.end(), absent);
  size_ = 0;
}

void dedup_ids(const uint64_t* ids, size_t n, id_index& scratch,
               std::vector<uint64_t>& unique, std::vector<uint32_t>& position) {
  scratch.clear();
  unique.clear();
  position.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bool inserted = false;
    auto at = scratch.find_or_insert(
      ids[i], static_cast<uint32_t>(unique.size()), inserted);
    if (inserted)
      unique.push_back(ids[i]);
    position[i] = at;
  }
}

} // namespace troupe

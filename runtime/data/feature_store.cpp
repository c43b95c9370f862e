#include "runtime/data/feature_store.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

feature_store::feature_store(type t, const void* first, int64_t rows,
                             size_t sample_values,
                             std::shared_ptr<const void> owner)
  : type_(t), first_(static_cast<const unsigned char*>(first)), rows_(rows),
    sample_values_(sample_values), owner_(std::move(owner)) {}

namespace {

/// A store that keeps `values` itself, stored as `t`.
template <class T>
feature_store holding(feature_store::type t, std::vector<T> values,
                      size_t sample_values) {
  auto rows = sample_values == 0 ? 0 : values.size() / sample_values;
  auto held = std::make_shared<const std::vector<T>>(std::move(values));
  return {t, held->data(), static_cast<int64_t>(rows), sample_values, held};
}

} // namespace

feature_store feature_store::of_floats(std::vector<float> values,
                                       size_t sample_values) {
  return holding(type::f32, std::move(values), sample_values);
}

feature_store feature_store::of_bytes(std::vector<uint8_t> values,
                                      size_t sample_values) {
  return holding(type::u8, std::move(values), sample_values);
}

feature_store feature_store::concat(const std::vector<feature_store>& parts) {
  if (parts.size() == 1)
    return parts.front();
  feature_store out;
  if (parts.empty())
    return out;
  auto owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  auto segments = std::make_shared<std::vector<segment>>();
  out.type_ = parts.front().type_;
  out.sample_values_ = parts.front().sample_values_;
  for (auto& p : parts) {
    segments->push_back({out.rows_, p.first_});
    owners->push_back(p.owner_);
    out.rows_ += p.rows_;
  }
  out.first_ = parts.front().first_;
  out.owner_ = std::move(owners);
  out.segments_ = std::move(segments);
  return out;
}

feature_store feature_store::subset(std::vector<int64_t> rows) const {
  feature_store out = *this;
  if (index_) // rows of a subset: rows of the bytes beneath it
    for (auto& r : rows)
      r = (*index_)[static_cast<size_t>(r)];
  out.rows_ = empty() ? 0 : static_cast<int64_t>(rows.size());
  out.index_ = std::make_shared<const std::vector<int64_t>>(std::move(rows));
  return out;
}

uint64_t feature_store::stored_bytes() const {
  return static_cast<uint64_t>(rows_) * sample_values_ * value_size();
}

const unsigned char* feature_store::at(int64_t i) const {
  auto row = index_ ? (*index_)[static_cast<size_t>(i)] : i;
  const unsigned char* base = first_;
  if (segments_) {
    // The last part that starts at or before the row.
    auto& s = *segments_;
    auto it = std::upper_bound(s.begin(), s.end(), row,
                               [](int64_t r, const segment& seg) {
                                 return r < seg.start;
                               });
    --it;
    base = it->first;
    row -= it->start;
  }
  return base + static_cast<size_t>(row) * sample_values_ * value_size();
}

void feature_store::read(int64_t i, float* out) const {
  const unsigned char* p = at(i);
  const size_t n = sample_values_;
  switch (type_) {
    case type::f32:
      // The bytes of a mapped file need not be aligned for a float.
      std::memcpy(out, p, n * sizeof(float));
      break;
    case type::f64:
      for (size_t j = 0; j < n; ++j) {
        double v;
        std::memcpy(&v, p + j * sizeof v, sizeof v);
        out[j] = static_cast<float>(v);
      }
      break;
    case type::u8:
      // Multiplied, as the IDX and CIFAR-10 readers always scaled: the
      // compiler vectorises it.
      for (size_t j = 0; j < n; ++j)
        out[j] = static_cast<float>(p[j]) * (1.f / 255.f);
      break;
  }
}

void feature_store::read_range(int64_t first, int64_t n, float* out) const {
  for (int64_t i = 0; i < n; ++i)
    read(first + i, out + static_cast<size_t>(i) * sample_values_);
}

std::vector<float> feature_store::to_floats() const {
  std::vector<float> out(static_cast<size_t>(rows_) * sample_values_);
  read_range(0, rows_, out.data());
  return out;
}

const float* feature_store::contiguous_floats() const {
  if (type_ != type::f32 || index_ || segments_)
    return nullptr;
  // Aligned as a float only when a reader filled it (a vector's data).
  if (reinterpret_cast<uintptr_t>(first_) % alignof(float) != 0)
    return nullptr;
  return reinterpret_cast<const float*>(first_);
}

} // namespace troupe

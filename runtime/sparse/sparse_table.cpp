#include "runtime/sparse/sparse_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/base/errc.hpp"
#include "runtime/base/flush_denormals.hpp"
#include "runtime/base/random.hpp"

namespace troupe {

const char* to_string(sparse_optimizer_config::kind k) {
  switch (k) {
    case sparse_optimizer_config::kind::sgd: return "sgd";
    case sparse_optimizer_config::kind::adagrad: return "adagrad";
    case sparse_optimizer_config::kind::adam: return "adam";
  }
  return "?";
}

sparse_table::sparse_table(embedding_table_config table,
                           sparse_optimizer_config opt)
  : table_(std::move(table)), opt_(opt), state_(slot_count()) {
  if (table_.create == embedding_table_config::rows::fixed)
    for (uint64_t id = 0; id < table_.vocabulary; ++id)
      make_row(static_cast<size_t>(id), id);
}

size_t sparse_table::slot_count() const {
  switch (opt_.type) {
    case sparse_optimizer_config::kind::sgd: return 0;
    case sparse_optimizer_config::kind::adagrad: return 1;
    case sparse_optimizer_config::kind::adam: return 2;
  }
  return 0;
}

std::vector<std::string> sparse_table::slot_names() const {
  switch (opt_.type) {
    case sparse_optimizer_config::kind::adagrad: return {"accumulator"};
    case sparse_optimizer_config::kind::adam: return {"m", "v"};
    default: return {};
  }
}

size_t sparse_table::memory_bytes() const {
  size_t chunk = rows_per_chunk * static_cast<size_t>(table_.dim)
                 * sizeof(float);
  size_t bytes = values_.size() * chunk;
  for (auto& s : state_)
    bytes += s.size() * chunk;
  return bytes + index_.memory_bytes() + ids_.capacity() * sizeof(uint64_t);
}

caf::error sparse_table::check(const uint64_t* ids, size_t n) const {
  for (size_t i = 0; i < n; ++i)
    if (ids[i] >= table_.vocabulary)
      return make_error(errc::invalid_argument,
                        "table " + table_.name + ": id "
                          + std::to_string(ids[i])
                          + " is not below its vocabulary ("
                          + std::to_string(table_.vocabulary) + ")");
  return caf::none;
}

void sparse_table::make_row(size_t slot, uint64_t id) {
  const auto dim = static_cast<size_t>(table_.dim);
  if (slot / rows_per_chunk >= values_.size()) {
    // New chunks start as zeros: Adam's m and v, the row values until
    // drawn below; Adagrad's accumulator is set per row.
    auto fresh = [&] {
      return std::unique_ptr<float[]>(new float[rows_per_chunk * dim]());
    };
    values_.push_back(fresh());
    for (auto& s : state_)
      s.push_back(fresh());
  }
  initial_row(id, at(values_, slot));
  if (opt_.type == sparse_optimizer_config::kind::adagrad) {
    float* acc = at(state_[0], slot);
    for (size_t j = 0; j < dim; ++j)
      acc[j] = static_cast<float>(opt_.initial_accumulator);
  }
  rows_ = std::max(rows_, slot + 1);
}

void sparse_table::initial_row(uint64_t id, float* out) const {
  // The values depend on (seed, id) only.
  splitmix64 rng{mix64(table_.seed * 0x9e3779b97f4a7c15ull ^ mix64(id))};
  const double scale = table_.init_scale;
  for (int j = 0; j < table_.dim; ++j)
    out[j] = static_cast<float>((rng.uniform01() * 2 - 1) * scale);
}

caf::error sparse_table::peek(const uint64_t* ids, size_t n, float* out) const {
  if (auto err = check(ids, n))
    return err;
  const auto dim = static_cast<size_t>(table_.dim);
  for (size_t i = 0; i < n; ++i) {
    if (const float* r = row(ids[i]))
      std::memcpy(out + i * dim, r, dim * sizeof(float));
    else
      initial_row(ids[i], out + i * dim);
  }
  return caf::none;
}

void sparse_table::copy_rows(size_t first, size_t n, uint64_t* ids,
                             float* values, float* const* slots) const {
  const auto dim = static_cast<size_t>(table_.dim);
  const auto bytes = dim * sizeof(float);
  for (size_t k = 0; k < n && first + k < rows_; ++k) {
    auto s = first + k;
    ids[k] = ids_of_slot(s);
    std::memcpy(values + k * dim, at(values_, s), bytes);
    for (size_t j = 0; j < state_.size(); ++j)
      std::memcpy(slots[j] + k * dim, at(state_[j], s), bytes);
  }
}

size_t sparse_table::slot_of(uint64_t id) {
  if (table_.create == embedding_table_config::rows::fixed)
    return static_cast<size_t>(id);
  bool inserted = false;
  auto slot = index_.find_or_insert(id, static_cast<uint32_t>(rows_), inserted);
  if (inserted) {
    ids_.push_back(id);
    make_row(slot, id);
  }
  return slot;
}

const float* sparse_table::row(uint64_t id) const {
  if (id >= table_.vocabulary)
    return nullptr;
  if (table_.create == embedding_table_config::rows::fixed)
    return at(values_, static_cast<size_t>(id));
  auto slot = index_.find(id);
  return slot == id_index::absent ? nullptr : at(values_, slot);
}

caf::error sparse_table::pull(const uint64_t* ids, size_t n, float* out) {
  if (auto err = check(ids, n))
    return err;
  const auto bytes = static_cast<size_t>(table_.dim) * sizeof(float);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(out + i * static_cast<size_t>(table_.dim),
                at(values_, slot_of(ids[i])), bytes);
  rows_pulled_ += static_cast<int64_t>(n);
  return caf::none;
}

void sparse_table::apply(size_t slot, const float* g, float alpha_adam) {
  const auto dim = static_cast<size_t>(table_.dim);
  float* w = at(values_, slot);
  const auto lr = static_cast<float>(opt_.learning_rate);
  switch (opt_.type) {
    case sparse_optimizer_config::kind::sgd:
      for (size_t j = 0; j < dim; ++j)
        w[j] -= lr * g[j];
      break;
    case sparse_optimizer_config::kind::adagrad: {
      // tf.train.AdagradOptimizer's sparse apply.
      float* acc = at(state_[0], slot);
      for (size_t j = 0; j < dim; ++j) {
        acc[j] += g[j] * g[j];
        w[j] -= lr * g[j] / std::sqrt(acc[j]);
      }
      break;
    }
    case sparse_optimizer_config::kind::adam: {
      // LazyAdam: tf.train.AdamOptimizer's update on the pushed rows only.
      float* m = at(state_[0], slot);
      float* v = at(state_[1], slot);
      const auto b1 = static_cast<float>(opt_.beta1);
      const auto b2 = static_cast<float>(opt_.beta2);
      const auto eps = static_cast<float>(opt_.epsilon);
      for (size_t j = 0; j < dim; ++j) {
        m[j] = b1 * m[j] + (1.f - b1) * g[j];
        v[j] = b2 * v[j] + (1.f - b2) * g[j] * g[j];
        w[j] -= alpha_adam * m[j] / (std::sqrt(v[j]) + eps);
      }
      break;
    }
  }
}

caf::error sparse_table::push(const uint64_t* ids, size_t n,
                              const float* grads) {
  if (auto err = check(ids, n))
    return err;
  const auto dim = static_cast<size_t>(table_.dim);
  dedup_ids(ids, n, scratch_, unique_, position_);
  const float* g = grads;
  if (unique_.size() < n) { // duplicates: sum their gradients first
    summed_.assign(unique_.size() * dim, 0.f);
    for (size_t i = 0; i < n; ++i) {
      float* to = summed_.data() + position_[i] * dim;
      const float* from = grads + i * dim;
      for (size_t j = 0; j < dim; ++j)
        to[j] += from[j];
    }
    g = summed_.data();
  }
  const double t = static_cast<double>(pushes_ + 1);
  const auto alpha = static_cast<float>(
    opt_.learning_rate * std::sqrt(1.0 - std::pow(opt_.beta2, t))
    / (1.0 - std::pow(opt_.beta1, t)));
  scoped_flush_denormals flush{true};
  for (size_t u = 0; u < unique_.size(); ++u)
    apply(slot_of(unique_[u]), g + u * dim, alpha);
  rows_pushed_ += static_cast<int64_t>(n);
  ++pushes_;
  return caf::none;
}

caf::error sparse_table::restore_row(uint64_t id, const float* values,
                                     const float* const* slots) {
  if (auto err = check(&id, 1))
    return err;
  const auto bytes = static_cast<size_t>(table_.dim) * sizeof(float);
  auto slot = slot_of(id);
  std::memcpy(at(values_, slot), values, bytes);
  for (size_t k = 0; k < state_.size(); ++k)
    std::memcpy(at(state_[k], slot), slots[k], bytes);
  return caf::none;
}

} // namespace troupe

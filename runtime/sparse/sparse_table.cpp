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
  if (table_.create == embedding_table_config::rows::fixed) {
    // Every row is there from the start: nothing to admit or evict (the
    // run config refuses either with fixed rows).
    table_.admit = {};
    table_.evict = {};
    for (uint64_t id = 0; id < table_.vocabulary; ++id)
      make_row(static_cast<size_t>(id), id);
    rows_made_ = 0;
  }
  if (table_.admit.type == row_admission::kind::min_count)
    filter_ = std::make_unique<admission_filter>(
      table_.admit.expected_keys, table_.admit.false_positive, table_.seed);
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
  return bytes + index_.memory_bytes() + ids_.capacity() * sizeof(uint64_t)
         + touched_.capacity() * sizeof(int64_t)
         + uses_.capacity() * sizeof(uint32_t)
         + (filter_ ? filter_->memory_bytes() : 0);
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
  // A slot an evicted row left holds that row's state: set it all.
  const float start = opt_.type == sparse_optimizer_config::kind::adagrad
                        ? static_cast<float>(opt_.initial_accumulator)
                        : 0.f;
  for (auto& s : state_)
    std::fill_n(at(s, slot), dim, start);
  rows_ = std::max(rows_, slot + 1);
  ++rows_made_;
  if (keeps_ages()) {
    touched_.resize(rows_, 0);
    uses_.resize(rows_, 0);
    touched_[slot] = pushes_;
    uses_[slot] = 0;
  }
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
    else if (admitting())
      std::fill_n(out + i * dim, dim, 0.f);
    else
      initial_row(ids[i], out + i * dim);
  }
  return caf::none;
}

void sparse_table::copy_rows(size_t first, size_t n, uint64_t* ids,
                             float* values, float* const* slots, int64_t* ages,
                             uint32_t* uses) const {
  const auto dim = static_cast<size_t>(table_.dim);
  const auto bytes = dim * sizeof(float);
  for (size_t k = 0; k < n && first + k < rows_; ++k) {
    auto s = first + k;
    ids[k] = ids_of_slot(s);
    std::memcpy(values + k * dim, at(values_, s), bytes);
    for (size_t j = 0; j < state_.size(); ++j)
      std::memcpy(slots[j] + k * dim, at(state_[j], s), bytes);
    if (ages != nullptr && uses != nullptr) {
      ages[k] = touched_.empty() ? 0
                                 : std::max<int64_t>(0, pushes_ - touched_[s]);
      uses[k] = uses_.empty() ? 0 : uses_[s];
    }
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
  const auto dim = static_cast<size_t>(table_.dim);
  for (size_t i = 0; i < n; ++i) {
    float* to = out + i * dim;
    if (!bounded()) {
      std::memcpy(to, at(values_, slot_of(ids[i])), dim * sizeof(float));
    } else if (auto slot = index_.find(ids[i]); slot != id_index::absent) {
      std::memcpy(to, at(values_, slot), dim * sizeof(float));
    } else if (admitting()) {
      std::fill_n(to, dim, 0.f); // the default row of a key not admitted
    } else {
      initial_row(ids[i], to); // made by its first push
    }
  }
  rows_pulled_ += static_cast<int64_t>(n);
  return caf::none;
}

bool sparse_table::admits(uint64_t id) {
  switch (table_.admit.type) {
    case row_admission::kind::all: return true;
    case row_admission::kind::min_count:
      return filter_->add(id) >= table_.admit.min_count;
    case row_admission::kind::probability: {
      // A draw per push, from what every replica of the shard shares.
      splitmix64 rng{
        mix64(table_.seed ^ 0x70726f62ull)
        ^ mix64(id + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(pushes_))};
      return rng.uniform01() < table_.admit.probability;
    }
  }
  return true;
}

void sparse_table::touch(size_t slot) {
  if (touched_.empty())
    return;
  touched_[slot] = pushes_;
  if (uses_[slot] < UINT32_MAX)
    ++uses_[slot];
}

void sparse_table::set_pushes(int64_t pushes) {
  pushes_ = pushes;
  if (table_.evict.steps_to_live > 0)
    next_sweep_ = pushes_
                  + std::max<int64_t>(1, table_.evict.steps_to_live / 4);
}

void sparse_table::evict_due() {
  const auto& ev = table_.evict;
  std::vector<size_t> victims;
  if (ev.steps_to_live > 0 && pushes_ >= next_sweep_) {
    // A sweep every quarter of the time to live: a row lives at most
    // 1.25 times it, for a scan of the table every ttl / 4 pushes.
    next_sweep_ = pushes_ + std::max<int64_t>(1, ev.steps_to_live / 4);
    for (size_t s = rows_; s-- > 0;)
      if (pushes_ - touched_[s] > ev.steps_to_live)
        victims.push_back(s);
    remove_slots(victims);
  }
  if (ev.max_rows > 0 && rows_ > ev.max_rows) {
    // Down to 95% at once, so that a table at its capacity sorts its rows
    // once per 5% of it made, not on every push.
    const size_t keep = static_cast<size_t>(ev.max_rows - ev.max_rows / 20);
    std::vector<size_t> order(rows_);
    for (size_t s = 0; s < rows_; ++s)
      order[s] = s;
    auto older = [&](size_t a, size_t b) {
      if (ev.victims == row_eviction::policy::lfu && uses_[a] != uses_[b])
        return uses_[a] < uses_[b];
      return touched_[a] != touched_[b] ? touched_[a] < touched_[b] : a < b;
    };
    const auto drop = rows_ - keep;
    std::nth_element(order.begin(), order.begin() + static_cast<long>(drop),
                     order.end(), older);
    victims.assign(order.begin(), order.begin() + static_cast<long>(drop));
    std::sort(victims.begin(), victims.end(), std::greater<>{});
    remove_slots(victims);
  }
}

void sparse_table::evict_ids(const uint64_t* ids, size_t n) {
  if (table_.create == embedding_table_config::rows::fixed)
    return;
  std::vector<size_t> slots;
  for (size_t i = 0; i < n; ++i)
    if (auto slot = index_.find(ids[i]); slot != id_index::absent)
      slots.push_back(slot);
  std::sort(slots.begin(), slots.end(), std::greater<>{});
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  remove_slots(slots);
}

void sparse_table::remove_slots(const std::vector<size_t>& slots) {
  const auto bytes = static_cast<size_t>(table_.dim) * sizeof(float);
  for (size_t s : slots) {
    const size_t last = rows_ - 1;
    evicted_.push_back(ids_[s]);
    if (table_.changes)
      gone_.emplace_back(pushes_, ids_[s]);
    index_.erase(ids_[s]);
    if (s != last) {
      std::memcpy(at(values_, s), at(values_, last), bytes);
      for (auto& st : state_)
        std::memcpy(at(st, s), at(st, last), bytes);
      ids_[s] = ids_[last];
      if (!touched_.empty()) {
        touched_[s] = touched_[last];
        uses_[s] = uses_[last];
      }
      index_.set_slot(ids_[s], static_cast<uint32_t>(s));
    }
    ids_.pop_back();
    if (!touched_.empty()) {
      touched_.pop_back();
      uses_.pop_back();
    }
    --rows_;
  }
  rows_evicted_ += static_cast<int64_t>(slots.size());
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
  ++pushes_;
  for (size_t u = 0; u < unique_.size(); ++u) {
    size_t slot;
    if (!admitting()) {
      slot = slot_of(unique_[u]);
    } else if (auto found = index_.find(unique_[u]);
               found != id_index::absent) {
      slot = found;
    } else if (admits(unique_[u])) {
      slot = slot_of(unique_[u]);
    } else {
      ++rows_rejected_;
      continue;
    }
    apply(slot, g + u * dim, alpha);
    touch(slot);
  }
  rows_pushed_ += static_cast<int64_t>(n);
  if (table_.evict.any() && evicting_)
    evict_due();
  return caf::none;
}

std::vector<uint32_t> sparse_table::changed_slots(int64_t since) const {
  std::vector<uint32_t> out;
  for (size_t s = 0; s < rows_; ++s)
    if (since < 0 || (!touched_.empty() && touched_[s] > since))
      out.push_back(static_cast<uint32_t>(s));
  return out;
}

void sparse_table::copy_slots(const uint32_t* slots, size_t n, uint64_t* ids,
                              float* values) const {
  const auto dim = static_cast<size_t>(table_.dim);
  for (size_t k = 0; k < n; ++k) {
    ids[k] = ids_of_slot(slots[k]);
    std::memcpy(values + k * dim, at(values_, slots[k]), dim * sizeof(float));
  }
}

std::vector<uint64_t> sparse_table::evicted_since(int64_t since) const {
  std::vector<uint64_t> out;
  // The log is in push order: the evictions after `since` are its tail.
  auto from = std::partition_point(gone_.begin(), gone_.end(),
                                   [&](const std::pair<int64_t, uint64_t>& g) {
                                     return g.first <= since;
                                   });
  for (auto it = from; it != gone_.end(); ++it)
    if (index_.find(it->second) == id_index::absent)
      out.push_back(it->second);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void sparse_table::forget_evicted(int64_t upto) {
  auto end = std::partition_point(gone_.begin(), gone_.end(),
                                  [&](const std::pair<int64_t, uint64_t>& g) {
                                    return g.first <= upto;
                                  });
  gone_.erase(gone_.begin(), end);
}

caf::error sparse_table::restore_row(uint64_t id, const float* values,
                                     const float* const* slots, int64_t age,
                                     uint32_t uses) {
  if (auto err = check(&id, 1))
    return err;
  const auto bytes = static_cast<size_t>(table_.dim) * sizeof(float);
  const auto made = rows_made_; // a row put back is not a row made here
  auto slot = slot_of(id);
  rows_made_ = made;
  std::memcpy(at(values_, slot), values, bytes);
  for (size_t k = 0; k < state_.size(); ++k)
    std::memcpy(at(state_[k], slot), slots[k], bytes);
  if (!touched_.empty()) {
    touched_[slot] = age < 0 ? pushes_ : pushes_ - age;
    uses_[slot] = uses;
  }
  return caf::none;
}

} // namespace troupe

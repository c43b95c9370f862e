#include "actors/worker/table_batch.hpp"

#include <cstring>
#include <string>

#include "runtime/base/errc.hpp"
#include "runtime/sparse/sparse_table.hpp"

namespace troupe {

table_batch::table_batch(std::vector<table_setup> tables, int32_t shards)
  : tables_(std::move(tables)), shards_(shards) {}

std::vector<table_rows> table_batch::start() const {
  std::vector<table_rows> out(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    out[t].table = static_cast<int32_t>(t);
    out[t].name = tables_[t].table.name;
    out[t].dim = tables_[t].table.dim;
  }
  return out;
}

caf::expected<std::vector<row_request>>
table_batch::plan(step_tables& step, const std::vector<uint32_t>& batch,
                  int32_t worker) {
  const size_t samples = batch.size();
  auto& rows = step.rows;
  step.asked.clear();
  std::vector<row_request> out;
  if (rows.size() != tables_.size())
    return make_error(errc::bad_step, "keys for " + std::to_string(rows.size())
                                        + " tables, the model has "
                                        + std::to_string(tables_.size()));
  for (size_t t = 0; t < tables_.size(); ++t) {
    auto& r = rows[t];
    const auto& cfg = tables_[t].table;
    if (r.keys.size() != samples * r.width)
      return make_error(errc::bad_step,
                        "table " + cfg.name + ": "
                          + std::to_string(r.keys.size()) + " keys for "
                          + std::to_string(samples) + " samples of "
                          + std::to_string(r.width) + " each");
    r.unique.clear();
    r.inverse.assign(r.keys.size(), -1);
    scratch_.clear();
    for (size_t i = 0; i < r.keys.size(); ++i) {
      auto key = r.keys[i];
      if (key == -1)
        continue;
      if (key < 0 || static_cast<uint64_t>(key) >= cfg.vocabulary)
        return make_error(errc::bad_step,
                          "table " + cfg.name + ": key " + std::to_string(key)
                            + " of sample " + std::to_string(batch[i / r.width])
                            + " is outside the table's vocabulary [0, "
                            + std::to_string(cfg.vocabulary)
                            + ") (-1 marks no key)");
      bool inserted = false;
      auto slot = scratch_.find_or_insert(
        static_cast<uint64_t>(key), static_cast<uint32_t>(r.unique.size()),
        inserted);
      if (inserted)
        r.unique.push_back(key);
      r.inverse[i] = slot;
    }
    // Filled by take(); allocated here, so that a batch without a key
    // (every bag empty), which asks no shard, still has its (empty) rows.
    r.values = std::make_shared<std::vector<float>>(
      r.unique.size() * static_cast<size_t>(r.dim));
    // Each shard's rows, in the order of `unique`.
    std::vector<table_ask> per(static_cast<size_t>(shards_));
    std::vector<std::vector<uint64_t>> ids(static_cast<size_t>(shards_));
    for (size_t u = 0; u < r.unique.size(); ++u) {
      auto id = static_cast<uint64_t>(r.unique[u]);
      auto s = static_cast<size_t>(shard_of_row(id, shards_));
      ids[s].push_back(id);
      per[s].positions.push_back(static_cast<uint32_t>(u));
    }
    for (int32_t s = 0; s < shards_; ++s) {
      auto& a = per[static_cast<size_t>(s)];
      if (a.positions.empty())
        continue;
      a.shard = s;
      a.table = static_cast<int32_t>(t);
      out.push_back(row_request{s, a.table, worker,
                                std::move(ids[static_cast<size_t>(s)])});
      step.asked.push_back(std::move(a));
    }
  }
  return out;
}

caf::error table_batch::take(const std::vector<row_block>& blocks,
                             step_tables& step) {
  auto& rows = step.rows;
  if (blocks.size() != step.asked.size())
    return make_error(errc::wrong_size,
                      std::to_string(blocks.size()) + " answers to "
                        + std::to_string(step.asked.size()) + " row requests");
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto& a = step.asked[i];
    auto& r = rows[static_cast<size_t>(a.table)];
    const auto dim = static_cast<size_t>(r.dim);
    auto& b = blocks[i];
    if (!b.values || b.values->size() != a.positions.size() * dim)
      return make_error(errc::wrong_size, "rows of table " + r.name
                                            + " from shard "
                                            + std::to_string(a.shard)
                                            + " are not the rows asked for");
    const float* from = b.values->data();
    float* to = r.values->data();
    for (size_t k = 0; k < a.positions.size(); ++k)
      std::memcpy(to + a.positions[k] * dim, from + k * dim,
                  dim * sizeof(float));
  }
  return {};
}

std::vector<row_push>
table_batch::pushes(const step_tables& step, int32_t worker, int64_t batch,
                    const std::vector<int64_t>& versions) {
  std::vector<row_push> out;
  out.reserve(step.asked.size());
  for (auto& a : step.asked) {
    auto& r = step.rows[static_cast<size_t>(a.table)];
    const auto dim = static_cast<size_t>(r.dim);
    std::vector<uint64_t> ids(a.positions.size());
    auto grads = std::make_shared<std::vector<float>>(a.positions.size() * dim);
    for (size_t k = 0; k < a.positions.size(); ++k) {
      ids[k] = static_cast<uint64_t>(r.unique[a.positions[k]]);
      std::memcpy(grads->data() + k * dim,
                  r.grads.data() + a.positions[k] * dim, dim * sizeof(float));
    }
    out.push_back(row_push{a.shard, a.table, worker, batch,
                           versions[static_cast<size_t>(a.shard)],
                           std::move(ids), std::move(grads)});
  }
  return out;
}

} // namespace troupe

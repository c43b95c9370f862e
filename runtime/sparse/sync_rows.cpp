#include "runtime/sparse/sync_rows.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <tuple>

#include "runtime/base/errc.hpp"

namespace troupe {

caf::expected<bool> sync_rows::hold(const param_block& block,
                                    const sparse_table& table, held_row_push p,
                                    int32_t shard) {
  if (auto err = table.check(p.ids.data(), p.ids.size()))
    return err;
  if (!block.knows(p.worker))
    return make_error(errc::invalid_argument,
                      "a row push from worker " + std::to_string(p.worker)
                        + ", which shard " + std::to_string(shard)
                        + " does not know");
  if (p.tag > block.version())
    return make_error(errc::invalid_argument,
                      "a sync row push for version " + std::to_string(p.tag)
                        + " on shard " + std::to_string(shard)
                        + ", which is at version "
                        + std::to_string(block.version()));
  if (p.tag < block.version() || block.in_update(p.worker))
    return true;
  put(std::move(p));
  return false;
}

void sync_rows::drop(int32_t worker) {
  held_.erase(held_.lower_bound({worker, INT32_MIN}),
              held_.upper_bound({worker, INT32_MAX}));
}

void sync_rows::settle(const param_block& block, tables& t, int32_t worker,
                       const caf::expected<param_block::outcome>& r,
                       int64_t before) {
  bool joined = r
                && (*r == param_block::outcome::aggregated
                    || *r == param_block::outcome::applied);
  if (!joined)
    drop(worker);
  after(block, t, before);
}

void sync_rows::after(const param_block& block, tables& t, int64_t before) {
  if (!applies(block, t) || block.version() == before)
    return;
  // The update just applied was version `before`: its rows are those held
  // for it by the workers whose pushes made it.
  auto& workers = block.last_update();
  std::vector<held_row_push> rows;
  for (auto w : workers) {
    auto held = held_.lower_bound({w, INT32_MIN});
    while (held != held_.end() && held->first.first == w) {
      if (held->second.tag == before) {
        rows.push_back(std::move(held->second));
        held = held_.erase(held);
      } else {
        ++held;
      }
    }
  }
  const auto pushes = static_cast<float>(std::max<size_t>(workers.size(), 1));
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<uint64_t> ids;
    std::vector<float> grads;
    for (auto& p : rows)
      if (static_cast<size_t>(p.table) == i && p.grads) {
        ids.insert(ids.end(), p.ids.begin(), p.ids.end());
        grads.insert(grads.end(), p.grads->begin(), p.grads->end());
      }
    if (ids.empty())
      continue;
    for (auto& g : grads)
      g /= pushes;
    // Every push was checked when it was held: nothing here is refused.
    std::ignore = t[i]->push(ids.data(), ids.size(), grads.data());
  }
}

} // namespace troupe

#include "actors/chief/shard_placement.hpp"

namespace troupe {

namespace {

std::optional<size_t> index_in(const std::map<caf::actor_addr, size_t>& index,
                               const caf::actor_addr& addr) {
  auto it = index.find(addr);
  if (it == index.end())
    return std::nullopt;
  return it->second;
}

} // namespace

void shard_placement::plan(std::vector<std::string> nodes) {
  handles_.assign(nodes.size(), shard_actor{});
  nodes_ = std::move(nodes);
}

void shard_placement::started(size_t i, shard_actor handle,
                              const std::string& node) {
  index_of_[handle.address()] = i;
  handles_[i] = std::move(handle);
  nodes_[i] = node;
}

void shard_placement::lost(size_t i) {
  index_of_.erase(handles_[i].address());
  handles_[i] = shard_actor{};
}

std::optional<size_t>
shard_placement::shard_of(const caf::actor_addr& addr) const {
  return index_in(index_of_, addr);
}

std::vector<uint64_t> shard_placement::bounds() const {
  std::vector<uint64_t> b;
  for (auto& r : ranges)
    b.push_back(r.begin);
  b.push_back(ranges.empty() ? 0 : ranges.back().end);
  return b;
}

std::map<std::string, int> shard_placement::live_per_node() const {
  std::map<std::string, int> load;
  for (size_t k = 0; k < handles_.size(); ++k)
    if (handles_[k])
      ++load[nodes_[k]];
  return load;
}

void shard_placement::replica_started(size_t i, shard_actor handle) {
  replica_index_of_[handle.address()] = i;
  replicas_[i].handle = std::move(handle);
  replicas_[i].in_step = false;
  replicas_[i].primary_answered = false;
}

void shard_placement::replica_gone(size_t i) {
  auto& r = replicas_[i];
  replica_index_of_.erase(r.handle.address());
  r.handle = shard_actor{};
  r.in_step = false;
}

void shard_placement::replica_took_over(size_t i, const shard_actor& handle) {
  auto& r = replicas_[i];
  replica_index_of_.erase(handle.address());
  if (r.handle == handle)
    r.handle = shard_actor{};
  r.in_step = false;
}

std::vector<shard_actor> shard_placement::drop_replicas() {
  std::vector<shard_actor> out;
  for (auto& r : replicas_)
    if (r.handle)
      out.push_back(r.handle);
  replicas_.clear();
  replica_index_of_.clear();
  homeless_.clear();
  return out;
}

std::optional<size_t>
shard_placement::replica_of(const caf::actor_addr& addr) const {
  return index_in(replica_index_of_, addr);
}

} // namespace troupe

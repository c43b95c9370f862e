#include "actors/chief/chief_members.hpp"

#include <algorithm>
#include <vector>

#include "runtime/rules/placement.hpp"

namespace troupe {

const char* to_string(worker_phase p) {
  switch (p) {
    case worker_phase::starting: return "starting";
    case worker_phase::running: return "running";
    case worker_phase::waiting: return "waiting";
    case worker_phase::leaving: return "leaving";
    case worker_phase::finished: return "finished";
  }
  return "?";
}

node_entry* chief_members::find_node(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool chief_members::is_up(const std::string& name) const {
  auto it = nodes_.find(name);
  return it != nodes_.end() && it->second.up;
}

void chief_members::heard_from(const std::string& name, double now) {
  if (auto it = nodes_.find(name); it != nodes_.end())
    it->second.heard_at = now;
}

node_entry& chief_members::register_agent(const std::string& name,
                                          node_agent_actor agent) {
  auto& e = nodes_[name];
  agent_of_[agent.address()] = name;
  e.agent = std::move(agent);
  e.up = true;
  return e;
}

std::optional<std::string>
chief_members::forget_agent(const caf::actor_addr& addr) {
  auto it = agent_of_.find(addr);
  if (it == agent_of_.end())
    return std::nullopt;
  auto name = std::move(it->second);
  agent_of_.erase(it);
  return name;
}

bool chief_members::mark_down(const std::string& name) {
  auto* n = find_node(name);
  if (n == nullptr || !n->up)
    return false;
  n->up = false;
  n->agent = node_agent_actor{};
  return true;
}

worker_entry* chief_members::find_worker(int32_t id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

int32_t chief_members::add_worker(const std::string& node) {
  auto id = next_worker_++;
  auto& w = workers_[id];
  w.node = node;
  w.home = node;
  return id;
}

void chief_members::worker_started(int32_t id, worker_actor handle) {
  auto& w = workers_.at(id);
  worker_of_[handle.address()] = id;
  w.handle = std::move(handle);
  w.state = worker_phase::running;
}

std::optional<int32_t>
chief_members::forget_worker(const caf::actor_addr& addr) {
  auto it = worker_of_.find(addr);
  if (it == worker_of_.end())
    return std::nullopt;
  auto id = it->second;
  worker_of_.erase(it);
  return id;
}

int chief_members::live_workers() const {
  // Counted, not listed: the stream's part planning asks on every report.
  return static_cast<int>(
    std::count_if(workers_.begin(), workers_.end(), [](auto& entry) {
      return entry.second.state != worker_phase::finished;
    }));
}

std::vector<int32_t> chief_members::live_ids() const {
  std::vector<int32_t> ids;
  for (auto& [id, w] : workers_)
    if (w.state != worker_phase::finished)
      ids.push_back(id);
  return ids;
}

std::map<std::string, int> chief_members::workers_per_node() const {
  std::map<std::string, int> load;
  for (auto& [id, w] : workers_)
    if (w.state != worker_phase::finished)
      ++load[w.node];
  return load;
}

std::string chief_members::least_loaded_node() const {
  auto load = workers_per_node();
  std::vector<node_slot> slots;
  for (auto& [name, n] : nodes_)
    slots.push_back(
      {name, n.up, n.planned_workers > 0 || n.joined, load[name]});
  return least_loaded(slots, fallback::any_node);
}

} // namespace troupe

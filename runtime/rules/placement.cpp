#include "runtime/rules/placement.hpp"

namespace troupe {

std::string least_loaded(const std::vector<node_slot>& nodes, fallback rule) {
  const node_slot* best = nullptr;
  // Meant nodes rank before all others, whatever their load.
  auto rank = [](const node_slot& n) {
    return (n.meant ? 0L : 1L << 40) + n.load;
  };
  for (auto& n : nodes) {
    if (!n.up || (!n.meant && rule == fallback::meant_only))
      continue;
    if (best == nullptr || rank(n) < rank(*best))
      best = &n;
  }
  return best ? best->name : std::string{};
}

} // namespace troupe

#include "apps/shell/shell_summary.hpp"

#include <map>

namespace troupe {

namespace {

using json = nlohmann::json;

std::string text_of(const json& row, const char* key, const char* absent) {
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>()
                                                   : std::string{absent};
}

/// Running workers and shards, and nodes that are up, are the many that
/// need no look; the chief and the feeder are one each and always shown.
bool usual(const json& row) {
  auto state = text_of(row, "state", "unknown");
  auto role = text_of(row, "role", "");
  return state == "running" || state == "up" || role == "chief"
         || role == "feeder";
}

} // namespace

summarised_rows summarise_rows(const json& rows, const std::string& command,
                               size_t most) {
  if (!rows.is_array() || rows.size() <= most)
    return {rows, {}};
  // Counts by role (nodes have none) and state, in name order.
  std::map<std::string, std::map<std::string, size_t>> counts;
  for (auto& r : rows)
    ++counts[text_of(r, "role", "")][text_of(r, "state", "unknown")];
  summarised_rows out{json::array(), {}};
  size_t unusual = 0;
  for (auto& r : rows)
    if (!usual(r) && out.rows.size() < most) {
      out.rows.push_back(r);
      ++unusual;
    }
  for (auto& r : rows)
    if (usual(r) && out.rows.size() < most)
      out.rows.push_back(r);
  out.line = std::to_string(rows.size()) + " "
             + (command == "status" ? "actors" : command) + " (";
  const char* between = "";
  for (auto& [role, states] : counts) {
    out.line += between + (role.empty() ? "" : role + " ");
    const char* comma = "";
    for (auto& [state, n] : states) {
      out.line += comma + std::to_string(n) + " " + state;
      comma = ", ";
    }
    between = "; ";
  }
  out.line += "); listed: " + std::to_string(out.rows.size()) + ", the "
              + std::to_string(unusual) + " not running or up first (`"
              + command + " all` lists every one)\n";
  return out;
}

} // namespace troupe

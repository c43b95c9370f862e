#include "apps/shell_render.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>

namespace troupe {

namespace {

using json = nlohmann::json;

std::string cell(const json& v) {
  if (v.is_null())
    return "-";
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[64];
    double d = v.get<double>();
    std::snprintf(buf, sizeof(buf), d >= 100 ? "%.0f" : "%.4g", d);
    return buf;
  }
  if (v.is_array()) {
    std::string out;
    for (auto& x : v)
      out += (out.empty() ? "" : ",") + cell(x);
    return out.empty() ? "-" : out;
  }
  return v.dump();
}

/// One row per object; a column per (key, heading).
std::string table(const json& rows,
                  const std::vector<std::pair<std::string, std::string>>& cols) {
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width;
  for (auto& [key, head] : cols)
    width.push_back(head.size());
  for (auto& r : rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < cols.size(); ++c) {
      auto& key = cols[c].first;
      // "step" shows a shard's version, so one column serves both.
      auto v = r.contains(key) ? r[key]
               : key == "step" && r.contains("version") ? r["version"]
                                                        : json{};
      line.push_back(cell(v));
      width[c] = std::max(width[c], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  std::ostringstream out;
  auto emit = [&](const std::vector<std::string>& line) {
    for (size_t c = 0; c < line.size(); ++c) {
      out << line[c];
      if (c + 1 < line.size())
        out << std::string(width[c] - line[c].size() + 2, ' ');
    }
    out << "\n";
  };
  std::vector<std::string> heads;
  for (auto& [key, head] : cols)
    heads.push_back(head);
  emit(heads);
  for (auto& line : cells)
    emit(line);
  return out.str();
}

const std::vector<std::pair<std::string, std::string>> actor_cols = {
  {"id", "ACTOR"},   {"role", "ROLE"},
  {"node", "NODE"},  {"state", "STATE"},
  {"step", "STEP/VERSION"}, {"examples_per_sec", "EXAMPLES/S"},
  {"staleness", "STALENESS"}, {"restarts", "RESTARTS"}};

std::string lines(const json& j, const std::string& indent = "") {
  std::ostringstream out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_object()) {
      out << indent << it.key() << ":\n" << lines(*it, indent + "  ");
    } else if (it->is_array() && !it->empty() && (*it)[0].is_object()) {
      out << indent << it.key() << ":\n";
      for (auto& x : *it)
        out << lines(x, indent + "  ") << indent << "  --\n";
    } else {
      out << indent << it.key() << ": " << cell(*it) << "\n";
    }
  }
  return out.str();
}

} // namespace

std::string render_reply(const std::string& command,
                         const std::string& json_text) {
  auto j = json::parse(json_text, nullptr, false);
  if (j.is_discarded())
    return json_text + "\n";
  if (command == "help" && j.contains("help"))
    return j["help"].get<std::string>() + "\n";
  if (command == "status" && j.contains("actors")) {
    auto& r = j["run"];
    std::ostringstream head;
    head << "run " << cell(r["name"]) << " (" << cell(r["mode"]) << "): step "
         << cell(r["steps"]) << ", epoch " << cell(r["epoch"]) << ", "
         << cell(r["examples_per_sec"]) << " examples/s, test accuracy "
         << cell(r["test_accuracy"]) << (r["paused"].get<bool>() ? ", PAUSED" : "")
         << (r["recovering"].get<bool>() ? ", RECOVERING" : "")
         << ", restarts " << cell(r["restarts"]) << ", shard recoveries "
         << cell(r["shard_recoveries"]) << " (" << cell(r["lost_steps"])
         << " steps lost)\n";
    return head.str() + table(j["actors"], actor_cols);
  }
  if ((command == "workers" || command == "shards") && j.is_array())
    return table(j, actor_cols);
  if (command == "nodes" && j.is_array())
    return table(j, {{"name", "NODE"},
                     {"address", "ADDRESS"},
                     {"state", "STATE"},
                     {"chief", "CHIEF"},
                     {"shards", "SHARDS"},
                     {"workers", "WORKERS"}});
  if (j.is_object())
    return lines(j);
  return j.dump(2) + "\n";
}

std::pair<std::string, std::string> run_of_reply(const std::string& json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_object() || !j.contains("run") || !j["run"].is_object())
    return {};
  auto& run = j["run"];
  auto text = [&](const char* key) {
    return run.contains(key) && run[key].is_string()
             ? run[key].get<std::string>()
             : std::string{};
  };
  return {text("run_id"), text("config_digest")};
}

} // namespace troupe

#pragma GCC diagnostic pop

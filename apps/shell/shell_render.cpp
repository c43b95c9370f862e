#include "apps/shell/shell_render.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <sstream>
#include <vector>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>

#include "apps/metrics/view_json.hpp"
#include "apps/shell/shell_summary.hpp"
#include "runtime/base/errc.hpp"

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

/// "512 B", "41.3 MiB", "1.2 GiB".
std::string binary_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(units)) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return buf;
}

/// A bounded table's admissions and evictions on a shard's table line
/// (nothing for a table that keeps every key it sees).
std::string bounds_text(const json& t) {
  auto count = [&](const char* key) {
    return t.contains(key) && t[key].is_number() ? t[key].get<int64_t>() : 0;
  };
  std::string fill;
  if (count("filter_counters") > 0) { // how full the admission filter is
    char text[64];
    std::snprintf(text, sizeof text, ", admission filter %.1f%% full",
                  100.0 * static_cast<double>(count("filter_used"))
                    / static_cast<double>(count("filter_counters")));
    fill = text;
  }
  if (count("rows_rejected") == 0 && count("rows_evicted") == 0)
    return fill;
  return ", " + std::to_string(count("rows_rejected")) + " not admitted, "
         + std::to_string(count("rows_evicted")) + " evicted" + fill;
}

/// One row per object; a column per (key, heading).
std::string
table(const json& rows,
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
      auto v = r.contains(key)                          ? r[key]
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
  {"id", "ACTOR"},
  {"role", "ROLE"},
  {"node", "NODE"},
  {"state", "STATE"},
  {"step", "STEP/VERSION"},
  {"examples_per_sec", "EXAMPLES/S"},
  {"staleness", "STALENESS"},
  {"restarts", "RESTARTS"}};

/// `workers` adds each one's process (a user's Python worker process
/// shows as its interpreter) and why it last failed.
std::vector<std::pair<std::string, std::string>> worker_cols() {
  auto cols = actor_cols;
  cols.insert(cols.end(), {{"mean_staleness", "MEAN_STALENESS"},
                           {"pid", "PID"},
                           {"host", "HOST"},
                           {"program", "PROGRAM"},
                           {"last_error", "LAST_ERROR"}});
  return cols;
}

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

/// "1h02m", "3m05s", "42s"; "-" when unknown.
std::string duration(const json& seconds) {
  if (!seconds.is_number())
    return "-";
  auto s = static_cast<long long>(seconds.get<double>() + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

/// A table of `rows`, summarised past a screenful unless `all`.
std::string
long_table(const std::string& command, const json& rows,
           const std::vector<std::pair<std::string, std::string>>& cols,
           bool all) {
  if (all)
    return table(rows, cols);
  auto listed = summarise_rows(rows, command);
  return listed.line + table(listed.rows, cols);
}

/// Tables for lists of actors and nodes, "key: value" lines for the rest;
/// long lists summarised unless `all`.
std::string for_people(const std::string& command, const json& j, bool all) {
  if (command == "help" && j.contains("help"))
    return j["help"].get<std::string>() + "\n";
  if (command == "status" && j.contains("actors")) {
    auto& r = j["run"];
    std::ostringstream head;
    head << "run " << cell(r["name"]) << " (" << cell(r["mode"]) << "): step "
         << cell(r["steps"]) << " of " << cell(r["total_steps"]) << " ("
         << cell(r["percent_done"]) << "%), epoch " << cell(r["epoch"])
         << ", ETA " << duration(r["eta_seconds"]) << ", "
         << cell(r["examples_per_sec"]) << " examples/s, lr "
         << cell(r["learning_rate"]) << ", loss " << cell(r["loss"])
         << ", test accuracy " << cell(r["test_accuracy"])
         << (r["paused"].get<bool>() ? ", PAUSED" : "")
         << (r["recovering"].get<bool>() ? ", RECOVERING" : "") << ", restarts "
         << cell(r["restarts"]) << ", shard recoveries "
         << cell(r["shard_recoveries"]) << " (" << cell(r["lost_steps"])
         << " steps lost)\n";
    if (auto& e = r["last_export"]; e.is_object())
      head << "last export " << cell(e["sequence"]) << " (" << cell(e["kind"])
           << ") at step " << cell(e["step"]) << ", "
           << duration(e["age_seconds"]) << " ago: " << cell(e["rows"])
           << " rows, " << cell(e["evicted"]) << " evicted keys, "
           << binary_size(e["bytes"].get<double>()) << "\n";
    if (auto& s = r["stream"]; s.is_object())
      head << "stream: " << cell(s["parts"]) << " parts taken, "
           << cell(s["waiting"]) << " waiting; progressive log-loss "
           << cell(s["progressive_log_loss"]) << " over "
           << cell(s["progressive_samples"])
           << " samples, each before its step; parts scored before "
              "training: log-loss "
           << cell(s["parts_log_loss"]) << ", last part "
           << cell(s["last_part"]) << ": log-loss "
           << cell(s["last_part_log_loss"]) << ", AUC "
           << cell(s["last_part_auc"]) << "\n";
    return head.str() + long_table(command, j["actors"], actor_cols, all);
  }
  if (command == "workers" && j.is_array())
    return long_table(command, j, worker_cols(), all);
  if (command == "shards" && j.is_array()) {
    auto cols = actor_cols;
    bool replicas = false;
    for (auto& r : j)
      replicas = replicas || r.contains("replica");
    if (replicas) // where each shard's copy is and whether it is in step
      cols.insert(cols.end(), {{"replica_node", "REPLICA"},
                               {"replica", "REPLICA_STATE"},
                               {"replica_lag", "LAG"}});
    // Then a line per shard and embedding table: which table fills which
    // shard, and its traffic.
    std::string tables;
    for (auto& r : j)
      if (r.contains("tables"))
        for (auto& t : r["tables"])
          tables += cell(r["id"]) + " table " + cell(t["name"]) + ": "
                    + cell(t["rows"]) + " rows in "
                    + binary_size(t["row_bytes"].get<double>()) + ", "
                    + cell(t["rows_pulled"]) + " pulled, "
                    + cell(t["rows_pushed"]) + " pushed" + bounds_text(t)
                    + "\n";
    return table(j, cols) + tables;
  }
  if (command == "nodes" && j.is_array()) {
    // A person reads memory in binary units; scripts keep the bytes (--json).
    json rows = j;
    auto binary = [](const json& bytes) {
      return bytes.is_number() ? json(binary_size(bytes.get<double>()))
                               : json(nullptr);
    };
    // How long each process has run, by this host's clock (a host whose
    // clock is off shows off by as much; --json keeps the start).
    const double now = static_cast<double>(std::time(nullptr));
    for (auto& r : rows) {
      r["memory"] = binary(r["resident_bytes"]);
      r["heap"] = binary(r["heap_bytes"]);
      const json& started = r["process_started"];
      r["up"] = started.is_number()
                  ? duration(std::max(0.0, now - started.get<double>()))
                  : "-";
      r["heard"] = duration(r["heard_seconds_ago"]);
    }
    return long_table(command, rows,
                      {{"name", "NODE"},
                       {"address", "ADDRESS"},
                       {"state", "STATE"},
                       {"chief", "CHIEF"},
                       {"shards", "SHARDS"},
                       {"workers", "WORKERS"},
                       {"memory", "RSS"},
                       {"heap", "HEAP"},
                       {"cpu_seconds", "CPU_SECONDS"},
                       {"up", "UP"},
                       {"heard", "HEARD"},
                       {"pid", "PID"},
                       {"program", "PROGRAM"}},
                      all);
  }
  if (j.is_object())
    return lines(j);
  return j.dump(2) + "\n";
}

caf::error no_such(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

std::string print(const std::string& command, const json& j, bool raw_json,
                  bool all = true) {
  return raw_json ? j.dump() + "\n" : for_people(command, j, all);
}

} // namespace

caf::expected<std::string> render_view(const shell_command& c,
                                       const cluster_view& v, bool raw_json) {
  using verb = shell_command::verb;
  json j;
  switch (c.what) {
    case verb::help:
      return raw_json ? json{{"help", shell_help}}.dump() + "\n"
                      : std::string{shell_help} + "\n";
    case verb::status: j = status_json(v); break;
    case verb::nodes: j = nodes_json(v); break;
    case verb::workers:
      j = json::array();
      for (auto& w : v.workers)
        j.push_back(worker_json(w));
      break;
    case verb::shards:
      j = json::array();
      for (auto& s : v.shards)
        j.push_back(shard_json(s));
      break;
    case verb::inspect: {
      auto one = inspect_json(c.target, v);
      if (!one)
        return one.error();
      j = std::move(*one);
      break;
    }
    default:
      return no_such("\"" + c.word + "\" is not answered from the status");
  }
  return print(c.word, j, raw_json, c.all);
}

std::string render_added(const std::vector<int32_t>& ids,
                         const std::string& node, bool raw_json) {
  return print("add-worker", json{{"added", ids}, {"node", node}}, raw_json);
}

std::string render_killed(const actor_ref& target, bool raw_json) {
  return print("kill", json{{"killed", to_string(target)}}, raw_json);
}

std::string render_checkpoint(const std::string& path, bool raw_json) {
  return print("checkpoint", json{{"checkpoint", path}}, raw_json);
}

std::string render_export(const std::string& text, bool raw_json) {
  return print("export", json{{"export", text}}, raw_json);
}

std::string render_moved(const std::string& command, const std::string& text,
                         bool raw_json) {
  return print(command, json{{"moved", text}}, raw_json);
}

std::string render_tuned(tune_key key, double value, bool raw_json) {
  return print("set", json{{to_string(key), value}}, raw_json);
}

std::string render_paused(bool paused, bool raw_json) {
  return print("pause", json{{"paused", paused}}, raw_json);
}

std::string render_stopping(bool raw_json) {
  return print("stop", json{{"stopping", true}}, raw_json);
}

} // namespace troupe

#pragma GCC diagnostic pop

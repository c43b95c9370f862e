#include "runtime/config/membership.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "runtime/base/errc.hpp"
#include "runtime/base/host_port.hpp"

namespace troupe {

namespace {

using json = nlohmann::json;

/// Far beyond any cluster (the config's own bound is 1024 nodes), and it
/// keeps a hostile "n[0-99999999]" from filling memory.
constexpr size_t max_hosts = 1024;

caf::error bad(const std::string& what) {
  return make_error(errc::invalid_config, what);
}

/// `n` items over `k` nodes as evenly as they go: node i's share.
int share(int n, int k, int i) {
  return n / k + (i < n % k ? 1 : 0);
}

/// A non-negative decimal that fits an int; -1 otherwise.
long decimal(const std::string& text) {
  if (text.empty() || text.size() > 9
      || !std::all_of(text.begin(), text.end(),
                      [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  return std::strtol(text.c_str(), nullptr, 10);
}

/// "the chief on chief (h:p); shards on ps0, ps1 (2); workers on ..."
std::string describe_nodes(const cluster_config& c) {
  std::string shard_nodes, worker_nodes;
  for (auto& n : c.nodes) {
    if (n.shards > 0)
      shard_nodes += (shard_nodes.empty() ? "" : ", ") + n.name;
    if (n.workers > 0)
      worker_nodes += (worker_nodes.empty() ? "" : ", ") + n.name;
  }
  auto* chief = c.node(c.chief_node);
  return "the chief on " + chief->name + " (" + chief->host + ":"
         + std::to_string(chief->port) + "); shards on " + shard_nodes + " ("
         + std::to_string(c.shards) + "); workers on " + worker_nodes + " ("
         + std::to_string(c.workers) + ")";
}

/// Sums the nodes' counts into `c`, gives each node its data port, and
/// checks that no two ports clash.
caf::error settle(cluster_config& c, const std::string& source) {
  c.shards = c.workers = 0;
  for (auto& n : c.nodes) {
    c.shards += n.shards;
    c.workers += n.workers;
  }
  if (c.replicas_to_aggregate > c.workers)
    return bad(source + ": " + std::to_string(c.workers)
               + " workers, below the config's "
                 "/cluster/replicas_to_aggregate ("
               + std::to_string(c.replicas_to_aggregate) + ")");
  if (auto clash = port_clash(c.nodes); !clash.empty())
    return bad(source + ": " + clash);
  return caf::none;
}

} // namespace

const char* to_string(membership_source s) {
  switch (s) {
    case membership_source::tf_config: return "TF_CONFIG";
    case membership_source::slurm: return "Slurm";
    default: return "the config";
  }
}

membership_source membership_in(const env_lookup& env) {
  if (auto* tf = env("TF_CONFIG"); tf != nullptr && *tf != '\0')
    return membership_source::tf_config;
  if (auto* n = env("SLURM_STEP_NUM_TASKS"); n != nullptr && decimal(n) >= 2)
    return membership_source::slurm;
  return membership_source::config;
}

caf::expected<membership> membership_from_tf_config(const std::string& text,
                                                    cluster_config& c) {
  const std::string src = "TF_CONFIG";
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    auto pos = what.find("] ");
    return bad(src + ": invalid JSON: "
               + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  if (!j.is_object() || !j.contains("cluster") || !j["cluster"].is_object()
      || !j.contains("task") || !j["task"].is_object())
    return bad(src
               + ": expected {\"cluster\": {\"chief\": [\"host:port\"], "
                 "\"ps\": [...], \"worker\": [...]}, \"task\": "
                 "{\"type\": ..., \"index\": ...}}");
  using address = std::pair<std::string, uint16_t>;
  std::vector<address> chief, ps, worker;
  for (auto& [type, list] : j["cluster"].items()) {
    std::vector<address>* into = nullptr;
    if (type == "chief" || type == "master")
      into = &chief;
    else if (type == "ps")
      into = &ps;
    else if (type == "worker")
      into = &worker;
    else if (type == "evaluator")
      return bad(src
                 + ": /cluster/evaluator: troupe's chief evaluates the "
                   "run; leave the evaluator out");
    else
      return bad(src + ": /cluster/" + type
                 + ": not a troupe role (chief, master, ps, worker)");
    if (!list.is_array())
      return bad(src + ": /cluster/" + type
                 + ": expected a list of \"host:port\"");
    if (type != "chief" && type != "master" && !into->empty())
      return bad(src + ": /cluster/" + type + " is given twice");
    for (size_t i = 0; i < list.size(); ++i) {
      auto at = src + ": /cluster/" + type + "/" + std::to_string(i);
      if (!list[i].is_string())
        return bad(at + ": expected \"host:port\", found " + list[i].dump());
      auto addr = parse_address(list[i].get<std::string>());
      if (!addr)
        return bad(at + ": " + describe(addr.error()));
      into->push_back(*addr);
    }
  }
  if (chief.size() > 1)
    return bad(src + ": " + std::to_string(chief.size())
               + " chief (or master) tasks; a run has one");
  if (ps.empty())
    return bad(src + ": no \"ps\" tasks; the shards need at least one");
  if (worker.empty())
    return bad(src + ": no \"worker\" tasks; the run needs at least one");
  if (ps.size() + worker.size() + chief.size() > 1024)
    return bad(src + ": more than 1024 tasks");
  auto& task = j["task"];
  if (!task.contains("type") || !task["type"].is_string())
    return bad(src
               + ": /task/type: expected \"chief\", \"ps\" or "
                 "\"worker\"");
  if (!task.contains("index") || !task["index"].is_number_integer())
    return bad(src + ": /task/index: expected a task's index");
  auto type = task["type"].get<std::string>();
  auto index = task["index"].get<int64_t>();
  auto count = type == "chief" || type == "master" ? chief.size()
               : type == "ps"                      ? ps.size()
               : type == "worker"                  ? worker.size()
                                                   : size_t{0};
  if (count == 0)
    return bad(src + ": /task/type: \"" + type + "\" has no tasks in "
               + "/cluster");
  if (index < 0 || static_cast<size_t>(index) >= count)
    return bad(src + ": /task/index: " + std::to_string(index)
               + ", but /cluster/" + type + " lists " + std::to_string(count)
               + " task" + (count == 1 ? "" : "s"));
  c.nodes.clear();
  auto add = [&](std::string name, const address& a) -> node_config& {
    node_config n;
    n.name = std::move(name);
    n.host = a.first;
    n.port = a.second;
    if (c.data_port_offset > 0)
      n.data_port = static_cast<uint16_t>(
        std::min(65535, n.port + c.data_port_offset));
    c.nodes.push_back(std::move(n));
    return c.nodes.back();
  };
  if (!chief.empty())
    add("chief", chief.front());
  const int k_ps = static_cast<int>(ps.size());
  const int k_w = static_cast<int>(worker.size());
  for (int i = 0; i < k_ps; ++i)
    add("ps" + std::to_string(i), ps[i]).shards = share(
      std::max(c.shards, k_ps), k_ps, i);
  for (int i = 0; i < k_w; ++i)
    add("worker" + std::to_string(i), worker[i]).workers = share(
      std::max(c.workers, k_w), k_w, i);
  for (auto& n : c.nodes)
    if (c.data_port_offset > 0 && n.port + c.data_port_offset > 65535)
      return bad(src + ": node " + n.name + "'s port " + std::to_string(n.port)
                 + " plus /cluster/data_port_offset is beyond 65535");
  // TensorFlow's rule: without a chief, worker 0 is the chief.
  c.chief_node = chief.empty() ? "worker0" : "chief";
  if (auto err = settle(c, src))
    return err;
  membership m;
  m.source = membership_source::tf_config;
  m.node = type == "chief" || type == "master" ? std::string{"chief"}
                                               : type + std::to_string(index);
  m.summary = describe_nodes(c);
  return m;
}

caf::expected<membership> membership_from_slurm(const env_lookup& env,
                                                cluster_config& c) {
  const std::string src = "Slurm";
  auto get = [&](const char* name, const char* fallback = nullptr) {
    auto* v = env(name);
    if ((v == nullptr || *v == '\0') && fallback != nullptr)
      v = env(fallback);
    return std::string{v == nullptr ? "" : v};
  };
  auto procid = decimal(get("SLURM_PROCID"));
  auto ntasks = decimal(get("SLURM_STEP_NUM_TASKS"));
  if (procid < 0 || ntasks < 2 || procid >= ntasks)
    return bad(src + ": SLURM_PROCID \"" + get("SLURM_PROCID")
               + "\" and SLURM_STEP_NUM_TASKS \"" + get("SLURM_STEP_NUM_TASKS")
               + "\" do not name a task of a step of two or more (start "
                 "the nodes with srun -n N)");
  auto list = get("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST");
  auto hosts = expand_host_list(list);
  if (!hosts)
    return bad(src + ": SLURM_STEP_NODELIST: " + describe(hosts.error()));
  auto per_node_text = get("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE");
  auto per_node = expand_tasks_per_node(per_node_text);
  if (!per_node)
    return bad(src
               + ": SLURM_STEP_TASKS_PER_NODE: " + describe(per_node.error()));
  long placed = 0;
  for (auto n : *per_node)
    placed += n;
  if (per_node->size() != hosts->size() || placed != ntasks)
    return bad(src + ": SLURM_STEP_TASKS_PER_NODE \"" + per_node_text
               + "\" does not place " + std::to_string(ntasks)
               + " tasks on the " + std::to_string(hosts->size())
               + " hosts of \"" + list + "\"");
  // Each task's host follows from the order tasks fill nodes: block
  // distribution, or any other with one task per node.
  auto dist = get("SLURM_DISTRIBUTION");
  if (!dist.empty() && dist.rfind("block", 0) != 0
      && static_cast<size_t>(ntasks) != hosts->size())
    return bad(src + ": SLURM_DISTRIBUTION is \"" + dist
               + "\"; troupe places tasks by block distribution (srun's "
                 "default, --distribution=block)");
  const int shards = c.shards;
  if (ntasks < shards + 2)
    return bad(src + ": " + std::to_string(ntasks) + " tasks, but the chief, "
               + std::to_string(shards) + " shard task"
               + (shards == 1 ? "" : "s")
               + " (/cluster/shards) and a worker task need "
               + std::to_string(shards + 2) + ": srun -n "
               + std::to_string(shards + 2) + " or more");
  if (c.base_port + 2 * ntasks - 1 > 65535)
    return bad(src + ": /cluster/base_port " + std::to_string(c.base_port)
               + " leaves no room for 2 ports per task of "
               + std::to_string(ntasks));
  const int worker_tasks = static_cast<int>(ntasks) - 1 - shards;
  const int workers = std::max(c.workers, worker_tasks);
  c.nodes.clear();
  size_t host = 0;
  int on_host = 0;
  for (int i = 0; i < ntasks; ++i) {
    while (on_host == (*per_node)[host]) {
      ++host;
      on_host = 0;
    }
    ++on_host;
    node_config n;
    n.host = (*hosts)[host];
    n.port = static_cast<uint16_t>(c.base_port + 2 * i);
    n.data_port = static_cast<uint16_t>(n.port + 1);
    if (i == 0) {
      n.name = "chief";
    } else if (i <= shards) {
      n.name = "ps" + std::to_string(i - 1);
      n.shards = 1;
    } else {
      int w = i - 1 - shards;
      n.name = "worker" + std::to_string(w);
      n.workers = share(workers, worker_tasks, w);
    }
    c.nodes.push_back(std::move(n));
  }
  c.chief_node = "chief";
  if (auto err = settle(c, src))
    return err;
  membership m;
  m.source = membership_source::slurm;
  m.node = c.nodes[static_cast<size_t>(procid)].name;
  m.summary = describe_nodes(c);
  return m;
}

std::vector<config_setting> node_settings(const cluster_config& c) {
  json nodes = json::array();
  for (auto& n : c.nodes) {
    json entry = {{"name", n.name}, {"host", n.host}, {"port", n.port}};
    if (n.data_port != 0)
      entry["data_port"] = n.data_port;
    if (n.shards > 0)
      entry["shards"] = n.shards;
    if (n.workers > 0)
      entry["workers"] = n.workers;
    nodes.push_back(std::move(entry));
  }
  return {{"/cluster/nodes", nodes.dump()},
          {"/cluster/chief", json(c.chief_node).dump()},
          {"/cluster/shards", std::to_string(c.shards)},
          {"/cluster/workers", std::to_string(c.workers)}};
}

namespace {

/// Expands one item of a host list ("r[1-2]n[01-02]") after `prefix`.
caf::error expand_item(const std::string& item, size_t from,
                       const std::string& prefix,
                       std::vector<std::string>& out) {
  auto open = item.find('[', from);
  if (open == std::string::npos) {
    if (item.find(']', from) != std::string::npos)
      return bad("a ']' without its '[' in \"" + item + "\"");
    out.push_back(prefix + item.substr(from));
    return out.size() > max_hosts
             ? bad("more than " + std::to_string(max_hosts) + " hosts")
             : caf::none;
  }
  auto close = item.find(']', open);
  if (close == std::string::npos || item.find('[', open + 1) < close)
    return bad("a '[' without its ']' in \"" + item + "\"");
  auto head = prefix + item.substr(from, open - from);
  auto ranges = item.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start <= ranges.size()) {
    auto comma = ranges.find(',', start);
    auto range = ranges.substr(
      start, comma == std::string::npos ? std::string::npos : comma - start);
    auto dash = range.find('-');
    auto first_text = range.substr(0, dash);
    auto lo = decimal(first_text);
    auto hi = dash == std::string::npos ? lo : decimal(range.substr(dash + 1));
    if (lo < 0 || hi < lo || hi - lo >= static_cast<long>(max_hosts))
      return bad("\"" + range + "\" in \"" + item
                 + "\" is not N or N-M with N <= M");
    // "01-03" keeps its width: node01, node02, node03.
    for (long v = lo; v <= hi; ++v) {
      auto digits = std::to_string(v);
      if (digits.size() < first_text.size())
        digits.insert(0, first_text.size() - digits.size(), '0');
      if (auto err = expand_item(item, close + 1, head + digits, out))
        return err;
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return caf::none;
}

} // namespace

caf::expected<std::vector<std::string>>
expand_host_list(const std::string& text) {
  std::vector<std::string> hosts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char ch = i < text.size() ? text[i] : ',';
    if (ch == '[')
      ++depth;
    else if (ch == ']')
      --depth;
    // The end of the text ends the last item, inside brackets or not
    // (expand_item then names an unclosed one).
    if (ch != ',' || (depth > 0 && i < text.size()))
      continue;
    auto item = text.substr(start, i - start);
    if (item.empty())
      return bad("an empty host name in \"" + text + "\"");
    if (auto err = expand_item(item, 0, "", hosts))
      return err;
    start = i + 1;
  }
  return hosts;
}

caf::expected<std::vector<int>> expand_tasks_per_node(const std::string& text) {
  std::vector<int> counts;
  size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    auto item = text.substr(
      start, comma == std::string::npos ? std::string::npos : comma - start);
    long n = -1, times = 1;
    auto paren = item.find("(x");
    if (paren == std::string::npos) {
      n = decimal(item);
    } else if (item.back() == ')') {
      n = decimal(item.substr(0, paren));
      times = decimal(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (n < 1 || times < 1
        || counts.size() + static_cast<size_t>(times) > max_hosts)
      return bad("\"" + item + "\" in \"" + text
                 + "\" is not N or N(xM) with N, M >= 1");
    counts.insert(counts.end(), static_cast<size_t>(times),
                  static_cast<int>(n));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return counts;
}

} // namespace troupe

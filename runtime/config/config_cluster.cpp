// The "cluster" section of a run config: modes, supervision, the nodes of
// a cluster file and their TLS files.
#include <string>
#include <vector>

#include "runtime/config/config_reader.hpp"

namespace troupe::config_detail {

/// Far more processes than one chief coordinates; the bound also keeps the
/// checks for repeated names and addresses below (each node against the
/// ones before it) cheap: 20,000 nodes took 1 s, the 250,000 that fit in
/// a 16 MB file would take nearly three minutes.
constexpr size_t max_nodes = 1024;

std::vector<node_config> read_nodes(const json& v, const std::string& at,
                                    const std::string& base) {
  if (!v.is_array() || v.empty())
    fail(at, "a non-empty array of nodes", v);
  if (v.size() > max_nodes)
    throw config_error{errc::invalid_config, at,
                       "expected at most " + std::to_string(max_nodes)
                         + " nodes, found " + std::to_string(v.size())};
  std::vector<node_config> nodes;
  for (size_t i = 0; i < v.size(); ++i) {
    object_reader r{v[i], at + "/" + std::to_string(i), base};
    node_config n;
    // Names and hosts go into messages, logs and the training identity
    // (one "key=value" line each): no control characters. A node's name
    // is also what it registers with, which the chief takes in printable
    // ASCII without spaces, at most 64 characters: refused here, before a
    // run whose node could never join starts.
    auto name = r.require("name");
    auto printable = [](const std::string& s) {
      for (char c : s)
        if (c <= ' ' || c > '~')
          return false;
      return true;
    };
    if (!name.is_string() || name.get<std::string>().empty()
        || name.get<std::string>().size() > 64
        || !printable(name.get<std::string>()))
      fail(r.at("name"),
           "a name of 1 to 64 printable ASCII characters without spaces", name);
    n.name = name.get<std::string>();
    for (auto& m : nodes)
      if (m.name == n.name)
        throw config_error{errc::invalid_config, r.at("name"),
                           "node \"" + n.name + "\" is listed twice"};
    n.host = r.string("host", "127.0.0.1");
    if (n.host.empty() || has_control(n.host))
      throw config_error{errc::invalid_config, r.at("host"),
                         "expected a host name or address, got \"" + n.host
                           + "\""};
    r.require("port");
    n.port = static_cast<uint16_t>(r.integer("port", 0, 1, 65535));
    for (auto& m : nodes)
      if (m.host == n.host && m.port == n.port)
        throw config_error{errc::invalid_config, r.at("port"),
                           n.host + ":" + std::to_string(n.port)
                             + " is already node \"" + m.name + "\"'s"};
    n.data_port = static_cast<uint16_t>(r.integer("data_port", 0, 0, 65535));
    n.shards = static_cast<int>(r.integer("shards", 0, 0, 1024));
    n.workers = static_cast<int>(r.integer("workers", 0, 0, 1024));
    if (r.find("device") != nullptr)
      n.device = read_device(r);
    n.certificate = r.path("certificate", "");
    n.key = r.path("key", "");
    if (n.certificate.empty() != n.key.empty())
      throw config_error{errc::invalid_config,
                         r.at(n.key.empty() ? "key" : "certificate"),
                         "a node's own certificate needs its key, and a key "
                         "its certificate"};
    r.finish();
    nodes.push_back(std::move(n));
  }
  return nodes;
}

cluster_tls read_tls(object_reader r, const std::vector<node_config>& nodes) {
  cluster_tls t;
  auto path = [&](const char* key, bool required) {
    if (required)
      r.require(key);
    auto v = r.path(key, "");
    if (required && v.empty())
      throw config_error{errc::invalid_config, r.at(key),
                         "expected the path of a PEM file, got \"\""};
    return v;
  };
  t.ca = path("ca", true);
  bool every_node_has_own = !nodes.empty();
  for (auto& n : nodes)
    every_node_has_own = every_node_has_own && !n.certificate.empty();
  t.certificate = path("certificate", !every_node_has_own);
  t.key = path("key", !every_node_has_own);
  t.handshake_timeout_ms = r.integer("handshake_timeout_ms", 5000, 100, 600000);
  r.finish();
  return t;
}

cluster_config read_cluster(object_reader r) {
  using mk = cluster_config::mode;
  cluster_config c;
  if (auto* v = r.find("nodes")) {
    c.nodes = read_nodes(*v, r.at("nodes"), r.base());
    int shards = 0, workers = 0;
    for (auto& n : c.nodes) {
      shards += n.shards;
      workers += n.workers;
    }
    // Counts, where also given, must agree with the placement.
    auto agree = [&](const char* key, int sum) {
      if (r.find(key) != nullptr && r.integer(key, sum, 0) != sum)
        throw config_error{errc::invalid_config, r.at(key),
                           "must equal the " + std::string{key}
                             + " of the nodes (" + std::to_string(sum)
                             + "), or be left out"};
    };
    agree("shards", shards);
    agree("workers", workers);
    if (shards == 0)
      throw config_error{errc::invalid_config, r.at("nodes"),
                         "no node holds a shard (give one \"shards\": 1)"};
    if (workers == 0)
      throw config_error{errc::invalid_config, r.at("nodes"),
                         "no node holds a worker (give one \"workers\": 1)"};
    c.shards = shards;
    c.workers = workers;
    c.chief_node = r.string("chief", c.nodes.front().name);
    if (c.node(c.chief_node) == nullptr)
      throw config_error{errc::invalid_config, r.at("chief"),
                         "unknown node \"" + c.chief_node
                           + "\" (the nodes are: " + c.node_names() + ")"};
  } else {
    c.shards = static_cast<int>(r.integer("shards", 2, 1, 1024));
    c.workers = static_cast<int>(r.integer("workers", 2, 1, 1024));
    if (r.find("chief") != nullptr)
      throw config_error{errc::invalid_config, r.at("chief"),
                         "needs \"nodes\" to name"};
  }
  c.shard_replicas = static_cast<int>(r.integer("shard_replicas", 0, 0, 1));
  if (c.shard_replicas > 0) {
    int holders = 0;
    for (auto& n : c.nodes)
      holders += n.shards > 0 ? 1 : 0;
    // Without nodes (yet: membership may come from the launcher), the
    // chief checks the nodes it gets.
    if (!c.nodes.empty() && holders < 2)
      throw config_error{errc::invalid_config, r.at("shard_replicas"),
                         "needs at least two nodes that hold shards (a "
                         "replica lives on another node than its primary); "
                         "the nodes hold shards on "
                           + std::to_string(holders)};
  }
  c.consistency = r.choice("mode", mk::async,
                           {{"async", mk::async},
                            {"sync", mk::sync},
                            {"ssp", mk::ssp},
                            {"easgd", mk::easgd}});
  c.replicas_to_aggregate = static_cast<int>(
    r.integer("replicas_to_aggregate", 0, 0, 1024));
  if (c.replicas_to_aggregate > c.workers)
    throw config_error{errc::invalid_config, r.at("replicas_to_aggregate"),
                       "must be <= number of workers ("
                         + std::to_string(c.workers) + "), got "
                         + std::to_string(c.replicas_to_aggregate)};
  c.staleness = static_cast<int>(r.integer("staleness", 3, 0, 1 << 20));
  c.stale_lr = r.choice("stale_lr", cluster_config::stale_rate::divide,
                        {{"divide", cluster_config::stale_rate::divide},
                         {"none", cluster_config::stale_rate::none},
                         {"gap", cluster_config::stale_rate::gap}});
  c.delay_compensation = r.number("delay_compensation", 0, 0, 1e6);
  // "auto" (or absent) and prefetch "auto": settled by resolve_overlap
  // once the model is read.
  if (auto* v = r.find("stale_lookahead"); v == nullptr || *v == "auto")
    c.stale_lookahead_auto = true;
  else if (!v->is_number())
    fail(r.at("stale_lookahead"), "\"auto\" or a number >= 0 and <= 64", *v);
  else
    c.stale_lookahead = r.number("stale_lookahead", 0, 0, 64);
  c.sync_lr = r.choice("sync_lr", cluster_config::sync_rate::sqrt,
                       {{"sqrt", cluster_config::sync_rate::sqrt},
                        {"linear", cluster_config::sync_rate::linear},
                        {"none", cluster_config::sync_rate::none}});
  c.sync_warmup = r.integer("sync_warmup", 0, 0, int64_t{1} << 40);
  c.stale_momentum = r.choice(
    "stale_momentum", cluster_config::stale_momentum_rule::none,
    {{"reduce", cluster_config::stale_momentum_rule::reduce},
     {"none", cluster_config::stale_momentum_rule::none}});
  if (auto* v = r.find("prefetch"); v == nullptr || *v == "auto")
    c.prefetch_auto = true;
  else if (v->is_boolean())
    c.prefetch = v->get<bool>();
  else
    fail(r.at("prefetch"), "true, false or \"auto\"", *v);
  c.lease_ahead_ms = r.integer("lease_ahead_ms", 0, 0, 60000);
  c.tau = static_cast<int>(r.integer("tau", 4, 1, 1 << 20));
  c.beta = r.number("beta", 0.9, 0, 1, true);
  c.moving_rate = r.number("moving_rate", 0, 0, 1);
  c.max_restarts = static_cast<int>(r.integer("max_restarts", 3, 0, 1 << 20));
  c.restart_window_s = r.number("restart_window_s", 60, 0, 1e9, true);
  c.target_accuracy = r.number("target_accuracy", 0, 0, 1);
  c.request_timeout_ms = r.integer("request_timeout_ms", 30000, 1);
  c.metrics_dir = r.path("metrics_dir", "");
  c.node_timeout_s = r.number("node_timeout_s", 30, 0, 1e6, true);
  c.heartbeat_interval_ms = r.integer("heartbeat_interval_ms", 500, 1, 3600000);
  c.connection_timeout_ms = r.integer("connection_timeout_ms", 3000, 1,
                                      3600000);
  if (c.connection_timeout_ms <= c.heartbeat_interval_ms)
    throw config_error{errc::invalid_config, r.at("connection_timeout_ms"),
                       "must exceed heartbeat_interval_ms ("
                         + std::to_string(c.heartbeat_interval_ms) + ")"};
  c.shared_memory = r.boolean("shared_memory", true);
  c.data_port_offset = static_cast<int>(
    r.integer("data_port_offset", 0, 0, 65534));
  c.base_port = static_cast<int>(r.integer("base_port", 7400, 1, 65534));
  // Without nodes, both are kept for membership from the environment.
  for (auto& n : c.nodes) {
    if (n.data_port != 0 || c.data_port_offset == 0)
      continue;
    if (n.port + c.data_port_offset > 65535)
      throw config_error{
        errc::invalid_config, r.at("data_port_offset"),
        "node \"" + n.name + "\"'s port " + std::to_string(n.port) + " plus "
          + std::to_string(c.data_port_offset) + " is beyond 65535"};
    n.data_port = static_cast<uint16_t>(n.port + c.data_port_offset);
  }
  if (auto clash = port_clash(c.nodes); !clash.empty())
    throw config_error{errc::invalid_config, r.at("nodes"), clash};
  c.on_node_loss = r.choice("on_node_loss", cluster_config::node_loss::move,
                            {{"move", cluster_config::node_loss::move},
                             {"wait", cluster_config::node_loss::wait}});
  if (auto* t = r.find("tls"))
    c.tls = read_tls(r.inner(*t, "tls"), c.nodes);
  for (size_t i = 0; i < c.nodes.size(); ++i)
    if (!c.nodes[i].certificate.empty() && !c.tls.enabled())
      throw config_error{errc::invalid_config,
                         r.at("nodes/" + std::to_string(i) + "/certificate"),
                         "needs /cluster/tls with the cluster's \"ca\""};
  r.finish();
  return c;
}

} // namespace troupe::config_detail

namespace troupe {

std::string port_clash(const std::vector<node_config>& nodes) {
  // Every port a node listens on, with its owner, per host.
  struct taken {
    const node_config* node;
    uint16_t port;
    const char* what;
  };
  std::vector<taken> all;
  for (auto& n : nodes) {
    all.push_back({&n, n.port, "port"});
    if (n.data_port != 0)
      all.push_back({&n, n.data_port, "data_port"});
  }
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (all[i].port == all[j].port && all[i].node->host == all[j].node->host)
        return "node \"" + all[i].node->name + "\"'s " + all[i].what + " "
               + std::to_string(all[i].port) + " on " + all[i].node->host
               + " is already node \"" + all[j].node->name + "\"'s "
               + all[j].what;
  return {};
}

} // namespace troupe

// The multi-process tests' cluster, started as a user starts one: the
// cluster file written from a cluster_spec, a troupe-node for every member,
// then the chief's. A test names what it does to which node
// (cluster.node("w1").kill9()), starts more processes into it (a member
// held back, a node run again, a joiner) and gets every process's output
// when a check on the run fails.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "cluster_file.hpp"

namespace troupe::test {

/// One process of a cluster as a test starts it: its name (its output goes
/// to <dir>/<name>.out and .err), the program's flags, and a command it runs
/// under (process.hpp: a namespace, an environment).
struct node_launch {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> prefix = {};
  std::string app = "troupe-node";
};

/// Starts `l` on its own, as `name` (l.name when empty): a process that
/// is no cluster's, such as one that must fail to start.
inline std::unique_ptr<process> start_process(const temp_dir& dir,
                                              const node_launch& l,
                                              const std::string& name = "") {
  return std::make_unique<process>(dir, name.empty() ? l.name : name, l.app,
                                   l.args, "", l.prefix);
}

/// Where a test starts its cluster otherwise than a user would.
struct cluster_start {
  /// Flags added to every node's command line, the chief's too (e.g.
  /// {"--epochs", "5"}).
  std::vector<std::string> every_node_flags = {};
  /// Flags added to the chief's command line (e.g. {"--max-steps", "300"}).
  std::vector<std::string> chief_flags = {};
  /// Members left out of the start; the test starts each with
  /// start_node(name) when it wants it.
  std::vector<std::string> held_back = {};
};

class running_cluster {
public:
  /// Writes the cluster file of `spec` into `dir` (which fills in the
  /// spec's free ports) and starts the members, then the chief.
  running_cluster(const temp_dir& dir, cluster_spec& spec,
                  const cluster_start& how = {})
    : dir_(dir), config_(write_cluster(dir, spec)),
      client_flags_(spec.client_flags()) {
    start_nodes(spec.nodes, how);
  }

  /// Starts every node of the cluster file at `config`, one the test wrote
  /// itself (an example file moved to loopback, the shipped one): the
  /// members, then the chief, as the file names them.
  static running_cluster from_file(const temp_dir& dir,
                                   const std::string& config,
                                   const cluster_start& how = {}) {
    return {dir, config, nodes_of(config), how};
  }

  /// A cluster whose processes the test describes itself (nodes that the
  /// environment places, started without --node): `members`, then `chief`.
  running_cluster(const temp_dir& dir, const std::vector<node_launch>& members,
                  node_launch chief)
    : dir_(dir), chief_launch_(std::move(chief)) {
    for (auto& m : members)
      start(m);
    chief_ = start_process(dir_, chief_launch_);
  }

  /// A run in one process (the embedded mode, or troupe-train): `chief`
  /// alone.
  running_cluster(const temp_dir& dir, node_launch chief)
    : running_cluster(dir, {}, std::move(chief)) {}

  /// The cluster file's path (empty when the test gave its own launches).
  const std::string& config() const { return config_; }

  process& chief() { return *chief_; }

  /// The member process named `name`: a node of the spec, or a process the
  /// test started (start, start_node, join).
  process& node(const std::string& name) {
    for (auto& m : members_)
      if (m->name() == name)
        return *m;
    BOOST_FAIL("the cluster has no member process " + name);
    throw; // not reached: BOOST_FAIL throws
  }

  /// The member processes, in the spec's order, then those started later.
  procs& members() { return members_; }

  /// Every process, the chief first.
  std::vector<const process*> processes() const {
    std::vector<const process*> out{chief_.get()};
    for (auto& m : members_)
      out.push_back(m.get());
    return out;
  }

  /// Every process's output, read when printed (see cluster_outputs).
  cluster_outputs logs() const { return {*chief_, members_}; }

  /// Starts another member process; its output joins logs(), and
  /// require_finished waits for it.
  process& start(const node_launch& l) {
    members_.push_back(start_process(dir_, l));
    return *members_.back();
  }

  /// Starts troupe-node for node `name` of the cluster file, as `as` (the
  /// name of its output; `name` when empty): a member held back, or a
  /// node run again after it was killed ("w1-again").
  process& start_node(const std::string& name, const std::string& as = "") {
    return start({as.empty() ? name : as, node_flags(name)});
  }

  /// Starts troupe-node --join at the chief with `flags` ("--workers",
  /// "1"), and the cluster's client certificate if it has TLS; under
  /// `prefix` (process.hpp) when given.
  process& join(std::vector<std::string> flags,
                const std::string& as = "joiner",
                std::vector<std::string> prefix = {}) {
    BOOST_REQUIRE_MESSAGE(!chief_address_.empty(),
                          "join needs a cluster started from a cluster file");
    flags.insert(flags.begin(), {"--join", chief_address_});
    flags.insert(flags.end(), client_flags_.begin(), client_flags_.end());
    return start({as, flags, std::move(prefix)});
  }

  /// Starts the chief's command again, as "<chief>-again", as a user would
  /// after the chief died; chief() is that process from then on (the old
  /// one is kept, so that references to it stay good).
  process& run_chief_again() {
    earlier_chiefs_.push_back(std::move(chief_));
    chief_ = start_process(dir_, chief_launch_, chief_launch_.name + "-again");
    return *chief_;
  }

  /// Ends the test, with every process's output, unless the chief logs
  /// step `step` within `seconds`.
  void require_step(long step, double seconds = 120) {
    BOOST_REQUIRE_MESSAGE(chief_->wait_for_step(step, seconds), logs());
  }

  /// Ends the test, with every process's output, unless the chief finishes
  /// the run (exit code 0) within `seconds`. The members are not waited
  /// for: a test that killed or froze one checks the others itself.
  void require_chief_finished(double seconds = 240) {
    BOOST_REQUIRE_MESSAGE(chief_->wait(seconds) == 0, logs());
  }

  /// Ends the test unless the chief finishes the run (exit code 0) within
  /// `seconds`; then every member must end with 0 within `member_seconds`.
  void require_finished(double seconds = 240, double member_seconds = 20) {
    require_chief_finished(seconds);
    for (auto& m : members_)
      BOOST_TEST(m->wait(member_seconds) == 0,
                 m->name() << ": " << m->err() << m->out());
  }

private:
  running_cluster(const temp_dir& dir, std::string config,
                  const std::vector<node_spec>& nodes, const cluster_start& how)
    : dir_(dir), config_(std::move(config)) {
    start_nodes(nodes, how);
  }

  /// The nodes of the cluster file at `config`, the chief's first.
  static std::vector<node_spec> nodes_of(const std::string& config) {
    auto j = nlohmann::json::parse(read_all(config));
    std::string chief = j["cluster"]["chief"];
    std::vector<node_spec> nodes(1);
    for (auto& n : j["cluster"]["nodes"]) {
      node_spec spec;
      spec.name = n["name"];
      spec.host = n["host"];
      spec.port = n["port"];
      if (spec.name == chief)
        nodes.front() = spec;
      else
        nodes.push_back(spec);
    }
    return nodes;
  }

  /// Starts `nodes` (the chief's first) but those held back, then the
  /// chief.
  void start_nodes(const std::vector<node_spec>& nodes,
                   const cluster_start& how) {
    every_node_flags_ = how.every_node_flags;
    for (size_t i = 1; i < nodes.size(); ++i) {
      auto& n = nodes[i];
      auto& held = how.held_back;
      if (std::find(held.begin(), held.end(), n.name) == held.end())
        start({n.name, node_flags(n.name), n.prefix});
    }
    auto& chief = nodes.front();
    chief_address_ = chief.host + ":" + std::to_string(chief.port);
    chief_launch_ = {chief.name, node_flags(chief.name), chief.prefix};
    auto& flags = chief_launch_.args;
    flags.insert(flags.end(), how.chief_flags.begin(), how.chief_flags.end());
    chief_ = start_process(dir_, chief_launch_);
  }

  std::vector<std::string> node_flags(const std::string& name) const {
    std::vector<std::string> flags{"--config", config_, "--node", name};
    flags.insert(flags.end(), every_node_flags_.begin(),
                 every_node_flags_.end());
    return flags;
  }

  const temp_dir& dir_;
  std::string config_;
  std::string chief_address_;
  std::vector<std::string> client_flags_;
  std::vector<std::string> every_node_flags_;
  procs members_;
  node_launch chief_launch_;
  std::unique_ptr<process> chief_;
  procs earlier_chiefs_;
};

/// Seconds from `t` to now, for how long a detection or a recovery took.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
    .count();
}

/// traffic_over() (cluster_file.hpp) for the worker nodes named
/// `workers`; fails the test if they take over `seconds`.
inline socket_traffic traffic_over(running_cluster& cluster,
                                   const std::vector<std::string>& workers,
                                   long steps, double seconds) {
  std::vector<pid_t> pids;
  for (auto& w : workers)
    pids.push_back(cluster.node(w).pid());
  auto t = traffic_over(cluster.chief(), pids, steps, seconds);
  BOOST_REQUIRE_MESSAGE(t.reached, "the run did not train "
                                     << steps << " more steps in " << seconds
                                     << " s");
  return t;
}

/// The chief's line for node `i` of `spec` going down.
inline std::string down_line(const cluster_spec& spec, size_t i) {
  return "node " + spec.nodes[i].name
         + " (127.0.0.1:" + std::to_string(spec.nodes[i].port) + ") is down";
}

/// Each worker node of `workers` holds its own connection to the data plane
/// of each shard node of `shards` (on 127.0.0.1): the chief relays no
/// parameters between them.
inline void check_direct_links(running_cluster& cluster,
                               const std::vector<std::string>& workers,
                               const std::vector<std::string>& shards) {
  for (auto& w : workers)
    for (auto& s : shards) {
      auto port = data_port_of(cluster.node(s));
      BOOST_TEST(port != 0, s);
      BOOST_TEST(has_link_to(cluster.node(w).pid(), "127.0.0.1", port),
                 w << " -> " << s);
    }
}

/// Runs the run of cluster file `cluster` in one process (write_embedded:
/// `shards` shards, `workers` workers), as `name` with `flags` added, to
/// its end: the test ends unless it exits 0 within `seconds`. Returns its
/// output, to hold against the cluster's.
inline std::string
run_in_one_process(const temp_dir& dir, const std::string& cluster, int shards,
                   int workers, const std::string& name = "embedded",
                   std::vector<std::string> flags = {}, double seconds = 240) {
  flags.insert(flags.begin(),
               {"--config", write_embedded(dir, cluster, shards, workers)});
  running_cluster run{dir, {name, flags}};
  run.require_finished(seconds);
  return run.chief().out();
}

} // namespace troupe::test

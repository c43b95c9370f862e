// The run's members as the chief sees them: the nodes (OS processes) and
// the workers, with the indexes that name the member behind an actor's
// down message. The indexes change only here, with the entries they
// index; chief_registration.cpp registers nodes, chief_placement.cpp
// places workers, chief.cpp forgets what went down.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/chief/progress_window.hpp"
#include "actors/protocol/node_agent_protocol.hpp"
#include "actors/protocol/worker_protocol.hpp"
#include "runtime/rules/restart_limit.hpp"
#include "runtime/rules/run_schedule.hpp"

namespace troupe {

/// A worker's life as the chief sees it. starting: its agent starts it (or
/// it waits out a shard-loss grace); running: it trains; waiting: its node
/// is down and on_node_loss is "wait"; leaving: its node leaves the run and
/// it finishes its steps in flight, after which its leases go back and it
/// is placed again; finished: it ended with the feeder done, or the run no
/// longer needs it.
enum class worker_phase : uint8_t {
  starting,
  running,
  waiting,
  leaving,
  finished
};

const char* to_string(worker_phase p);

/// A worker as the chief sees it, for supervision and the shell.
struct worker_entry {
  std::string node;
  /// The node it was placed on first: it goes back there when that node
  /// returns after it moved away (on_node_loss "move").
  std::string home;
  worker_actor handle; ///< null while (re)starting or waiting
  worker_phase state = worker_phase::starting;
  int restarts = 0;
  bool placing = false; ///< an agent is starting it
  int64_t steps = 0, samples = 0, clock = 0;
  int64_t staleness = 0;     ///< of its last report
  int64_t staleness_sum = 0; ///< of all its steps (worker_report)
  double seconds = 0;        ///< compute wall time of its steps
  double read_seconds = 0;   ///< of which reading samples (worker_report)
  int64_t read_bytes = 0;
  double last_loss = 0;
  std::string last_error; ///< why it last failed; empty: it has not
  /// Since its last progress line.
  progress_window window;

  /// The mean staleness of its steps so far (0 before its first).
  double mean_staleness() const {
    return steps > 0
             ? static_cast<double>(staleness_sum) / static_cast<double>(steps)
             : 0.0;
  }

  /// Counts report `r` in its totals; returns its window up to the step
  /// that `schedule` logs when the report crosses one (see
  /// progress_window::add).
  std::optional<progress_line> count(const worker_report& r,
                                     const run_schedule& schedule) {
    clock = r.clock;
    staleness = r.staleness;
    staleness_sum += r.staleness_sum;
    seconds += r.step_seconds;
    read_seconds += r.read_seconds;
    read_bytes += r.read_bytes;
    last_loss = r.samples > 0 ? r.loss_sum / r.samples : last_loss;
    const int64_t before = steps;
    steps += r.steps;
    samples += r.samples;
    return window.add(r, before, schedule.log_step(before, steps));
  }
};

/// One OS process of the cluster.
struct node_entry {
  std::string host;
  uint16_t port = 0;
  uint16_t data_port = 0; ///< its data plane's; 0: none
  node_agent_actor agent; ///< null while down
  bool up = false;
  bool joined = false; ///< added to a running cluster
  /// When the chief last heard from it (now_seconds(): its registration,
  /// its agent's answer, a report of a worker there); -1: never.
  double heard_at = -1;
  /// Its process as its agent last said (the views show it while the
  /// agent is silent); empty: it has not said yet.
  std::optional<process_usage> usage;
  /// It asked to leave the run: answered once its workers are down.
  std::optional<caf::typed_response_promise<bool>> leaving;
  int planned_shards = 0, planned_workers = 0;

  /// "host:port"; "local" for the embedded process; the host alone for
  /// a joined node, which does not listen.
  std::string address() const {
    if (host.empty())
      return "local";
    return port == 0 ? host : host + ":" + std::to_string(port);
  }
};

class chief_members {
public:
  using node_map = std::map<std::string, node_entry>;
  using worker_map = std::map<int32_t, worker_entry>;

  // -- nodes ---------------------------------------------------------------

  /// Every node, by name. Entries are changed in place; a node is added
  /// only by add_node.
  node_map& nodes() { return nodes_; }
  const node_map& nodes() const { return nodes_; }

  /// The node `name` (null: none of that name).
  node_entry* find_node(const std::string& name);
  /// The node `name`, which must exist.
  node_entry& node(const std::string& name) { return nodes_.at(name); }
  /// The node `name`, added if it is new (the cluster file's nodes at the
  /// start, a node joining).
  node_entry& add_node(const std::string& name) { return nodes_[name]; }
  bool is_up(const std::string& name) const;
  /// The chief heard from node `name` at `now` (no-op: no such node).
  void heard_from(const std::string& name, double now);

  /// Node `name`'s agent registered: the node is up, and the agent's
  /// down message will name it.
  node_entry& register_agent(const std::string& name, node_agent_actor agent);
  /// The node whose agent was `addr`, which the chief no longer watches.
  std::optional<std::string> forget_agent(const caf::actor_addr& addr);
  /// Node `name` is down: nothing is placed there until it registers
  /// again. False when it was not up.
  bool mark_down(const std::string& name);

  // -- workers -------------------------------------------------------------

  worker_map& workers() { return workers_; }
  const worker_map& workers() const { return workers_; }
  worker_entry* find_worker(int32_t id);
  /// Worker `id`, which must exist.
  worker_entry& worker(int32_t id) { return workers_.at(id); }

  /// A new worker on `node` (its home); returns its id.
  int32_t add_worker(const std::string& node);
  /// Worker `id` runs as `handle`: its down message will name it.
  void worker_started(int32_t id, worker_actor handle);
  /// The worker that was `addr`, which the chief no longer watches.
  std::optional<int32_t> forget_worker(const caf::actor_addr& addr);
  /// Workers not finished, and their ids.
  int live_workers() const;
  std::vector<int32_t> live_ids() const;
  /// Workers not finished, by node.
  std::map<std::string, int> workers_per_node() const;
  /// The up node that holds the fewest workers, preferring nodes the
  /// cluster file gives workers (runtime/rules/placement); empty when
  /// none is up.
  std::string least_loaded_node() const;

  // -- supervision ---------------------------------------------------------

  /// The restart intensity (cluster.max_restarts within
  /// restart_window_s), set at the start.
  void limit_restarts(int max_restarts, double window_s) {
    restarts_ = std::make_unique<restart_limit>(max_restarts, window_s);
  }
  restart_limit& restarts() { return *restarts_; }
  /// Restarts so far; 0 before the start.
  int total_restarts() const { return restarts_ ? restarts_->total() : 0; }

  /// Training file `path` changed during the run and the feeder now
  /// leaves its samples out (data.on_file_change "skip"): true the first
  /// time it is named.
  bool skip_file(const std::string& path) {
    return skipped_files_.insert(path).second;
  }

private:
  node_map nodes_;
  std::map<caf::actor_addr, std::string> agent_of_;
  worker_map workers_;
  std::map<caf::actor_addr, int32_t> worker_of_;
  int32_t next_worker_ = 0;
  std::unique_ptr<restart_limit> restarts_;
  std::set<std::string> skipped_files_;
};

} // namespace troupe

// The chief's state, which its files share (their operations are in
// chief_ops.hpp). Private to the actor; nothing else includes it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/chief/chief.hpp"
#include "runtime/config/run_identity.hpp"
#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/metrics_log.hpp"
#include "runtime/params/param_layout.hpp"
#include "runtime/rules/restart_limit.hpp"
#include "runtime/rules/run_schedule.hpp"

namespace troupe {

/// Bounds on what a registering node may ask for.
constexpr size_t max_node_name = 64;
constexpr int32_t max_join_workers = 1024;
constexpr size_t max_workers = 4096;
constexpr size_t max_identity_bytes = 64 * 1024;
constexpr size_t max_run_id = 64;

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

inline const char* to_string(worker_phase p) {
  switch (p) {
    case worker_phase::starting: return "starting";
    case worker_phase::running: return "running";
    case worker_phase::waiting: return "waiting";
    case worker_phase::leaving: return "leaving";
    case worker_phase::finished: return "finished";
  }
  return "?";
}

/// The run's course, in order (a phase never goes back): every node of the
/// cluster file registers; the shards start (from the initial values, a
/// resumed or a taken-over checkpoint) and the workers are joined; the
/// workers train; the last steps settle, then the final checkpoint,
/// evaluation and summary; over (succeeded or failed). A shard recovery
/// is not a phase: it happens while training or finishing.
enum class run_phase : uint8_t {
  waiting_for_nodes,
  starting,
  training,
  finishing,
  ended
};

inline const char* to_string(run_phase p) {
  switch (p) {
    case run_phase::waiting_for_nodes: return "waiting_for_nodes";
    case run_phase::starting: return "starting";
    case run_phase::training: return "training";
    case run_phase::finishing: return "finishing";
    case run_phase::ended: return "ended";
  }
  return "?";
}

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
  int64_t staleness = 0;   ///< of its last report
  double seconds = 0;      ///< compute wall time of its steps
  double read_seconds = 0; ///< of which reading samples (worker_report)
  int64_t read_bytes = 0;
  double last_loss = 0;
  std::string last_error; ///< why it last failed; empty: it has not
  /// Since its last progress line: steps, samples, loss, compute time.
  int64_t window_steps = 0, window_samples = 0;
  double window_loss = 0, window_seconds = 0;
};

/// One OS process of the cluster.
struct node_entry {
  std::string host;
  uint16_t port = 0;
  uint16_t data_port = 0; ///< its data plane's; 0: none
  node_agent_actor agent; ///< null while down
  bool up = false;
  bool joined = false; ///< added to a running cluster
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

// The chief's state in parts, one per concern. Each part names the file
// that keeps it, and where another file changes it (chief_start.cpp sets
// every part up for the run; the rest only read it).

/// The nodes and the workers of the run: chief_registration.cpp (nodes
/// coming) and chief_placement.cpp (workers placed, restarted, moved);
/// chief.cpp forgets an actor that went down.
struct chief_members {
  std::map<std::string, node_entry> nodes;
  std::map<caf::actor_addr, std::string> agent_of;
  std::map<int32_t, worker_entry> workers;
  std::map<caf::actor_addr, int32_t> worker_of;
  int32_t next_worker = 0;
  std::unique_ptr<restart_limit> restarts;
  /// Training files that changed during the run and whose samples the
  /// feeder now leaves out (data.on_file_change "skip").
  std::set<std::string> skipped_files;
};

/// A shard's replica as the chief sees it (cluster.shard_replicas).
struct replica_entry {
  shard_actor handle;   ///< null while none runs
  std::string node;     ///< where it runs, or is being started
  bool in_step = false; ///< its primary says it holds every acked push
  bool placing = false; ///< an agent is starting it
  double asked = 0;     ///< when its primary was asked to copy to it
  /// Replicas the shard's primary gave up (a failed update, not a lost
  /// node): past max_replica_failures the shard runs without one.
  int failures = 0;
};

/// The shards and the feeder, and what they start from: chief_start.cpp;
/// chief_placement.cpp and chief_recovery.cpp replace a lost shard,
/// chief_takeover.cpp keeps a lost chief's.
struct chief_shards {
  std::vector<flat_range> ranges;
  std::vector<float> initial;              ///< a fresh run's initial parameters
  int64_t initial_version = 0;             ///< the shards' version at the start
  std::shared_ptr<checkpoint> resume_from; ///< until the shards have it
  std::vector<shard_actor> handles;
  std::vector<std::string> node_of; ///< each shard's node
  /// The shard map's generation: each move of the shards
  /// (chief_reshard.cpp) makes a new one.
  int64_t layout = 0;
  std::map<caf::actor_addr, size_t> index_of;
  feeder_actor feeder;
  /// cluster.shard_replicas (chief_replicas.cpp): each shard's replica,
  /// by shard.
  std::vector<replica_entry> replicas;
  std::map<caf::actor_addr, size_t> replica_index_of;
  /// Shards whose replica could not be placed (no other live node holds
  /// shards): said once, tried again when a node registers.
  std::set<size_t> replica_homeless;
};

/// The run's progress: chief_progress.cpp (reports, progress lines,
/// pauses). A recovery or a takeover sets the steps back to where the
/// shards are, a join of workers the feeder's plan, and the shell the
/// learning rate (chief_recovery, chief_takeover, chief_placement,
/// chief_shell).
struct chief_progress {
  metrics_log metrics;
  double t0 = 0;
  int64_t steps = 0; ///< batches trained (reports), resumed included
  int64_t samples = 0;
  /// Steps of one epoch of every worker: the whole set once (shared,
  /// sharded) or once per worker the run started with (replicated).
  int64_t per_epoch = 1;
  int64_t total_steps = 0; ///< the feeder's plan, as of the last join
  std::unique_ptr<run_schedule> schedule; ///< evaluations, checkpoints, logs
  // The progress window since the last log line.
  int64_t window_samples = 0;
  double window_loss = 0, window_start = 0;
  /// The training loss of the latest reports (a moving average over about
  /// ten); -1 before the first.
  double recent_loss = -1;
  /// The learning rate the shards were started with or last set to.
  double base_lr = 0;
  bool user_paused = false;
  /// Time paused by the shell, which the rates leave out: the seconds of
  /// pauses that ended, and when the current one began (-1: none).
  double paused_seconds = 0, paused_since = -1;
  /// Seconds of training since t0, pauses by the shell left out.
  double training_seconds(double now) const {
    return now - t0 - paused_seconds
           - (paused_since >= 0 ? now - paused_since : 0);
  }
};

/// Evaluations: chief_progress.cpp (chief_clicks.cpp scores a click
/// model); a recovery lets the next evaluation come at once.
struct chief_evaluation {
  std::unique_ptr<compute_backend> backend;
  /// Null for an external model, which troupe cannot compute.
  std::unique_ptr<model> evaluator;
  /// An external model's: the user's evaluation function (null: none,
  /// the run is not evaluated).
  external_evaluator external;
  /// The run's tensors and how its model is named (checkpoints, logs):
  /// the evaluator's, or those an external model declared.
  param_layout layout;
  std::string summary;
  /// An external model's: the digest of the parameters file's values the
  /// run started from (checkpoints keep it, so a resume can tell that the
  /// file was written anew since).
  std::string parameters_digest;
  bool evaluating = false;
  /// The last evaluation's headline (accuracy, or a regression's R^2)
  /// and loss; -1: none yet.
  double last_accuracy = -1, last_loss = 0;
  /// click: the ROC AUC of the last evaluation (-1: none yet).
  double last_auc = -1;
  int64_t last_eval_step = -1; ///< steps when the last evaluation began
  /// The shards' version the last evaluation scored (pull_params'): an
  /// update applied with no step of its own since (sync: the last update,
  /// short of pushes, applied as the workers leave) makes the final
  /// evaluation score again.
  int64_t last_eval_version = -1;
  double began = 0; ///< when it began (now_seconds())
  std::vector<std::function<void()>> waiters;
  /// What waits for the evaluation under way to end, not to run another
  /// (a move of the shards: an evaluation pulls from them in rounds).
  std::vector<std::function<void()>> when_done;
};

/// Checkpoints: chief_progress.cpp writes them, chief_start.cpp checks the
/// folder of a fresh run.
struct chief_checkpoints {
  bool taking = false;
  std::string last;
  /// When the checkpoint being taken paused the feeder (now_seconds()).
  double began = 0;
  std::vector<std::function<void()>> waiters;
  /// A run told to start over: unless the nodes name a run to take over,
  /// the folder's checkpoints of other runs are set aside before it
  /// starts.
  bool set_aside_pending = false;
};

/// Shard recovery: chief_recovery.cpp; chief.cpp ends the wait for lost
/// nodes when its timer fires, and work that must wait for a recovery
/// queues itself in `after` (when_recovered in chief_base.cpp).
struct chief_recovery {
  /// Workers stopped on purpose, and a counter that makes replies of the
  /// shards before a recovery recognisable.
  bool recovering = false;
  /// A recovery waits for the nodes of lost shards to register again;
  /// the wait is over (its timer fired).
  bool waiting_for_shard_nodes = false, shard_wait_over = false;
  std::set<int32_t> recycling;
  int64_t generation = 0;
  int recoveries = 0;
  int64_t lost_steps = 0;
  /// Lost shards whose replicas took over without a step lost.
  int takeovers = 0;
  /// Shards added or drained (chief_reshard.cpp), and the seconds leasing
  /// was paused for them.
  int moves = 0;
  double move_seconds = 0;
  std::vector<std::function<void()>> after;
};

/// A run taken over from a chief that was lost: chief_takeover.cpp (and
/// chief_registration.cpp, which learns the run's id from its nodes).
struct chief_takeover {
  /// The id its nodes named when they registered again, and what taking
  /// it over cost.
  std::string adopted_run;
  int64_t adopted_from_step = -1;   ///< its checkpoint's step; -1: none
  int64_t adoption_lost_steps = -1; ///< -1: not known (no live shard)
};

struct chief_state {
  static inline const char* name = "chief";
  chief_options opts;
  /// What makes a node part of this run: its id, and the training
  /// identity of the chief's config and its digest.
  std::string run_id;
  identity_map identity;
  std::string digest;
  caf::typed_response_promise<cluster_summary> reply;
  run_phase phase = run_phase::waiting_for_nodes;

  chief_members members;
  chief_shards shards;
  chief_progress progress;
  chief_evaluation eval;
  chief_checkpoints checkpoints;
  chief_recovery recovery;
  chief_takeover takeover;

  /// Moves the run on to `p`; a phase never goes back.
  void enter(run_phase p) {
    if (p > phase)
      phase = p;
  }
  bool nodes_ready() const { return phase >= run_phase::starting; }
  bool training() const { return phase >= run_phase::training; }
  bool stopping() const { return phase >= run_phase::finishing; }
  bool ended() const { return phase == run_phase::ended; }

  /// The node this process is: the cluster file's chief node, or "local"
  /// in the embedded mode.
  std::string own_node() const {
    return opts.cfg.cluster.distributed() ? opts.cfg.cluster.chief_node
                                          : std::string{"local"};
  }
};

using chief_self = chief_self_actor::stateful_pointer<chief_state>;

} // namespace troupe

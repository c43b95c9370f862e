// The shell's part of the protocol (the chief's interface, in
// chief_protocol.hpp, takes these; the atoms are in ids.hpp, the type IDs
// in the chief's block): what troupe-shell
// names in a command, and the cluster view the chief answers `status`
// with. troupe-shell parses the text and renders these (apps/shell/shell_*),
// as CAF's distributed_calculator parses in its client; the chief only
// carries out typed requests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/meta/type_name.hpp"
#include "runtime/base/process_usage.hpp"

namespace troupe {

/// The kinds of actor a shell command names.
enum class actor_role : uint8_t { chief, feeder, shard, worker };

inline const char* to_string(actor_role r) {
  switch (r) {
    case actor_role::chief: return "chief";
    case actor_role::feeder: return "feeder";
    case actor_role::shard: return "shard";
    case actor_role::worker: return "worker";
  }
  return "?";
}

/// "chief", "feeder", "shard:N", "worker:N".
struct actor_ref {
  actor_role role = actor_role::chief;
  int32_t index = -1; ///< shards and workers
};

inline std::string to_string(const actor_ref& a) {
  std::string out = to_string(a.role);
  if (a.role == actor_role::shard || a.role == actor_role::worker)
    out += ":" + std::to_string(a.index);
  return out;
}

/// What the shell may steer on the shards.
enum class tune_key : uint8_t {
  lr, ///< the optimizer's base learning rate (> 0)
};

inline const char* to_string(tune_key k) {
  switch (k) {
    case tune_key::lr: return "lr";
  }
  return "?";
}

/// The run, as the chief sees it.
struct run_view {
  std::string name, run_id, config_digest, mode, phase;
  std::string own_node; ///< the chief's node ("local": embedded)
  std::string optimizer;
  int64_t steps = 0;
  int64_t samples = 0; ///< trained, all workers together
  double epoch = 0;
  double seconds = 0; ///< since training began
  double examples_per_sec = 0;
  double test_accuracy = -1; ///< -1: no evaluation yet
  /// The steps the run ends at (epochs, or the step limit if lower).
  int64_t total_steps = 0;
  /// The shards' learning rate now: the base (as the config, or as the
  /// shell last set it) through the schedule at this step.
  double learning_rate = 0;
  double loss = -1; ///< recent training loss; -1: none yet
  /// The seconds left at this chief's rate so far; -1: no rate yet.
  double eta_seconds = -1;
  bool paused = false, recovering = false, stopping = false;
  int32_t restarts = 0, shard_recoveries = 0;
  int64_t lost_steps = 0;
  /// Taken over from a lost chief: the checkpoint's step and the steps
  /// that cost (-1: not known, the shards died too).
  bool taken_over = false;
  int64_t taken_from_step = -1, taken_lost_steps = -1;
  std::string last_checkpoint;
  /// The last checkpoint's step, seconds since it was written, and the
  /// seconds training stood still for it (-1: none yet by this chief).
  int64_t checkpoint_step = -1;
  double checkpoint_age = -1, checkpoint_took = -1;
  /// training.export: the last export's sequence (-1: none yet), kind
  /// ("full", "delta"), step, seconds since it was written (the lag of a
  /// server that applies each one), rows, tombstones and bytes.
  int64_t export_sequence = -1, export_step = -1;
  std::string export_kind;
  double export_age = -1;
  int64_t export_rows = 0, export_evicted = 0, export_bytes = 0;
  /// data.follow (stream_parts -1: not followed): the parts in the plan,
  /// those known and waiting, and the progressive validation so far: per
  /// sample (the samples trained, the mean of their loss before their
  /// step), and per part (each scored whole before its first step: their
  /// mean log-loss, the last one's log-loss and AUC).
  int64_t stream_parts = -1, stream_waiting = 0, progressive_samples = 0;
  double progressive_loss = -1, parts_loss = -1, last_part_loss = -1,
         last_part_auc = -1;
  std::string last_part;
  /// Once the run is over (the chief's port keeps its last view for a
  /// page that watches): "done" or "failed", and why it failed; both
  /// empty while it runs.
  std::string outcome, error;
};

struct node_view {
  std::string name, address;
  bool up = false, chief = false, joined = false;
  std::vector<int32_t> shards, workers;
  /// Its process's resident memory, heap in use (process_usage) and CPU
  /// time; -1: it did not answer.
  int64_t resident_bytes = -1, heap_bytes = -1;
  double cpu_seconds = -1;
  /// Its process (-1, empty: it did not answer): a user's Python worker
  /// process shows as its interpreter ("python3").
  int64_t pid = -1;
  std::string host, program;
  /// Its process's start in seconds since the epoch (-1: it did not
  /// answer), and the seconds since the chief last heard from the node:
  /// its registration, its agent's answer, a report of one of its workers
  /// (-1: never). A node that answers is heard as the view is made; one
  /// whose links are cut ages until the node timeout declares it lost.
  double started_unix = -1, heard_age = -1;
};

/// Node `v`'s process as it (its agent, or this process) answered.
inline void take_usage(node_view& v, const process_usage& u) {
  v.started_unix = u.started_unix > 0 ? u.started_unix : -1;
  v.resident_bytes = u.resident_bytes;
  v.heap_bytes = u.heap_bytes;
  v.cpu_seconds = u.cpu_seconds;
  v.pid = u.pid;
  v.host = u.host;
  v.program = u.program;
}

struct worker_view {
  int32_t id = 0;
  std::string node, state;
  int64_t step = 0, clock = 0, samples = 0, staleness = 0, window_steps = 0;
  double examples_per_sec = 0, loss = 0, compute_seconds = 0;
  /// The mean staleness of its steps, all its incarnations.
  double mean_staleness = 0;
  /// Of its steps' wall time, what reading their samples took, and the
  /// bytes read (worker_report).
  double read_seconds = 0;
  int64_t read_bytes = 0;
  int32_t restarts = 0;
  /// Its node's process, as node_view has it.
  int64_t pid = -1;
  std::string host, program;
  /// Why it last failed (empty: it has not).
  std::string last_error;
};

/// One embedding table on one shard (see shard_stats).
struct table_view {
  std::string name;
  int64_t rows = 0, row_bytes = 0, rows_pulled = 0, rows_pushed = 0;
  int64_t rows_made = 0, rows_rejected = 0, rows_evicted = 0;
  int64_t filter_used = 0, filter_counters = 0; ///< see table_counts
};

struct shard_view {
  int32_t id = 0;
  std::string node, state;     ///< running, restoring or down
  uint64_t begin = 0, end = 0; ///< its range of the flat vector
  bool answered = false;       ///< the counters below came from the shard
  int64_t version = 0, accepted = 0, stale = 0, refused = 0;
  int64_t ssp_pulls = -1, ssp_max_lead = -1;  ///< -1: not an ssp run
  int64_t pulled_bytes = 0, pushed_bytes = 0; ///< see shard_stats
  /// Embedding tables (see shard_stats); rows -1: the model has none.
  int64_t rows = -1, row_bytes = 0, rows_pulled = 0, rows_pushed = 0;
  /// cluster.shard_replicas: the replica's node (empty: none), its state
  /// ("starting", "copying", "in step"; "none" when it has none), the ops
  /// the primary sent it that it has not answered yet (replication lag),
  /// its version as of its last answer, and the table rows copied to it.
  std::string replica_node, replica;
  int64_t replica_lag = 0, replica_version = -1, replica_rows = 0;
  /// Each table's share of rows .. rows_pushed, in the run's order.
  std::vector<table_view> tables;
};

struct feeder_view {
  bool answered = false;
  int64_t acked = 0, position = 0;
  std::vector<int64_t> epoch_samples;
};

/// Everything `status`, `nodes`, `workers`, `shards` and `inspect` show.
struct cluster_view {
  run_view run;
  std::vector<node_view> nodes;
  std::vector<shard_view> shards;
  std::vector<worker_view> workers;
  feeder_view feeder;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_ref& x) {
  return f(caf::meta::type_name("actor_ref"), x.role, x.index);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_view& x) {
  return f(caf::meta::type_name("run_view"), x.name, x.run_id, x.config_digest,
           x.mode, x.phase, x.own_node, x.optimizer, x.steps, x.samples,
           x.epoch, x.seconds, x.examples_per_sec, x.test_accuracy,
           x.total_steps, x.learning_rate, x.loss, x.eta_seconds, x.paused,
           x.recovering, x.stopping, x.restarts, x.shard_recoveries,
           x.lost_steps, x.taken_over, x.taken_from_step, x.taken_lost_steps,
           x.last_checkpoint, x.checkpoint_step, x.checkpoint_age,
           x.checkpoint_took, x.export_sequence, x.export_step, x.export_kind,
           x.export_age, x.export_rows, x.export_evicted, x.export_bytes,
           x.stream_parts, x.stream_waiting, x.progressive_samples,
           x.progressive_loss, x.parts_loss, x.last_part_loss, x.last_part_auc,
           x.last_part, x.outcome, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_view& x) {
  return f(caf::meta::type_name("node_view"), x.name, x.address, x.up, x.chief,
           x.joined, x.shards, x.workers, x.resident_bytes, x.heap_bytes,
           x.cpu_seconds, x.pid, x.host, x.program, x.started_unix,
           x.heard_age);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_view& x) {
  return f(caf::meta::type_name("worker_view"), x.id, x.node, x.state, x.step,
           x.clock, x.samples, x.staleness, x.mean_staleness, x.window_steps,
           x.examples_per_sec, x.loss, x.compute_seconds, x.read_seconds,
           x.read_bytes, x.restarts, x.pid, x.host, x.program, x.last_error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_view& x) {
  return f(caf::meta::type_name("table_view"), x.name, x.rows, x.row_bytes,
           x.rows_pulled, x.rows_pushed, x.rows_made, x.rows_rejected,
           x.rows_evicted, x.filter_used, x.filter_counters);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_view& x) {
  return f(caf::meta::type_name("shard_view"), x.id, x.node, x.state, x.begin,
           x.end, x.answered, x.version, x.accepted, x.stale, x.refused,
           x.ssp_pulls, x.ssp_max_lead, x.pulled_bytes, x.pushed_bytes, x.rows,
           x.row_bytes, x.rows_pulled, x.rows_pushed, x.replica_node, x.replica,
           x.replica_lag, x.replica_version, x.replica_rows, x.tables);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feeder_view& x) {
  return f(caf::meta::type_name("feeder_view"), x.answered, x.acked, x.position,
           x.epoch_samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_view& x) {
  return f(caf::meta::type_name("cluster_view"), x.run, x.nodes, x.shards,
           x.workers, x.feeder);
}

} // namespace troupe

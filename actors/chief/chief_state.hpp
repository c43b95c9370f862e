// The chief's state, which its files share (their operations are in
// chief_ops.hpp). Private to the actor; nothing else includes it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/chief/chief.hpp"
#include "actors/chief/chief_members.hpp"
#include "actors/chief/node_answers.hpp"
#include "actors/chief/recovery_state.hpp"
#include "actors/chief/run_progress.hpp"
#include "actors/chief/shard_placement.hpp"
#include "runtime/config/run_identity.hpp"
#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/params/param_layout.hpp"
#include "runtime/sparse/table_export.hpp"

namespace troupe {

/// Bounds on what a registering node may ask for.
constexpr size_t max_node_name = 64;
constexpr int32_t max_join_workers = 1024;
constexpr size_t max_workers = 4096;
constexpr size_t max_identity_bytes = 64 * 1024;
constexpr size_t max_run_id = 64;

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

// The chief's state in parts, one per concern. The members, the shards'
// placement, the progress and the recoveries are types of their own
// (chief_members.hpp, shard_placement.hpp, run_progress.hpp,
// recovery_state.hpp), each with the functions that change it; the parts
// below are plain, each naming the file that keeps it.
// chief_start.cpp sets every part up for the run.

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
  /// The last one's step, when it was written (now_seconds()) and how long
  /// training stood still for it (-1, 0: none yet).
  int64_t last_step = -1;
  double last_written = 0, last_took = 0;
  /// When the checkpoint being taken paused the feeder (now_seconds()).
  double began = 0;
  /// What waits for the feeder to be free: a checkpoint or an export
  /// asked for while one is written.
  std::vector<std::function<void()>> waiters;
  /// Runs (and forgets) them, once the one written is done.
  void wake_waiters() {
    auto ready = std::move(waiters);
    waiters.clear();
    for (auto& f : ready)
      f();
  }
  /// A run told to start over: unless the nodes name a run to take over,
  /// the folder's checkpoints of other runs are set aside before it
  /// starts.
  bool set_aside_pending = false;
};

/// Exports of the tables (chief_exports.cpp).
struct chief_exports {
  bool taking = false;
  /// The next export's sequence, and whether it starts a chain (a full
  /// export): the first of a chief, and after rows were put back or
  /// moved.
  int64_t sequence = 0;
  bool full_next = true;
  /// Per table, per shard: the pushes at the last export, which the next
  /// delta follows.
  std::vector<std::vector<int64_t>> since;
  export_manifest manifest;
  int64_t next_step = 0; ///< every_steps: the next one's
  double last_time = 0;  ///< now_seconds() of the last one (or the start)
  /// The last one's: step, unix time, kind, rows, tombstones, bytes, and
  /// the seconds training stood still for it.
  export_entry last;
  double last_seconds = 0;
  double last_written = 0; ///< now_seconds() when it was written
};

/// A folder of training parts that grows (data.follow): chief_follow.cpp.
struct chief_follow {
  /// The parts in the feeder's plan, in order, and their samples (the
  /// plan's set); the node agents hold these parts too.
  std::vector<std::string> taken;
  int64_t samples = 0;
  bool taking = false;  ///< a part is being scored or handed out
  bool closed = false;  ///< no more parts: the plan ends with its tail
  bool ticking = false; ///< the folder is listed every poll_seconds
  /// Files that matched at the last listing and are not known yet, by
  /// path: their size and modification time then. A part is known once
  /// it stayed the same for one listing (it was written whole).
  std::map<std::string, std::pair<int64_t, int64_t>> candidates;
  std::set<std::string> refused; ///< parts that came out of name order
  double last_part_time = 0;     ///< now_seconds() when a part last came
  double last_listing = 0;       ///< now_seconds() of the last listing
  /// Progressive validation, per sample: the workers' loss of each
  /// sample before the step that trains on it (one pass: it never
  /// trained on it before), summed over the samples trained.
  int64_t step_samples = 0;
  double step_loss_sum = 0;
  /// Per part: each part scored whole before its first step.
  int64_t scored_parts = 0, scored_samples = 0;
  double loss_sum = 0;      ///< each part's log-loss times its samples
  double score_seconds = 0; ///< what scoring the last part took
  struct part_score {
    std::string name;
    int64_t samples = 0;
    double loss = 0, auc = 0;
  } last;
  bool active() const { return ticking || !taken.empty(); }
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
  /// Answers awaited from member nodes, given up when their node is lost.
  node_answers answers;
  shard_placement shards;
  run_progress progress;
  chief_evaluation eval;
  chief_checkpoints checkpoints;
  chief_exports exports;
  chief_follow follow;
  recovery_state recovery;
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

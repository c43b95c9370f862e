// The chief's operations, shared by its files. Private to the actor:
// nothing outside actors/chief/*.cpp includes it.
//
// The files call downward only, so they form no circle:
//   chief_base (logging, ending the run, pulling the parameters)
//   < chief_placement (where workers and shards go), chief_checkpoints
//     < chief_evaluation < chief_finish (the final checkpoint, evaluation
//     and summary; a stop) < chief_progress (reports, pause)
//   < chief_takeover (keeping the shards that outlived a chief or a link)
//   < chief_replicas (each shard's replica: placed, in step, replaced)
//   < chief_recovery (failed and leaving workers, lost shards)
//   < chief_start (shards, feeder and workers at the start; taking over a
//     lost chief's run)
//   < chief_registration (nodes registering, a stop, a node leaving)
//   < chief.cpp (the actor's behavior) and chief_shell.cpp (the shell).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "actors/chief/chief_state.hpp"
#include "actors/fan_out.hpp"
#include "models/trainer.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/rules/takeover.hpp"

namespace troupe::chief_ops {

// -- chief_base.cpp ----------------------------------------------------------

/// A request's timeout in this run (cluster.request_timeout_ms).
caf::timespan timeout_of(chief_self self);

/// Prints a line of the run's log; `tagged` false: without the
/// "[INSECURE links]" mark (the summary table, which scripts read).
void say(chief_self self, const std::string& line, bool tagged = true);

/// This run's id and config digest, as its checkpoints record them.
run_stamp stamp_of(chief_self self);

/// printf into a std::string (at most 511 characters).
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

/// `steps` in epochs.
double epoch_of(chief_self self, int64_t steps);

/// Where checkpoint `ck` left the feeder: its step and plan text.
feeder_position feeder_position_of(const checkpoint& ck);

/// Stops every actor of the run, then the chief.
void shut_down(chief_self self);

/// Tells every node agent that the run is over, with `reason` (none: it
/// succeeded), so that each stops what it started and its process exits
/// with the run's outcome; then runs `then`. A node that does not answer
/// within two seconds is not waited for.
void release_nodes(chief_self self, const caf::error& reason,
                   std::function<void()> then);

/// Ends the run with `err`: logged, every node released with it, the
/// reply delivered, every actor stopped. Once.
void fail_run(chief_self self, caf::error err);

/// Pulls every shard (as worker -1) into one host vector.
void pull_params(chief_self self,
                 std::function<void(std::vector<float>&, int64_t)> done,
                 std::function<void()> lost = nullptr);

/// Runs `f` now, or after the shard recovery in progress.
void when_recovered(chief_self self, std::function<void()> f);

// -- chief_placement.cpp -----------------------------------------------------

/// A node's process is gone (its agent's link broke, or a request to it
/// failed): nothing more is placed there until it registers again.
void node_lost(chief_self self, const std::string& name,
               const std::string& why);

/// Starts worker `id` through the agent of its node, or of another node
/// when its own is down (on_node_loss "move"), or leaves it waiting for
/// its node to come back ("wait").
void place_worker(chief_self self, int32_t id);

/// Joins worker ids on every shard; `then` runs once all have answered.
void join_now(chief_self self, std::vector<int32_t> ids,
              std::function<void()> then);

/// Gives workers `ids` their streams in the feeder (replicated, sharded)
/// and takes its new total of steps, then `then`.
void join_on_feeder(chief_self self, std::vector<int32_t> ids,
                    std::function<void()> then);

/// join_now, or after the shard recovery under way (which joins and
/// starts every worker it knows, these included).
void join_on_shards(chief_self self, std::vector<int32_t> ids,
                    std::function<void()> then);

/// sync with replicas_to_aggregate 0: the count follows the workers.
void retune_aggregate(chief_self self);

/// Appends `n` fresh worker ids on `node` to `ids`.
void new_worker_ids(chief_self self, const std::string& node, int n,
                    std::vector<int32_t>& ids);

/// Adds `n` workers on `node` to the running cluster; returns their ids.
std::vector<int32_t> add_workers(chief_self self, const std::string& node,
                                 int n);

/// Per shard, where a worker on `node` reaches it on the data plane
/// ("host:port"; empty: in the worker's own process).
std::vector<std::string> data_links(chief_self self, const std::string& node);
/// The parts of shard `i`'s slice that the model's buffers hold, as
/// begin, end pairs from the slice's start (shard_spawn::buffers).
std::vector<uint64_t> buffer_bounds(chief_self self, size_t i);

/// Asks the agent of `node` to start what `spawn` describes (a worker, a
/// shard or a replica); the request, to be answered with its handle.
template <class Spawn>
auto place_on(chief_self self, const std::string& node, Spawn spawn) {
  return self->request(self->state.members.node(node).agent, timeout_of(self),
                       place_atom_v, std::move(spawn));
}

/// Runs `ok` with the reply to request `h`, made to node `node`, or
/// `failed` with its error, or with node_unreachable as soon as the node
/// is lost (node_answers): whichever comes first, once.
template <class Reply, class Handle, class Ok, class Failed>
void answer_from(chief_self self, const std::string& node, Handle h, Ok ok,
                 Failed failed) {
  auto done = self->state.answers.await(node, [=]() mutable {
    auto err = make_error(errc::node_unreachable,
                          "node " + node + " was lost before it answered");
    failed(err);
  });
  h.then(
    [=](Reply& r) mutable {
      if (node_answers::first(done))
        ok(r);
    },
    [=](caf::error& err) mutable {
      if (node_answers::first(done))
        failed(err);
    });
}

/// Starts shard `i` on `node` through its agent with `state`.
void place_shard(chief_self self, size_t i, const std::string& node,
                 shard_state_msg state, std::function<void()> then);

/// The node for a shard whose node is gone: the up node meant for shards
/// that holds the fewest, else the chief's own.
std::string shard_home(chief_self self, size_t i);

// -- chief_checkpoints.cpp ---------------------------------------------------

/// Pauses the feeder until every lease is acked, snapshots every shard at
/// that one step, writes the file, resumes.
void checkpoint_now(chief_self self, std::function<void()> then);

/// The dense part of a checkpoint of the shards' `parts` at feeder
/// position `from`, its metadata set (what an export writes too).
caf::expected<checkpoint>
dense_checkpoint_of(chief_self self, const feeder_position& from,
                    std::vector<shard_state_msg>& parts);

/// Writes the next export of the tables (training.export): the feeder
/// paused as for a checkpoint, each table's rows changed since the last
/// export (all of them when a new chain starts) and the keys evicted,
/// then the dense file, then the manifest; then `then`. A shard lost
/// meanwhile drops it (the next one is due again).
void export_now(chief_self self, std::function<void()> then);

// -- a folder that grows (chief_follow) ---------------------------------------

/// data.follow: lists the folder now and every poll_seconds, and takes
/// its parts into the plan as training needs them.
void start_following(chief_self self);
/// The folder's listing is due (the chief's follow tick).
void on_follow_tick(chief_self self);
/// Steps were trained: the next part is taken when the plan runs low.
void follow_on_report(chief_self self, const worker_report& r);
/// A restored plan stands at batch `batches`: the parts that hold its
/// samples are taken first (trained already: not scored), then `then`.
void follow_cover(chief_self self, int64_t batches, std::function<void()> then);
/// A node agent registered: it learns the parts in the plan.
void follow_tell_agent(chief_self self, const node_agent_actor& agent);
/// A checkpoint records the parts taken and the progressive score; a
/// resumed run checks them against the folder and goes on counting.
void follow_to_checkpoint(chief_self self, checkpoint& ckpt);
/// The run's summary line of a followed folder (nothing otherwise).
void follow_summary(chief_self self);
caf::error follow_from_checkpoint(chief_self self, const checkpoint& ckpt);

/// Whether an export is due at the steps trained now (every_steps) or
/// the time (every_seconds).
bool export_due(chief_self self);

/// The shards' rows were put back or moved: the next export starts a new
/// chain with a full export.
void exports_start_over(chief_self self);

/// Reads the export folder's manifest, if any: this chief's exports
/// follow its last (a new chain, starting with a full export). Its
/// error when the folder holds a manifest that cannot be read.
caf::error open_exports(chief_self self);

// -- chief_evaluation.cpp ----------------------------------------------------

/// Evaluates the current parameters on the test set, then runs `then`.
/// One evaluation at a time: a request during one waits for it and then
/// evaluates again unless no step has been trained since it began.
void evaluate_now(chief_self self, std::function<void()> then);

/// Runs what waited for the evaluation under way to end (eval.when_done).
void run_when_evaluated(chief_self self);

// -- chief_finish.cpp --------------------------------------------------------

/// When no worker runs or is being started, the ones waiting for their
/// node are let go (nothing is left for them, or the run was stopped),
/// and with no worker left the run finishes.
void release_waiting_if_idle(chief_self self);

/// The feeder leases nothing more; the run ends after the last steps.
/// `who` asked for it ("the shell", "SIGTERM").
void stop_run(chief_self self, const std::string& who);

// -- chief_progress.cpp ------------------------------------------------------

/// Stops feeding (pause) or feeds again (resume), for the shell.
void set_user_pause(chief_self self, bool paused);

/// A worker's report: progress lines, metrics, and the evaluations and
/// checkpoints that come due.
void on_report(chief_self self, const worker_report& r);

// -- chief_takeover.cpp ------------------------------------------------------

/// The live shards on the up nodes, adopted by this chief, with the node
/// of each and the verdict on keeping them (runtime/rules/takeover).
struct live_found {
  std::vector<std::string> nodes;
  std::vector<shard_actor> handles;
  std::vector<shard_history> histories;
  takeover_verdict verdict;
};

/// Adopts the shards that live on the up nodes (every node's agent asked;
/// one that does not answer holds none) and judges them against a
/// checkpoint at shard version `since`; `then` gets what was found. In
/// sync and easgd modes the verdict is never to keep them. `any_count`: a
/// chief taking a lost chief's run over, which keeps live shards of
/// another count than its file's (shards were added or drained) when
/// they are a whole set of that count, each with its slice's size.
void adopt_live_shards(chief_self self, int64_t since,
                       std::function<void(live_found&)> then,
                       bool any_count = false);

/// Stops every live shard `found` that is not one of the run's shards now
/// (the verdict was to restore: the shards start anew, and a copy left
/// alive elsewhere would make the next takeover find one shard twice).
void stop_live_shards_left(chief_self self, const live_found& found);

/// The live shards of a verdict to keep them become the run's shards (the
/// log says so); the feeder goes on from the checkpoint's `position` with
/// their batches done and the step count follows; then `then`.
void keep_live_shards(chief_self self, live_found& found,
                      feeder_position position, std::function<void()> then);

// -- chief_replicas.cpp ------------------------------------------------------

/// Whether the run keeps replicas of its shards (cluster.shard_replicas).
bool replicated(chief_self self);

/// Starts a replica for every live shard that has none (on a live node
/// meant for shards other than the primary's) and asks the primary to
/// keep it in step; says so for a shard that has nowhere to put one.
void place_replicas(chief_self self);

/// A primary's news of its replica (shard_actor's replicate): in step at
/// `version`, or (-1) given up, which stops it to be started anew.
void on_replica_news(chief_self self, int32_t shard, int64_t version,
                     const std::string& text);

/// Shard i's replica went down: it is started anew elsewhere (or once a
/// recovery under way is over).
void on_replica_down(chief_self self, size_t i, const caf::error& reason);

// -- chief_recovery.cpp ------------------------------------------------------

/// Restarts worker `id` after a failure: counted against the restart
/// intensity, its leases back to the feeder, started again.
void restart_worker(chief_self self, int32_t id, const caf::error& reason);

/// The worker `id` of a node that leaves the run is down: once every
/// worker there is, the node is answered and may go.
void finish_leave_if_done(chief_self self, const std::string& name);

/// A worker ended: finished, stopped for a recovery or a leaving node,
/// cut off from a shard (a grace before it counts), or failed (restarted).
void on_worker_down(chief_self self, int32_t id, const caf::error& reason);

/// One shard's slice of a checkpoint.
shard_state_msg slice_of(chief_self self, const checkpoint& ck, size_t i,
                         int64_t version);

/// The shard version a checkpoint records; troupe-train's files have
/// none, and there the step is the optimizer's step.
caf::expected<int64_t> version_of(const checkpoint& ck,
                                  const std::string& path);

/// The shards hold the run again (a recovery or a move is over): every
/// worker not finished is joined on them and placed if it is not running,
/// leasing resumes (unless the shell paused it), what waited runs and the
/// replicas are placed.
void resume_after_recovery(chief_self self);

/// Every worker is stopped after a shard was lost: once the lost shards'
/// nodes are up again (or shard_node_wait is over), the live shards are
/// kept if they hold every step since the newest checkpoint; otherwise
/// every shard (the lost ones started anew) and the feeder are restored
/// from it. The workers then start again.
void restore_after_loss(chief_self self);

/// The nodes of lost shards that are down, as "a, b" (empty: none).
std::string lost_shard_nodes_down(chief_self self);

/// Every worker is stopped after shards were lost: the replicas of the
/// lost shards take over (through their agents); when each was in step,
/// the stopped workers' leases go back and the run goes on with no step
/// lost, else (or with no replica) restore_after_loss.
void after_workers_stopped(chief_self self);

/// A shard went down: stop every worker, then after_workers_stopped.
void on_shard_down(chief_self self, size_t i, const caf::error& reason);

// -- chief_start.cpp ---------------------------------------------------------

/// The nodes that have not registered yet, as "name (host:port)".
std::string missing_nodes(chief_self self);

/// Once every node of the file is up: the shards (after taking over the
/// run the nodes named, if they named one).
void start_when_nodes_ready(chief_self self);

/// Reads the newest checkpoint when resuming; sets up the nodes.
void start(chief_self self);

// -- chief_registration.cpp --------------------------------------------------

/// A node process announces itself (node_registration in
/// node_agent_protocol.hpp).
caf::result<std::string, std::string> on_register(chief_self self,
                                                  node_registration r);

/// SIGINT or SIGTERM on the chief's process: the shell's "stop"; before
/// training began, the run ends without training.
void on_stop_request(chief_self self, const std::string& who);

/// A member node leaves the run (SIGINT/SIGTERM there): nothing more is
/// placed on it, its workers finish their steps in flight, their leases
/// go back and they start again elsewhere (on_node_loss "move") or wait
/// for the node ("wait"). A node that holds shards cannot leave: its
/// shards would have nowhere to go without losing steps.
caf::result<bool> on_leave(chief_self self, const std::string& name);

// -- chief_shell.cpp (the shell's typed requests; see chief_actor) -----------

/// A steering request the chief does not carry out, and why (the shell
/// prints `what`; the run goes on as it was).
caf::error refused(const std::string& what);

caf::result<cluster_view> shell_status(chief_self self);
caf::result<std::vector<int32_t>, std::string>
shell_add_workers(chief_self self, int32_t n, std::string node);
caf::result<bool> shell_kill(chief_self self, const actor_ref& target);
caf::result<std::string> shell_checkpoint(chief_self self);
caf::result<std::string> shell_export(chief_self self);
caf::result<double> shell_tune(chief_self self, tune_key key, double value);
caf::result<bool> shell_pause(chief_self self, bool paused);
caf::result<bool> shell_stop(chief_self self);

// -- chief_reshard.cpp -------------------------------------------------------

/// Adds a shard on `node` while the run trains: the parameters and table
/// rows are spread anew over one shard more, and the workers get the new
/// map without restarting. The reply (once the move is done) says what
/// moved and how long leasing paused; a refusal says why not now.
caf::result<std::string> shell_add_shard(chief_self self,
                                         const std::string& node);
/// The same, removing shard `shard` (those after it are numbered one
/// lower).
caf::result<std::string> shell_drain_shard(chief_self self, int32_t shard);

// -- click models (chief_clicks) ---------------------------------------------

/// Scores the click model on `data` with the dense parameters the
/// evaluator holds and the rows the shards hold now: in batches, each
/// pulling its distinct rows from the shards that hold them. `done` gets
/// the accuracy (click probability above 0.5), the mean log-loss and the
/// ROC AUC; `lost` runs when a shard was lost meanwhile (a recovery).
void evaluate_clicks(chief_self self, const dataset& data,
                     std::function<void(eval_result, double auc)> done,
                     std::function<void()> lost);

// -- embedding tables in checkpoints (chief_tables) --------------------------

/// Whether the run's model has embedding tables on the shards (a click
/// model's one, an external model's /model/tables).
bool has_tables(chief_self self);

/// The file of each of the run's tables (numbered as embedding_tables
/// numbers them) beside the checkpoint at `checkpoint_path`
/// (runtime/sparse/table_file.hpp names them).
std::vector<std::string> table_paths(chief_self self,
                                     const std::string& checkpoint_path);

/// What a checkpoint's metadata "tables" says of the files at `paths`:
/// their names, comma-separated.
std::string tables_metadata(const std::vector<std::string>& paths);

/// Streams every shard's rows of each table to its file beside the
/// checkpoint at `checkpoint_path` (table_paths), table after table, piece
/// by piece (runtime/sparse/table_file.hpp); the feeder is paused, so the
/// rows stand still. `done` gets the error of the write; `lost` runs when
/// a shard was lost meanwhile.
void write_tables(chief_self self, const std::string& checkpoint_path,
                  std::function<void(caf::error)> done,
                  std::function<void()> lost);

/// The rows of `rows` (ids, `dim` floats of values and of each slot per
/// id, and ages and uses if it has them) as table `table`'s, in one chunk
/// per shard that shard_of_row places them on now, one shard per entry of
/// `pushes` (each chunk carries its shard's: Adam's bias correction counts
/// a shard's pushes).
std::vector<row_chunk> spread_rows(const row_chunk& rows, size_t dim,
                                   const std::vector<int64_t>& pushes,
                                   int32_t table);

/// Puts the rows of checkpoint `ckpt`'s table files (metadata "tables",
/// in the checkpoint dir) back into the shards, each row on the shard
/// shard_of_row places it now; each file is checked against its table's
/// config first. `done` gets the error. A checkpoint without tables leaves
/// the shards' tables empty.
void restore_tables(chief_self self, const checkpoint& ckpt,
                    std::function<void(caf::error)> done);

// -- fan-out to the shards (chief_base) --------------------------------------

/// Sends shard `i` the request `xs...`; the request, to be answered.
template <class... Ts>
auto ask_shard(chief_self self, size_t i, Ts&&... xs) {
  return self->request(self->state.shards.handles()[i], timeout_of(self),
                       std::forward<Ts>(xs)...);
}

/// Requests `make(i)` from every shard; `done` gets the replies in shard
/// order once all are in. An error fails the run, unless the shards were
/// replaced meanwhile (a recovery) and `lost` is given: then `lost` runs.
template <class Reply, class Make>
void ask_all_shards(chief_self self, Make make,
                    std::function<void(std::vector<Reply>&)> done,
                    std::function<void()> lost = nullptr) {
  auto gen = self->state.recovery.generation();
  ask_all<Reply>(self->state.shards.count(), std::move(make), std::move(done),
                 [=](caf::error& err) {
                   auto& st = self->state;
                   if (lost && st.recovery.stale(gen))
                     return lost();
                   fail_run(self, std::move(err));
                 });
}

} // namespace troupe::chief_ops

// Starting a run: the model and its split, a resumed or taken-over
// checkpoint, the feeder, the nodes to wait for, then shards and workers.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "actors/chief/chief_ops.hpp"
#include "actors/data_plane/data_link.hpp"
#include "actors/feeder.hpp"
#include "actors/node_agent.hpp"
#include "actors/timing.hpp"
#include "models/trainer.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/declared_params.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/compute/cpu_backend.hpp"

namespace troupe::chief_ops {

namespace {

/// A resume of an external model whose parameters file was written after
/// the checkpoint, with values other than those the run started from (a
/// script run again writes its model anew): the run goes on from the
/// checkpoint, and the log says so and how to start from the file.
void warn_if_parameters_rewritten(chief_self self, const checkpoint& ck,
                                  const std::string& ckpt_path) {
  auto& st = self->state;
  const auto& file = st.opts.cfg.model.parameters;
  auto it = ck.metadata.find("parameters_digest");
  std::string started = it == ck.metadata.end() ? "" : it->second;
  std::error_code ec1, ec2;
  auto written = std::filesystem::last_write_time(file, ec1);
  auto saved = std::filesystem::last_write_time(ckpt_path, ec2);
  if (!ec1 && !ec2 && written > saved && started != st.eval.parameters_digest)
    say(self, "warning: " + file + " was written after " + ckpt_path
                + " and holds other values than this run started from: "
                  "the run resumes the checkpoint and leaves the file "
                  "unread; "
                + st.opts.words.fresh + " starts over from the file");
  if (!started.empty()) // the run's own start, whatever the file says now
    st.eval.parameters_digest = started;
}

} // namespace

/// Joins every worker id on every shard, then starts the workers where
/// the placement puts them.
void start_workers(chief_self self) {
  auto& st = self->state;
  place_replicas(self); // in the background: the copies start now
  std::vector<int32_t> ids;
  if (st.opts.cfg.cluster.distributed()) {
    for (auto& n : st.opts.cfg.cluster.nodes) // ids in file order
      new_worker_ids(self, n.name, n.workers, ids);
    for (auto& [name, n] : st.members.nodes()) // joined before the start
      if (n.joined)
        new_worker_ids(self, name, n.planned_workers, ids);
  } else {
    new_worker_ids(self, st.own_node(), st.opts.cfg.cluster.workers, ids);
  }
  join_on_feeder(self, ids, [=] {
    join_on_shards(self, ids, [=] {
      auto& s = self->state;
      s.progress.metrics.set_listener(s.opts.on_record);
      if (auto& dir = s.opts.cfg.cluster.metrics_dir; !dir.empty()) {
        const auto& c = s.opts.cfg;
        metrics_run m{c.name,
                      s.run_id,
                      to_string(c.cluster.consistency),
                      to_string(c.training.partition),
                      static_cast<int>(s.members.workers().size()),
                      s.progress.steps()};
        m.score = score_name(c.model.loss);
        if (auto err = s.progress.metrics.open(dir, m))
          return fail_run(self, std::move(err));
        say(self, "metrics: " + s.progress.metrics.base()
                    + ".{jsonl,csv,progress.csv}");
      }
      s.enter(run_phase::training);
      s.progress.begin(now_seconds());
      start_following(self);
      retune_aggregate(self);
      for (auto id : ids)
        place_worker(self, id);
    });
  });
}

/// Shards (through the agents, resumed ones with their state), the
/// feeder's resumed position, then workers.
void start_shards(chief_self self) {
  auto& st = self->state;
  const auto& cfg = st.opts.cfg;
  std::vector<std::string> homes;
  if (cfg.cluster.distributed()) {
    for (auto& n : cfg.cluster.nodes)
      for (int k = 0; k < n.shards; ++k)
        homes.push_back(n.name);
  } else {
    homes.assign(st.shards.ranges.size(), st.own_node());
  }
  st.shards.plan(homes);
  // Once every shard is placed: the feeder's resumed position, or (fresh
  // in a cluster with a checkpoint dir) a checkpoint to restore a lost
  // shard from before any step is trained; then the workers.
  auto placed = countdown(st.shards.ranges.size(), [=] {
    auto& s = self->state;
    if (!s.shards.resume_from)
      return s.opts.cfg.cluster.distributed()
                 && !s.opts.cfg.training.checkpoint.dir.empty()
               ? checkpoint_now(self, [=] { start_workers(self); })
               : start_workers(self);
    auto ck = std::move(s.shards.resume_from);
    auto from = feeder_position_of(*ck);
    auto position = from.step;
    s.progress.set_steps(position);
    s.progress.schedule->resume_at(position);
    // The shards hold the checkpoint's dense state; its tables follow.
    restore_tables(self, *ck, [=](caf::error tables_err) {
      if (tables_err)
        return fail_run(self, std::move(tables_err));
      follow_cover(self, position, [=] {
        self
          ->request(self->state.shards.feeder, timeout_of(self), restore_atom_v,
                    position, from.plan, std::vector<int64_t>{},
                    std::vector<int64_t>{})
          .then([=](int64_t) { start_workers(self); },
                [=](caf::error& err) { fail_run(self, std::move(err)); });
      });
    });
  });
  for (size_t i = 0; i < st.shards.ranges.size(); ++i) {
    // Resuming, a shard starts with its part of the checkpoint (values,
    // optimizer state, version); otherwise with the initial values.
    shard_state_msg s;
    if (st.shards.resume_from) {
      s = slice_of(self, *st.shards.resume_from, i, st.shards.initial_version);
    } else {
      s.shard = static_cast<int32_t>(i);
      s.values = slice_of(st.shards.initial, st.shards.ranges[i]);
    }
    place_shard(self, i, homes[i], std::move(s), placed);
  }
}

/// The nodes that have not registered yet, as "name (host:port)".
std::string missing_nodes(chief_self self) {
  std::string out;
  for (auto& [name, n] : self->state.members.nodes())
    if (!n.up && !n.joined)
      out += (out.empty() ? "" : ", ") + name + " (" + n.address() + ")";
  return out;
}

/// The nodes named the run of a chief that was lost: this chief goes on
/// with it. When the live shards can be shown to hold every step since
/// the newest checkpoint, each once, they are kept and nothing is lost;
/// otherwise `restore` restores every shard and the feeder from that
/// checkpoint, and the log says why and how many steps that loses.
/// A run that starts over: the checkpoint folder's files of other runs
/// go aside (said in the log) before this run writes its own.
caf::error set_aside_earlier_runs(chief_self self) {
  auto& st = self->state;
  if (!st.checkpoints.set_aside_pending)
    return caf::none;
  st.checkpoints.set_aside_pending = false;
  const auto& dir = st.opts.cfg.training.checkpoint.dir;
  auto aside = set_aside_checkpoints(dir, stamp_of(self));
  if (!aside)
    return aside.error();
  if (!aside->empty())
    say(self, "starting over: the checkpoints of earlier runs in " + dir
                + " are set aside in " + *aside);
  return caf::none;
}

void adopt_run(chief_self self, std::function<void()> restore) {
  auto& st = self->state;
  const auto& ckpt = st.opts.cfg.training.checkpoint;
  int64_t since = 0;        // the shards' version at the checkpoint
  feeder_position position; // the feeder's
  if (!ckpt.dir.empty()) {
    auto found = load_newest(ckpt.dir, stamp_of(self),
                             checkpoint_pick::this_run, st.eval.layout);
    if (!found)
      return fail_run(self, found.error());
    if (*found) {
      auto version = version_of((*found)->ckpt, (*found)->path);
      if (!version)
        return fail_run(self, version.error());
      since = st.shards.initial_version = *version;
      position = feeder_position_of((*found)->ckpt);
      if (auto err = follow_from_checkpoint(self, (*found)->ckpt))
        return fail_run(self, std::move(err));
      st.takeover.adopted_from_step = position.step;
      say(self, fmt("taking over run %s from its checkpoint %s at step %lld",
                    st.run_id.c_str(), (*found)->path.c_str(),
                    static_cast<long long>(st.takeover.adopted_from_step)));
      st.shards.resume_from = std::make_shared<checkpoint>(
        std::move((*found)->ckpt));
      st.checkpoints.set_aside_pending = false;
    }
  }
  if (!st.shards.resume_from) {
    if (auto err = set_aside_earlier_runs(self))
      return fail_run(self, std::move(err));
    say(self, fmt("taking over run %s: it has no checkpoint, so its start "
                  "(step 0) is the reference",
                  st.run_id.c_str()));
    st.takeover.adopted_from_step = 0;
  }
  adopt_live_shards(
    self, since,
    [=](live_found& found) {
      auto& s = self->state;
      auto& v = found.verdict;
      if (v.keep_live) {
        s.shards.resume_from = nullptr;
        s.takeover.adoption_lost_steps = 0;
        return keep_live_shards(self, found, position,
                                [=] { start_workers(self); });
      }
      if (v.newest_version < 0) {
        say(self, "the run's shards died with its chief: the steps since the "
                  "checkpoint are lost (at most checkpoint.every_steps) and "
                  "trained again");
      } else {
        // async and ssp apply one push per step; a sync update aggregates
        // a push of every replica.
        auto& c = s.opts.cfg.cluster;
        int64_t per_update = c.consistency == cluster_config::mode::sync
                               ? std::max(1, c.replicas_to_aggregate > 0
                                               ? c.replicas_to_aggregate
                                               : c.workers)
                               : 1;
        s.takeover.adoption_lost_steps =
          std::max<int64_t>(0, v.newest_version - since) * per_update;
        s.recovery.lose_steps(s.takeover.adoption_lost_steps);
        say(self,
            fmt("cannot keep the live shards (%s): they were at update "
                "%lld, the checkpoint at %lld: %lld steps lost, to be "
                "trained again",
                v.why_not.c_str(), static_cast<long long>(v.newest_version),
                static_cast<long long>(since),
                static_cast<long long>(s.takeover.adoption_lost_steps)));
      }
      // The shards start anew where the cluster file puts them: a live
      // one elsewhere (a replica that took over) must not live on beside.
      stop_live_shards_left(self, found);
      restore();
    },
    true);
}

/// Once every node of the file is up: the shards (after taking over the
/// run the nodes named, if they named one).
void start_when_nodes_ready(chief_self self) {
  auto& st = self->state;
  if (st.nodes_ready() || st.ended() || !missing_nodes(self).empty())
    return;
  st.enter(run_phase::starting);
  if (st.opts.cfg.cluster.distributed())
    say(self, fmt("all %zu nodes are up", st.members.nodes().size()));
  if (!st.takeover.adopted_run.empty())
    return adopt_run(self, [=] { start_shards(self); });
  if (auto err = set_aside_earlier_runs(self))
    return fail_run(self, std::move(err));
  start_shards(self);
}

/// Reads the newest checkpoint when resuming; sets up the nodes.
void start(chief_self self) {
  auto& st = self->state;
  const auto& cfg = st.opts.cfg;
  say(self, "identity: run " + st.run_id + ", config digest " + st.digest);
  if (cfg.cluster.shard_replicas > 0 && !cfg.cluster.distributed())
    return fail_run(self, make_error(errc::invalid_config,
                                     "/cluster/shard_replicas: needs nodes "
                                     "(in one process a replica would die "
                                     "with its primary)"));
  const auto& train = st.opts.data->train;
  std::vector<float> declared_values;
  if (cfg.model.type == model_config::kind::external) {
    // The user's tensors: troupe holds and updates them, the user's step
    // function computes their gradients. Only the chief reads the file
    // (the workers get its shapes with their placement), so a path that
    // is wrong here is the run's error.
    auto declared = read_declared_params(cfg.model.parameters);
    if (!declared)
      return fail_run(
        self, make_error(static_cast<errc>(declared.error().code()),
                         "/model/parameters: " + describe(declared.error())));
    st.eval.layout = std::move(declared->layout);
    st.eval.summary = describe_declared(st.eval.layout);
    declared_values = std::move(declared->values);
    st.eval.parameters_digest = values_digest(declared_values);
    st.eval.external = st.opts.evaluate;
    say(self, "model: " + st.eval.summary + " from " + cfg.model.parameters);
  } else {
    st.eval.backend = make_cpu_backend(cfg.training.threads);
    auto m = make_model(cfg.model, train.height, train.width, train.channels,
                        train.classes, *st.eval.backend);
    if (!m)
      return fail_run(self, m.error());
    st.eval.evaluator = std::move(*m);
    st.eval.layout = st.eval.evaluator->layout();
    st.eval.summary = st.eval.evaluator->summary();
  }
  auto split = st.eval.layout.split(static_cast<size_t>(cfg.cluster.shards));
  if (!split)
    return fail_run(self, split.error());
  st.shards.ranges = *split;
  int initial_workers = cfg.cluster.workers;
  if (cfg.cluster.distributed()) {
    initial_workers = 0;
    for (auto& n : cfg.cluster.nodes)
      initial_workers += n.workers;
  }
  st.progress.per_epoch = plan_steps_per_epoch(cfg.training.partition,
                                               static_cast<size_t>(train.count),
                                               cfg.training.batch_size,
                                               initial_workers);
  st.progress.total_steps = st.progress.per_epoch * cfg.training.epochs;
  if (cfg.training.max_steps > 0)
    st.progress.total_steps = std::min(st.progress.total_steps,
                                       cfg.training.max_steps);
  st.members.limit_restarts(cfg.cluster.max_restarts,
                            cfg.cluster.restart_window_s);
  // The files are named by the run's id, known once the nodes are up (a
  // taken-over run keeps its own); the folder is checked now.
  if (!cfg.cluster.metrics_dir.empty())
    if (auto err = metrics_log::prepare(cfg.cluster.metrics_dir))
      return fail_run(self, std::move(err));
  if (auto err = open_exports(self))
    return fail_run(self, std::move(err));
  // Resume: the newest checkpoint's parameters, optimizer state, shard
  // version and feeder position.
  if (cfg.training.checkpoint.resume) {
    auto found = load_newest(cfg.training.checkpoint.dir, stamp_of(self),
                             checkpoint_pick::compatible, st.eval.layout,
                             st.opts.words);
    if (!found)
      return fail_run(self, found.error());
    if (*found) {
      auto path = (*found)->path;
      auto ck = caf::expected<checkpoint>{std::move((*found)->ckpt)};
      // The run goes on under its own id.
      if (auto it = ck->metadata.find("run_id");
          it != ck->metadata.end() && !it->second.empty())
        st.run_id = it->second;
      auto version = version_of(*ck, path);
      if (!version)
        return fail_run(self, version.error());
      st.shards.initial_version = *version;
      say(self, fmt("resuming from %s at step %lld (run %s)", path.c_str(),
                    static_cast<long long>(ck->step), st.run_id.c_str()));
      // The file holds the model whole; restore_from_checkpoint slices it
      // by this run's shard ranges, whatever the count it was written on.
      auto written = parse_identity(ck->metadata["config"]);
      auto shards = std::to_string(cfg.cluster.shards);
      if (auto it = written.find("/cluster/shards");
          it != written.end() && it->second != shards)
        say(self, "the checkpoint was written on " + it->second
                    + " shards: its values and optimizer state are placed "
                      "on this run's "
                    + shards);
      if (auto err = follow_from_checkpoint(self, *ck))
        return fail_run(self, std::move(err));
      if (ck->step >= st.progress.total_steps && !cfg.data.follow)
        say(self,
            fmt("the run had reached its last step (%lld): nothing "
                "is left to train; %s train further, %s starts over",
                static_cast<long long>(st.progress.total_steps),
                st.opts.words.further.c_str(), st.opts.words.fresh.c_str()));
      if (cfg.model.type == model_config::kind::external)
        warn_if_parameters_rewritten(self, *ck, path);
      st.shards.resume_from = std::make_shared<checkpoint>(std::move(*ck));
    }
  }
  // Decided once the nodes are up: they may name a run that this chief
  // takes over (its files are then this run's own).
  st.checkpoints.set_aside_pending = !cfg.training.checkpoint.dir.empty()
                                     && !cfg.training.checkpoint.resume;
  if (!st.shards.resume_from)
    st.shards.initial = st.eval.evaluator ? st.eval.evaluator->initial_params()
                                          : std::move(declared_values);
  feeder_options fo;
  fo.samples = static_cast<size_t>(train.count);
  fo.batch = cfg.training.batch_size;
  fo.seed = cfg.training.seed;
  fo.epochs = cfg.training.epochs;
  fo.max_batches = cfg.training.max_steps;
  fo.partition = cfg.training.partition;
  fo.shuffle_block = static_cast<size_t>(cfg.training.shuffle_block);
  fo.in_order = cfg.training.stream_order;
  // A folder that grows starts empty: its parts come in as training
  // needs them (chief_follow.cpp).
  fo.follow = cfg.data.follow;
  if (fo.follow)
    fo.samples = 0;
  if (train.click_parts)
    fo.read_parts = train.click_parts->part_sizes();
  fo.hold = hold_time(cfg);
  st.shards.feeder = self->spawn<caf::monitored>(feeder_impl, fo);
  // A folder that grows has no epochs to evaluate at the end of.
  st.progress.schedule = std::make_unique<run_schedule>(
    cfg.data.follow ? std::numeric_limits<int64_t>::max() / 4
                    : st.progress.per_epoch,
    cfg.training.eval_every_steps, cfg.training.checkpoint.every_steps,
    cfg.training.log_every_steps);
  // This process's own agent; in a cluster the other nodes register.
  agent_options ao;
  ao.node = st.own_node();
  ao.cfg = cfg;
  ao.data = st.opts.data;
  ao.fault_hook = st.opts.fault_hook;
  ao.external = st.opts.external;
  ao.data_plane = st.opts.data_plane;
  auto local = self->spawn(node_agent_impl, std::move(ao));
  if (cfg.cluster.distributed()) {
    for (auto& n : cfg.cluster.nodes) {
      auto& e = st.members.add_node(n.name);
      e.host = n.host;
      e.port = n.port;
      e.planned_shards = n.shards;
      e.planned_workers = n.workers;
    }
    self->delayed_send(
      self,
      std::chrono::duration_cast<caf::timespan>(
        std::chrono::duration<double>(cfg.cluster.node_timeout_s)),
      deadline_atom_v);
  } else {
    auto& e = st.members.add_node(st.own_node());
    e.planned_shards = cfg.cluster.shards;
    e.planned_workers = cfg.cluster.workers;
  }
  auto& me = st.members.add_node(st.own_node());
  me.agent = local;
  me.up = true;
  me.data_port = st.opts.data_plane ? st.opts.data_plane->port() : 0;
  start_when_nodes_ready(self);
}

} // namespace troupe::chief_ops

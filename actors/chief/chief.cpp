// The chief actor's behavior and run_cluster; its operations are in the
// other chief_*.cpp files (see chief_ops.hpp for their order).
#include "actors/chief/chief.hpp"

#include "actors/chief/chief_ops.hpp"
#include "actors/net/remote.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/config/run_identity.hpp"

namespace troupe {

using namespace chief_ops;

chief_self_actor::behavior_type
chief_impl(chief_self_actor::stateful_pointer<chief_state> self,
           chief_options opts) {
  self->state.opts = std::move(opts);
  {
    auto& st = self->state;
    st.run_id = st.opts.run_id.empty() ? new_run_id() : st.opts.run_id;
    st.identity = training_identity(st.opts.cfg);
    st.digest = identity_digest(st.identity);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.ended())
      return;
    if (auto id = st.members.forget_worker(dm.source))
      return on_worker_down(self, *id, dm.reason);
    if (auto name = st.members.forget_agent(dm.source))
      return node_lost(self, *name, describe(dm.reason));
    if (auto i = st.shards.shard_of(dm.source))
      return on_shard_down(self, *i, dm.reason);
    if (auto i = st.shards.replica_of(dm.source))
      return on_replica_down(self, *i, dm.reason);
    fail_run(self, make_error(errc::actor_down,
                              "the feeder stopped: " + describe(dm.reason)));
  });
  return {
    [=](run_atom) -> caf::result<cluster_summary> {
      self->state.reply = self->make_response_promise<cluster_summary>();
      start(self);
      return self->state.reply;
    },
    [=](report_atom, const worker_report& r) { on_report(self, r); },
    [=](replicate_atom, int32_t shard, int64_t version,
        const std::string& text) {
      auto& st = self->state;
      auto i = static_cast<size_t>(shard);
      // Only a current primary's news: one a move stopped is no longer
      // shard `shard`.
      if (st.ended() || shard < 0 || i >= st.shards.count()
          || !st.shards.handles()[i]
          || caf::actor_cast<caf::actor_addr>(self->current_sender())
               != st.shards.handles()[i].address())
        return;
      on_replica_news(self, shard, version, text);
    },
    [=](register_atom) -> std::string { return self->state.opts.config_text; },
    [=](register_atom, node_registration& r) {
      return on_register(self, std::move(r));
    },
    [=](deadline_atom) {
      auto& st = self->state;
      if (st.nodes_ready() || st.ended())
        return;
      fail_run(self,
               make_error(errc::node_unreachable,
                          fmt("these nodes did not come up within %.0f s: %s",
                              st.opts.cfg.cluster.node_timeout_s,
                              missing_nodes(self).c_str())));
    },
    [=](stop_atom, const std::string& who) { on_stop_request(self, who); },
    [=](follow_atom) { on_follow_tick(self); },
    [=](forget_atom, const std::string& node) {
      self->state.answers.node_lost(node);
    },
    [=](replicate_atom) {
      if (!self->state.recovery.recovering())
        place_replicas(self);
    },
    [=](restore_atom, int64_t generation) {
      auto& st = self->state;
      if (!st.recovery.waiting_for_shard_nodes()
          || generation != st.recovery.generation())
        return;
      st.recovery.shard_wait_expired();
      restore_after_loss(self);
    },
    [=](leave_atom, const std::string& node) -> caf::result<bool> {
      return on_leave(self, node);
    },
    [=](stats_atom) { return shell_status(self); },
    [=](who_atom) -> caf::result<std::string, std::string> {
      return {self->state.run_id, self->state.digest};
    },
    [=](join_atom, int32_t n, std::string& node) {
      return shell_add_workers(self, n, std::move(node));
    },
    [=](kill_atom, const actor_ref& target) {
      return shell_kill(self, target);
    },
    [=](snapshot_atom) { return shell_checkpoint(self); },
    [=](export_atom) { return shell_export(self); },
    [=](tune_atom, tune_key key, double value) {
      return shell_tune(self, key, value);
    },
    [=](grow_atom, const std::string& node) {
      return shell_add_shard(self, node);
    },
    [=](drain_atom, int32_t shard) { return shell_drain_shard(self, shard); },
    [=](pause_atom) { return shell_pause(self, true); },
    [=](resume_atom) { return shell_pause(self, false); },
    [=](stop_atom) { return shell_stop(self); },
    [=](place_atom, int32_t id, int64_t generation, caf::error& reason) {
      // The grace after a lost data-plane connection is over: a recovery
      // since then has started the worker again; else it failed.
      auto& st = self->state;
      auto* w = st.members.find_worker(id);
      if (st.ended() || st.recovery.stale(generation) || w == nullptr
          || w->handle || w->placing)
        return;
      restart_worker(self, id, reason);
    },
  };
}

caf::expected<cluster_summary>
run_cluster(caf::actor_system& sys, chief_options opts,
            const std::function<void(const chief_actor&)>& started) {
  auto cluster = opts.cfg.cluster;
  auto listen = opts.listen;
  auto shell_key = opts.shell_key;
  auto* log = opts.log;
  if (cluster.distributed()) {
    auto& me = *cluster.node(cluster.chief_node);
    listen.emplace(me.listen_host(), me.port);
  }
  chief_actor chief = sys.spawn(chief_impl, std::move(opts));
  if (started)
    started(chief);
  caf::scoped_actor self{sys};
  // run_atom is queued before the chief can be reached: a node that
  // registers at once then finds its entry (start() makes them). No
  // timeout: a run may take hours, and the chief answers on every path
  // (each of its own requests has one).
  auto running = self->request(chief, caf::infinite, run_atom_v);
  if (listen) {
    auto port = publish_on(sys, chief, listen->first, listen->second);
    if (!port) {
      caf::anon_send_exit(chief, caf::exit_reason::user_shutdown);
      return port.error();
    }
    if (!cluster.distributed() && log)
      // One write: the chief's own lines go to the same stream meanwhile.
      *log << ("shell: troupe-shell --connect " + listen->first + ":"
               + std::to_string(*port)
               + (shell_key.empty() ? "" : " --key " + shell_key) + "\n")
           << std::flush;
  }
  caf::expected<cluster_summary> result{caf::sec::bad_function_call};
  running.receive([&](cluster_summary& r) { result = r; },
                  [&](caf::error& err) { result = std::move(err); });
  if (listen)
    sys.middleman().unpublish(chief);
  return result;
}

} // namespace troupe

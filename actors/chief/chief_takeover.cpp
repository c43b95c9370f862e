// Keeping the shards that outlived a chief (or a link to their node):
// each node's live shards are adopted and say what they applied since the
// newest checkpoint; when that proves every step is held once
// (runtime/rules/takeover), they stay the run's shards and the feeder goes on
// from the checkpoint with those steps done. Used by a chief that takes a
// lost chief's run over and by a shard recovery.
#include "actors/chief/chief_ops.hpp"
#include "actors/node_agent.hpp"
#include "runtime/params/param_block.hpp"

namespace troupe::chief_ops {

void adopt_live_shards(chief_self self, int64_t since,
                       std::function<void(live_found&)> then) {
  std::vector<std::string> names;
  std::vector<node_agent_actor> agents;
  for (auto& [name, n] : self->state.members.nodes)
    if (n.up && n.agent) {
      names.push_back(name);
      agents.push_back(n.agent);
    }
  ask_all_settled<live_shards>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i], timeout_of(self), adopt_atom_v, since);
    },
    [=, then = std::move(then)](auto& replies) {
      live_found found;
      for (size_t i = 0; i < replies.size(); ++i) {
        if (!replies[i])
          continue;
        auto& r = *replies[i];
        for (size_t k = 0; k < r.handles.size() && k < r.histories.size();
             ++k) {
          found.nodes.push_back(names[i]);
          found.handles.push_back(r.handles[k]);
          found.histories.push_back(std::move(r.histories[k]));
        }
      }
      found.verdict = judge_takeover(self->state.shards.ranges.size(), since,
                                     found.histories);
      // Shards of these modes keep no log (param_block): the verdict is
      // to restore; say why in the mode's words.
      auto mode = self->state.opts.cfg.cluster.consistency;
      if (!param_block::logs_batches(mode))
        found.verdict.why_not = std::string{"in "} + to_string(mode)
                                + " mode an update is not one batch";
      then(found);
    });
}

void keep_live_shards(chief_self self, live_found& found,
                      feeder_position from, std::function<void()> then) {
  auto position = from.step;
  auto& st = self->state;
  auto n = st.shards.ranges.size();
  std::vector<shard_actor> before = st.shards.handles;
  st.shards.handles.assign(n, shard_actor{});
  st.shards.node_of.assign(n, std::string{});
  for (size_t k = 0; k < found.handles.size(); ++k) {
    auto i = static_cast<size_t>(found.histories[k].shard);
    auto& h = found.handles[k];
    // A shard that never went down is monitored already.
    if (i >= before.size() || before[i] != h)
      self->monitor(h);
    st.shards.handles[i] = h;
    st.shards.node_of[i] = found.nodes[k];
    st.shards.index_of[h.address()] = i;
  }
  auto done = found.verdict.done;
  auto kept = static_cast<int64_t>(done.size());
  say(self, fmt("kept the live shards: they hold the %lld steps trained "
                "since step %lld, each once; 0 steps lost",
                static_cast<long long>(kept),
                static_cast<long long>(position)));
  self->request(st.shards.feeder, timeout_of(self), restore_atom_v, position,
                from.plan, std::move(done))
    .then(
      [=](int64_t) {
        auto& s = self->state;
        s.progress.steps = position + kept;
        s.progress.schedule->resume_at(s.progress.steps);
        then();
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

} // namespace troupe::chief_ops

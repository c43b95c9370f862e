// Keeping the shards that outlived a chief (or a link to their node):
// each node's live shards are adopted and say what they applied since the
// newest checkpoint; when that proves every step is held once
// (runtime/rules/takeover), they stay the run's shards and the feeder goes on
// from the checkpoint with those steps done. Used by a chief that takes a
// lost chief's run over and by a shard recovery.
#include <algorithm>
#include <set>

#include "actors/chief/chief_ops.hpp"
#include "actors/node_agent.hpp"
#include "runtime/params/param_block.hpp"

namespace troupe::chief_ops {

namespace {

/// How many shards the live ones are when their ids are 0..k-1, each
/// once; 0 otherwise.
size_t live_count(const std::vector<shard_history>& live) {
  std::set<int32_t> ids;
  for (auto& h : live)
    if (h.shard < 0 || !ids.insert(h.shard).second)
      return 0;
  if (ids.empty() || *ids.rbegin() != static_cast<int32_t>(ids.size()) - 1)
    return 0;
  return ids.size();
}

/// Shards were added or drained before the chief was lost: the live
/// shards are another count than the file's. When they are a whole set of
/// that count, each holding its slice of the flat vector as a move cuts
/// it (param_layout::split of that count), and hold every step, the run
/// goes on with them and their count.
void keep_moved_count(chief_self self, int64_t since, live_found& found) {
  auto& st = self->state;
  auto count = live_count(found.histories);
  if (count == 0 || count == st.shards.ranges.size())
    return;
  auto verdict = judge_takeover(count, since, found.histories);
  auto split = st.eval.layout.split(count);
  if (!verdict.keep_live || !split)
    return;
  // A whole set of that count as a move cut it, not the shards a lost
  // node left of the file's (those are the first ones, of other sizes).
  for (auto& h : found.histories)
    if (h.size != (*split)[static_cast<size_t>(h.shard)].size())
      return;
  say(self, fmt("the live shards are %zu, not the cluster file's %zu (shards "
                "were added or drained): the run goes on with them",
                count, st.shards.ranges.size()));
  st.shards.ranges = *split;
  st.opts.cfg.cluster.shards = static_cast<int>(count);
  for (auto& [name, n] : st.members.nodes())
    n.planned_shards = static_cast<int>(
      std::count(found.nodes.begin(), found.nodes.end(), name));
  found.verdict = std::move(verdict);
}

} // namespace

void adopt_live_shards(chief_self self, int64_t since,
                       std::function<void(live_found&)> then, bool any_count) {
  std::vector<std::string> names;
  std::vector<node_agent_actor> agents;
  for (auto& [name, n] : self->state.members.nodes())
    if (n.up && n.agent) {
      names.push_back(name);
      agents.push_back(n.agent);
    }
  // Every node's answer, or its error (a node lost meanwhile errs at
  // once: node_answers).
  using outcome = caf::expected<live_shards>;
  auto answers = std::make_shared<std::vector<outcome>>(agents.size(),
                                                        outcome{caf::error{}});
  auto gathered = [=, then = std::move(then)] {
    auto& replies = *answers;
    live_found found;
    for (size_t i = 0; i < replies.size(); ++i) {
      if (!replies[i])
        continue;
      auto& r = *replies[i];
      for (size_t k = 0; k < r.handles.size() && k < r.histories.size(); ++k) {
        found.nodes.push_back(names[i]);
        found.handles.push_back(r.handles[k]);
        found.histories.push_back(std::move(r.histories[k]));
      }
    }
    found.verdict = judge_takeover(self->state.shards.ranges.size(), since,
                                   found.histories);
    if (any_count && !found.verdict.keep_live)
      keep_moved_count(self, since, found);
    // Shards of these modes keep no log (param_block): the verdict is
    // to restore; say why in the mode's words.
    auto mode = self->state.opts.cfg.cluster.consistency;
    if (!param_block::logs_batches(mode))
      found.verdict.why_not = std::string{"in "} + to_string(mode)
                              + " mode an update is not one batch";
    then(found);
  };
  auto answered = countdown(agents.size(), gathered);
  for (size_t i = 0; i < agents.size(); ++i)
    answer_from<live_shards>(
      self, names[i],
      self->request(agents[i], timeout_of(self), adopt_atom_v, since),
      [=](live_shards& r) {
        (*answers)[i] = std::move(r);
        answered();
      },
      [=](caf::error& err) {
        (*answers)[i] = std::move(err);
        answered();
      });
}

void stop_live_shards_left(chief_self self, const live_found& found) {
  auto& kept = self->state.shards.handles();
  for (auto& h : found.handles)
    if (std::find(kept.begin(), kept.end(), h) == kept.end())
      self->send_exit(h, caf::exit_reason::user_shutdown);
}

void keep_live_shards(chief_self self, live_found& found, feeder_position from,
                      std::function<void()> then) {
  auto position = from.step;
  auto& st = self->state;
  auto n = st.shards.ranges.size();
  std::vector<shard_actor> before = st.shards.handles();
  st.shards.plan(std::vector<std::string>(n));
  for (size_t k = 0; k < found.handles.size(); ++k) {
    auto i = static_cast<size_t>(found.histories[k].shard);
    auto& h = found.handles[k];
    // A shard that never went down is monitored already.
    if (i >= before.size() || before[i] != h)
      self->monitor(h);
    st.shards.started(i, h, found.nodes[k]);
  }
  auto done = found.verdict.done;
  auto kept = static_cast<int64_t>(done.size());
  auto again = found.verdict.again;
  auto uneven = static_cast<long long>(again.size());
  say(self,
      fmt("kept the live shards: they hold the %lld steps trained "
          "since step %lld, each once; 0 steps lost%s",
          static_cast<long long>(kept), static_cast<long long>(position),
          uneven == 0
            ? ""
            : fmt(" (%lld batches that reached some shards and not others "
                  "come again: the shards that applied them drop them)",
                  uneven)
                .c_str()));
  // The plan reaches past every batch named, done or to come again.
  auto last = position;
  for (auto* named : {&done, &again})
    if (!named->empty())
      last = std::max(last,
                      *std::max_element(named->begin(), named->end()) + 1);
  follow_cover(self, last, [=]() mutable {
    self
      ->request(self->state.shards.feeder, timeout_of(self), restore_atom_v,
                position, from.plan, std::move(done), std::move(again))
      .then(
        [=](int64_t) {
          auto& s = self->state;
          s.progress.set_steps(position + kept);
          s.progress.schedule->resume_at(s.progress.steps(), position);
          then();
        },
        [=](caf::error& err) { fail_run(self, std::move(err)); });
  });
}

} // namespace troupe::chief_ops

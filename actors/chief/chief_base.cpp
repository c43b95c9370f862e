// The chief's basics: its log, its ids, the fan-out to its shards, and
// ending a run (releasing the nodes with the outcome, stopping the actors).
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <ostream>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

caf::timespan timeout_of(chief_self self) {
  return request_timeout(self->state.opts.cfg);
}

void say(chief_self self, const std::string& line, bool tagged) {
  // One write a line: other threads of the process (run_cluster's shell
  // line, a Python step's prints) use the same stream.
  if (self->state.opts.log != nullptr)
    *self->state.opts.log << ((tagged && self->state.opts.insecure_links
                                 ? "[INSECURE links] "
                                 : "")
                              + line + "\n")
                          << std::flush;
}

run_stamp stamp_of(chief_self self) {
  return {self->state.run_id, self->state.identity};
}

std::string fmt(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

double epoch_of(chief_self self, int64_t steps) {
  return static_cast<double>(steps)
         / static_cast<double>(self->state.progress.per_epoch);
}

feeder_position feeder_position_of(const checkpoint& ck) {
  auto it = ck.metadata.find("feeder_plan");
  return {ck.step, it == ck.metadata.end() ? std::string{} : it->second};
}

/// Stops every actor of the run, then the chief.
void shut_down(chief_self self) {
  auto& st = self->state;
  for (auto& [id, w] : st.members.workers())
    if (w.handle)
      self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  for (auto& s : st.shards.handles())
    if (s)
      self->send_exit(s, caf::exit_reason::user_shutdown);
  if (st.shards.feeder)
    self->send_exit(st.shards.feeder, caf::exit_reason::user_shutdown);
  self->quit();
}

/// Tells every node agent that the run is over, with `reason` (none: it
/// succeeded), so that each stops what it started and its process exits
/// with the run's outcome; then runs `then`. A node that does not answer
/// within two seconds is not waited for.
void release_nodes(chief_self self, const caf::error& reason,
                   std::function<void()> then) {
  auto& st = self->state;
  std::vector<node_agent_actor> agents;
  for (auto& [name, n] : st.members.nodes())
    if (n.up && n.agent)
      agents.push_back(n.agent);
  ask_all_settled<bool>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i], std::chrono::seconds(2), finish_atom_v,
                           reason);
    },
    [then = std::move(then)](auto&) { then(); });
}

void fail_run(chief_self self, caf::error err) {
  auto& st = self->state;
  if (st.ended())
    return;
  st.enter(run_phase::ended);
  // Not said here: the run's reply carries it to the program, which says
  // it once, on stderr ("troupe-node: error: ...").
  release_nodes(self, err, [=]() mutable {
    self->state.reply.deliver(std::move(err));
    shut_down(self);
  });
}

/// Pulls every shard (as worker -1) into one host vector.
void pull_params(chief_self self,
                 std::function<void(std::vector<float>&, int64_t)> done,
                 std::function<void()> lost) {
  ask_all_shards<float_block>(
    self,
    [=](size_t i) {
      return ask_shard(self, i, pull_atom_v, int32_t{-1}, int64_t{0});
    },
    [=](std::vector<float_block>& blocks) {
      std::vector<const std::vector<float>*> parts;
      for (auto& b : blocks)
        parts.push_back(b.values.get());
      auto all = gather_parts(self->state.shards.ranges, parts);
      if (!all)
        return fail_run(self, all.error());
      done(*all, blocks.empty() ? 0 : blocks[0].version);
    },
    std::move(lost));
}

/// Runs `f` now, or after the shard recovery in progress.
void when_recovered(chief_self self, std::function<void()> f) {
  if (self->state.recovery.recovering())
    self->state.recovery.when_over(std::move(f));
  else
    f();
}

} // namespace troupe::chief_ops

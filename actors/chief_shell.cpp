// The chief's side of troupe-shell: one command line in, JSON text out.
// Actors are named "chief", "feeder", "shard:N" and "worker:N" (a space
// works in place of the colon). Rates are examples per second of compute
// time; a worker's step counts all its incarnations' steps, and its
// staleness is the most updates a shard applied between one of its pulls
// and the matching push, over its last report.
#include <algorithm>
#include <sstream>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json's
// initializer-list constructors (at -O2); the code here is plain use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>

#include "actors/chief_ops.hpp"
#include "actors/fan_out.hpp"
#include "actors/timing.hpp"
#include "runtime/errc.hpp"

namespace troupe {

namespace {

using json = nlohmann::json;
using namespace chief_ops;

caf::error usage(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in{line};
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

/// "worker:3", "worker 3" -> ("worker", 3); "feeder" -> ("feeder", -1).
bool parse_actor(const std::vector<std::string>& w, size_t at,
                 std::string& role, long& index) {
  if (w.size() <= at)
    return false;
  auto name = w[at];
  auto colon = name.find(':');
  std::string num;
  if (colon != std::string::npos) {
    role = name.substr(0, colon);
    num = name.substr(colon + 1);
  } else {
    role = name;
    if (w.size() > at + 1)
      num = w[at + 1];
  }
  index = -1;
  if (!num.empty()) {
    char* end = nullptr;
    index = std::strtol(num.c_str(), &end, 10);
    if (*end != '\0' || index < 0)
      return false;
  }
  return true;
}

json worker_json(chief_self self, int32_t id) {
  auto& st = self->state;
  auto& w = st.workers.at(id);
  return {{"id", "worker:" + std::to_string(id)},
          {"role", "worker"},
          {"node", w.node},
          {"state", st.recovering && w.state != worker_phase::finished
                      ? "restoring"
                      : to_string(w.state)},
          {"step", w.steps},
          {"clock", w.clock},
          {"samples", w.samples},
          {"examples_per_sec",
           w.seconds > 0 ? static_cast<double>(w.samples) / w.seconds : 0.0},
          {"staleness", w.staleness},
          {"loss", w.last_loss},
          {"restarts", w.restarts}};
}

json shard_json(chief_self self, size_t i, const shard_stats* s) {
  auto& st = self->state;
  json j{{"id", "shard:" + std::to_string(i)},
         {"role", "shard"},
         {"node", st.shard_node[i]},
         {"state", s ? "running" : (st.recovering ? "restoring" : "down")},
         {"size", st.ranges[i].size()}};
  if (s) {
    j["version"] = s->version;
    j["accepted"] = s->accepted;
    j["stale"] = s->stale;
    j["refused"] = s->refused;
    if (st.opts.cfg.cluster.consistency == cluster_config::mode::ssp) {
      j["ssp_pulls"] = s->ssp_pulls;
      j["ssp_max_lead"] = s->ssp_max_lead;
    }
  }
  return j;
}

json run_json(chief_self self) {
  auto& st = self->state;
  auto& c = st.opts.cfg;
  double elapsed = st.training() ? now_seconds() - st.t0 : 0;
  return {{"name", c.name},
          {"run_id", st.run_id},
          {"config_digest", st.digest},
          {"mode", to_string(c.cluster.consistency)},
          {"steps", st.steps},
          {"epoch", static_cast<double>(st.steps)
                      / static_cast<double>(st.per_epoch)},
          {"seconds", elapsed},
          {"examples_per_sec",
           elapsed > 0 ? static_cast<double>(st.samples) / elapsed : 0.0},
          {"test_accuracy", st.last_accuracy},
          {"paused", st.user_paused},
          {"recovering", st.recovering},
          {"phase", to_string(st.phase)},
          {"stopping", st.stopping()},
          {"restarts", st.restarts ? st.restarts->total() : 0},
          {"shard_recoveries", st.recoveries},
          {"lost_steps", st.lost_steps},
          // A run taken over from a lost chief: the checkpoint's step and
          // the steps that cost (null: not known, the shards died too).
          {"taken_over",
           st.adopted_run.empty()
             ? json(nullptr)
             : json{{"from_step", st.adopted_from_step},
                    {"lost_steps", st.adoption_lost_steps >= 0
                                     ? json(st.adoption_lost_steps)
                                     : json(nullptr)}}},
          {"last_checkpoint", st.last_checkpoint}};
}

json nodes_json(chief_self self) {
  auto& st = self->state;
  json out = json::array();
  for (auto& [name, n] : st.nodes) {
    json shards = json::array(), workers = json::array();
    for (size_t i = 0; i < st.shard_node.size(); ++i)
      if (st.shard_node[i] == name)
        shards.push_back(i);
    for (auto& [id, w] : st.workers)
      if (w.node == name && w.state != worker_phase::finished)
        workers.push_back(id);
    out.push_back({{"name", name},
                   {"address", n.address()},
                   {"state", n.up ? "up" : "down"},
                   {"chief", name == st.own_node()},
                   {"joined", n.joined},
                   {"shards", shards},
                   {"workers", workers}});
  }
  return out;
}

/// Asks every live shard for its counters (5 s at most; a shard that does
/// not answer shows as down) and then runs `done`.
void with_shard_stats(
  chief_self self,
  std::function<void(std::vector<std::optional<shard_stats>>&)> done) {
  // Only the live shards are asked; the others stay empty.
  std::vector<size_t> live;
  for (size_t i = 0; i < self->state.shards.size(); ++i)
    if (self->state.shards[i])
      live.push_back(i);
  auto n = self->state.shards.size();
  ask_all_settled<shard_stats>(
    live.size(),
    [=](size_t k) {
      return self->request(self->state.shards[live[k]],
                           std::chrono::seconds(5), stats_atom_v);
    },
    [=](auto& replies) {
      std::vector<std::optional<shard_stats>> out(n);
      for (size_t k = 0; k < replies.size(); ++k)
        if (replies[k])
          out[live[k]] = *replies[k];
      done(out);
    });
}

const char* help_text =
  "status                 every actor: role, node, state, step/version, "
  "examples/s, staleness, restarts\n"
  "inspect ACTOR          one actor's full state (chief, feeder, shard:N, "
  "worker:N)\n"
  "nodes | workers | shards\n"
  "add-worker [N] [NODE]  start N more workers (default 1, on the least "
  "loaded node)\n"
  "kill ACTOR             kill a worker or shard (fault drill)\n"
  "checkpoint             write a checkpoint now\n"
  "set lr VALUE           the shards' base learning rate\n"
  "pause | resume         stop / restart handing out batches\n"
  "stop                   finish the run after the steps in flight\n"
  "help";

} // namespace

caf::result<std::string> shell_command(chief_self self,
                                       const std::string& line) {
  auto& st = self->state;
  // No command is longer; a longer line is not split into words at all.
  constexpr size_t max_line = 4096;
  if (line.size() > max_line)
    return usage("a command line of " + std::to_string(line.size())
                 + " characters (at most " + std::to_string(max_line) + ")");
  auto w = words(line);
  if (w.empty())
    return usage("empty command; try help");
  auto& cmd = w[0];
  if (cmd == "help")
    return json{{"help", help_text}}.dump();
  if (cmd == "nodes")
    return nodes_json(self).dump();
  if (cmd == "workers") {
    json out = json::array();
    for (auto& [id, x] : st.workers)
      out.push_back(worker_json(self, id));
    return out.dump();
  }
  if (!st.nodes_ready() && cmd != "stop")
    return usage("the cluster is still starting (waiting for: nodes)");
  if (cmd == "shards" || cmd == "status") {
    auto promise = self->make_response_promise<std::string>();
    bool all = cmd == "status";
    with_shard_stats(self, [=](auto& stats) mutable {
      json shards = json::array();
      for (size_t i = 0; i < stats.size(); ++i)
        shards.push_back(shard_json(self, i, stats[i] ? &*stats[i] : nullptr));
      if (!all) {
        promise.deliver(shards.dump());
        return;
      }
      auto& s = self->state;
      json actors = json::array();
      auto run = run_json(self);
      actors.push_back({{"id", "chief"},
                        {"role", "chief"},
                        {"node", s.own_node()},
                        {"state", s.stopping() ? "stopping"
                                  : s.recovering ? "recovering"
                                  : s.user_paused ? "paused" : "training"},
                        {"step", s.steps},
                        {"examples_per_sec", run["examples_per_sec"]},
                        {"restarts", run["restarts"]}});
      actors.push_back({{"id", "feeder"},
                        {"role", "feeder"},
                        {"node", actors[0]["node"]},
                        {"state", s.user_paused ? "paused" : "leasing"}});
      for (auto& x : shards)
        actors.push_back(x);
      for (auto& [id, x] : s.workers)
        actors.push_back(worker_json(self, id));
      promise.deliver(json{{"run", run}, {"actors", actors}}.dump());
    });
    return promise;
  }
  if (cmd == "inspect") {
    std::string role;
    long index = -1;
    if (!parse_actor(w, 1, role, index))
      return usage("usage: inspect ACTOR (chief, feeder, shard:N, worker:N)");
    if (role == "chief")
      return json{{"run", run_json(self)}, {"nodes", nodes_json(self)}}.dump();
    if (role == "worker") {
      if (st.workers.count(static_cast<int32_t>(index)) == 0)
        return usage("no worker " + std::to_string(index));
      auto j = worker_json(self, static_cast<int32_t>(index));
      auto& x = st.workers.at(static_cast<int32_t>(index));
      j["compute_seconds"] = x.seconds;
      j["window_steps"] = x.window_steps;
      return j.dump();
    }
    if (role == "shard") {
      if (index < 0 || static_cast<size_t>(index) >= st.shards.size())
        return usage("no shard " + std::to_string(index) + " (shards: 0-"
                     + std::to_string(st.shards.size() - 1) + ")");
      auto promise = self->make_response_promise<std::string>();
      auto i = static_cast<size_t>(index);
      with_shard_stats(self, [=](auto& stats) mutable {
        auto j = shard_json(self, i, stats[i] ? &*stats[i] : nullptr);
        auto& r = self->state.ranges[i];
        j["range"] = {r.begin, r.end};
        j["optimizer"] = to_string(self->state.opts.cfg.training.optimizer.type);
        promise.deliver(j.dump());
      });
      return promise;
    }
    if (role == "feeder") {
      auto promise = self->make_response_promise<std::string>();
      self->request(st.feeder, timeout_of(self), stats_atom_v)
        .then(
          [=](feeder_stats& fs) mutable {
            promise.deliver(json{{"id", "feeder"},
                                 {"acked", fs.acked},
                                 {"position", fs.position},
                                 {"epoch_samples", fs.epoch_samples},
                                 {"paused", self->state.user_paused}}
                              .dump());
          },
          [=](caf::error& err) mutable { promise.deliver(err); });
      return promise;
    }
    return usage("unknown actor \"" + w[1]
                 + "\" (chief, feeder, shard:N, worker:N)");
  }
  if (cmd == "add-worker") {
    long n = 1;
    std::string node;
    if (w.size() > 1) {
      char* end = nullptr;
      n = std::strtol(w[1].c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 1024)
        return usage("add-worker: N must be 1..1024, got \"" + w[1] + "\"");
    }
    if (w.size() > 2) {
      node = w[2];
      auto it = st.nodes.find(node);
      if (it == st.nodes.end() || !it->second.up)
        return usage("add-worker: no node \"" + node + "\" is up");
    } else {
      node = least_loaded_node(self);
    }
    if (st.stopping() || st.ended())
      return usage("add-worker: the run is ending");
    auto ids = add_workers(self, node, static_cast<int>(n));
    return json{{"added", ids}, {"node", node}}.dump();
  }
  if (cmd == "kill") {
    std::string role;
    long index = -1;
    if (!parse_actor(w, 1, role, index) || index < 0)
      return usage("usage: kill worker:N | shard:N");
    if (role == "worker") {
      auto it = st.workers.find(static_cast<int32_t>(index));
      if (it == st.workers.end() || !it->second.handle)
        return usage("no running worker " + std::to_string(index));
      self->send_exit(it->second.handle, caf::exit_reason::kill);
    } else if (role == "shard") {
      if (static_cast<size_t>(index) >= st.shards.size()
          || !st.shards[static_cast<size_t>(index)])
        return usage("no running shard " + std::to_string(index));
      self->send_exit(st.shards[static_cast<size_t>(index)],
                      caf::exit_reason::kill);
    } else {
      return usage("kill takes worker:N or shard:N, got \"" + w[1] + "\"");
    }
    say(self, "shell: kill " + role + ":" + std::to_string(index));
    return json{{"killed", role + ":" + std::to_string(index)}}.dump();
  }
  if (cmd == "checkpoint") {
    if (st.opts.cfg.training.checkpoint.dir.empty())
      return usage("checkpoint: the run has no /training/checkpoint/dir");
    auto promise = self->make_response_promise<std::string>();
    checkpoint_now(self, [=]() mutable {
      promise.deliver(json{{"checkpoint", self->state.last_checkpoint}}.dump());
    });
    return promise;
  }
  if (cmd == "set") {
    if (st.recovering)
      return usage("set: a shard is being restored; try again shortly");
    if (w.size() != 3 || w[1] != "lr")
      return usage("usage: set lr VALUE");
    char* end = nullptr;
    double lr = std::strtod(w[2].c_str(), &end);
    if (*end != '\0' || !(lr > 0) || !std::isfinite(lr))
      return usage("set lr: expected a number > 0, got \"" + w[2] + "\"");
    auto promise = self->make_response_promise<std::string>();
    auto shards = st.shards;
    ask_all<bool>(
      shards.size(),
      [=](size_t i) {
        return self->request(shards[i], timeout_of(self), tune_atom_v,
                             std::string{"lr"}, lr);
      },
      [=](auto&) mutable {
        say(self, fmt("shell: learning rate set to %g", lr));
        promise.deliver(json{{"lr", lr}}.dump());
      },
      [=](caf::error& err) mutable { promise.deliver(err); });
    return promise;
  }
  if (cmd == "pause" || cmd == "resume") {
    set_user_pause(self, cmd == "pause");
    return json{{"paused", st.user_paused}}.dump();
  }
  if (cmd == "stop") {
    if (!st.training())
      return usage("stop: the run has not started training yet");
    stop_run(self, "the shell");
    return json{{"stopping", true}}.dump();
  }
  return usage("unknown command \"" + cmd + "\"; try help");
}

} // namespace troupe

#pragma GCC diagnostic pop

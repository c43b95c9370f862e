// A folder of training parts that grows (data.follow). The chief lists
// the folder every poll_seconds; a new file that matches the glob and has
// stayed the same for one listing becomes a known part (the chief's own
// click logs take it, counting its samples). Known parts enter the
// feeder's open plan one at a time, as training needs them: when the
// plan has fewer batches left than train while a part is scored (and at
// least a few per worker), the next part is scored with the model the
// shards hold (progressive validation: every part is scored before any
// of it is trained on), every node agent takes it, and then the feeder
// leases its samples. The workers' own loss, computed before each step,
// is the other view of it: every sample scored before it is trained on.
// Parts are taken in name order, which is the order they arrive in when
// named by time; a file that comes after a later name was known is left
// out, and said so.
//
// A restored plan (a resumed run, a chief that takes over) first takes
// the parts that hold the samples it trained, without scoring them; a
// checkpoint records the parts' names so that a folder whose older parts
// changed is refused instead of trained on other samples.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <glob.h>
#include <limits>
#include <sstream>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/file_stamp.hpp"

namespace troupe::chief_ops {

namespace {

/// Takes the next known part into the plan when training needs it (the
/// plan has `lead` batches or fewer left to lease): scored first, then
/// handed out. `surely`: whatever the workers reported so far.
void take_next(chief_self self, bool surely);

const click_stream& known_parts(chief_self self) {
  return *self->state.opts.data->train.click_parts;
}

std::string base_name(const std::string& path) {
  return std::filesystem::path{path}.filename().string();
}

/// The files that match the glob now, in name order.
std::vector<std::string> listing(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t found{};
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0)
    for (size_t k = 0; k < found.gl_pathc; ++k)
      out.emplace_back(found.gl_pathv[k]);
  ::globfree(&found);
  std::sort(out.begin(), out.end());
  return out;
}

/// Lists the folder: new files that stayed the same since the last
/// listing become known parts, in name order.
void list_folder(chief_self self) {
  auto& st = self->state;
  auto& f = st.follow;
  auto parts = known_parts(self).parts();
  std::vector<std::string> known;
  for (auto& p : parts)
    known.push_back(p.path);
  std::vector<std::string> ready;
  std::map<std::string, std::pair<int64_t, int64_t>> seen;
  bool waiting = false; // an earlier new file is still being written
  for (auto& path : listing(st.opts.cfg.data.follow_glob)) {
    if (std::binary_search(known.begin(), known.end(), path)
        || f.refused.count(path) > 0)
      continue;
    if (path < known.back()) {
      if (f.refused.insert(path).second)
        say(self, "data.follow: " + path + " came after "
                    + base_name(known.back())
                    + " was taken; parts are trained in name order, so "
                      "this one is left out");
      continue;
    }
    auto stamp = file_stamp::of(path);
    if (!stamp)
      continue; // gone again, or unreadable for now
    std::pair<int64_t, int64_t> now{stamp->bytes, stamp->modified_ns};
    seen[path] = now;
    auto it = f.candidates.find(path);
    bool steady = it != f.candidates.end() && it->second == now;
    if (steady && now.first == 0) { // no samples: nothing to wait for
      if (f.refused.insert(path).second)
        say(self, "data.follow: " + path + " is empty; left out");
      continue;
    }
    if (!waiting && steady)
      ready.push_back(path);
    else
      waiting = true;
  }
  f.candidates = std::move(seen);
  if (ready.empty())
    return;
  known.insert(known.end(), ready.begin(), ready.end());
  auto count = known_parts(self).follow(known);
  if (!count) {
    // A part that cannot be read is named, and the run stops: its
    // samples would otherwise be skipped without anyone knowing.
    return fail_run(self, count.error());
  }
  for (auto& path : ready)
    f.candidates.erase(path);
  f.last_part_time = now_seconds();
  say(self,
      fmt("data.follow: %zu new part%s (%s%s); %lld samples known",
          ready.size(), ready.size() == 1 ? "" : "s",
          base_name(ready.front()).c_str(), ready.size() > 1 ? " ..." : "",
          static_cast<long long>(*count)));
}

/// Every node agent that is up takes the parts in the plan, then the
/// feeder leases their samples; then `then`.
void hand_out(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  std::vector<std::pair<std::string, node_agent_actor>> agents;
  for (auto& [name, n] : st.members.nodes())
    if (n.up && n.agent)
      agents.emplace_back(name, n.agent);
  auto taken = st.follow.taken;
  ask_all_settled<int64_t>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i].second, timeout_of(self), follow_atom_v,
                           taken);
    },
    [=](std::vector<caf::expected<int64_t>>& replies) {
      auto& s = self->state;
      for (size_t i = 0; i < replies.size(); ++i)
        if (!replies[i] && s.members.is_up(agents[i].first))
          return fail_run(self, make_error(errc::data_changed,
                                           "node " + agents[i].first + ": "
                                             + describe(replies[i].error())));
      // A node that went down takes the parts when it registers again.
      self
        ->request(s.shards.feeder, timeout_of(self), follow_atom_v,
                  s.follow.samples)
        .then(
          [=](feeder_stats& fs) {
            auto& p = self->state.progress;
            p.total_steps = fs.total;
            p.per_epoch = std::max<int64_t>(fs.total, 1);
            then();
          },
          [=](caf::error& err) { fail_run(self, std::move(err)); });
    });
}

/// Appends known part `j` to the plan's parts.
void take(chief_self self, size_t j) {
  auto& f = self->state.follow;
  auto part = known_parts(self).part(j);
  f.taken.push_back(part.path);
  f.samples = part.first + part.count;
}

/// Records part `name`'s progressive score.
void count_score(chief_self self, const std::string& name, eval_result r,
                 double auc) {
  auto& f = self->state.follow;
  f.scored_parts += 1;
  f.scored_samples += r.count;
  f.loss_sum += r.loss * static_cast<double>(r.count);
  f.last = {name, r.count, r.loss, auc};
  auto per_sample =
    f.step_samples > 0
      ? fmt("; per sample before its step: log-loss = %.5f over %lld samples",
            f.step_loss_sum / static_cast<double>(f.step_samples),
            static_cast<long long>(f.step_samples))
      : std::string{};
  say(self, fmt("part %s: progressive log-loss = %.5f, AUC = %.5f over %lld "
                "samples before training on it (%.1f s); all %lld parts: "
                "log-loss = %.5f%s",
                name.c_str(), r.loss, auc, static_cast<long long>(r.count),
                f.score_seconds, static_cast<long long>(f.scored_parts),
                f.loss_sum
                  / static_cast<double>(std::max<int64_t>(f.scored_samples, 1)),
                per_sample.c_str()));
}

/// The whole batches of the plan's set.
int64_t plan_batches(chief_self self) {
  return self->state.follow.samples
         / static_cast<int64_t>(self->state.opts.cfg.training.batch_size);
}

/// Batches the plan keeps ahead of training: a few per worker, or as
/// many as train while a part is scored (from the last one's scoring
/// time and the rate so far), so that training need not wait for it.
int64_t lead(chief_self self) {
  auto& st = self->state;
  int64_t few = 4 * std::max(1, st.members.live_workers());
  auto seconds = st.progress.training_seconds(now_seconds());
  if (seconds <= 0 || st.follow.score_seconds <= 0)
    return few;
  auto rate = static_cast<double>(st.progress.samples()) / seconds;
  auto scoring = 1.5 * st.follow.score_seconds * rate
                 / st.opts.cfg.training.batch_size;
  return std::max(few, static_cast<int64_t>(scoring));
}

/// Scores known part `path` and hands it out; then the next one, if
/// training needs it.
void score_and_take(chief_self self, const std::string& path) {
  auto logs = load_click_logs({path}, known_parts(self).schema());
  if (!logs) {
    self->state.follow.taking = false;
    return fail_run(self, logs.error());
  }
  auto data = std::make_shared<dataset>(click_dataset(std::move(*logs)));
  auto began = now_seconds();
  // The model as the shards hold it now, dense part and rows, in the
  // chief's evaluator, which no evaluation uses meanwhile: one waits.
  auto& st = self->state;
  st.eval.evaluating = true;
  auto release = [=] {
    auto& s = self->state;
    s.eval.evaluating = false;
    run_when_evaluated(self);
    auto waiters = std::move(s.eval.waiters);
    s.eval.waiters.clear();
    for (auto& f : waiters)
      evaluate_now(self, std::move(f));
  };
  auto lost = [=] { // a shard was lost meanwhile: scored after the recovery
    self->state.follow.taking = false;
    release();
  };
  auto scored = [=](eval_result r, double auc) {
    auto& s = self->state;
    (void)data; // the set lives as long as its evaluation
    s.follow.score_seconds = now_seconds() - began;
    release();
    if (s.stopping()) {
      s.follow.taking = false;
      return;
    }
    count_score(self, base_name(path), r, auc);
    take(self, s.follow.taken.size());
    hand_out(self, [=] {
      self->state.follow.taking = false;
      take_next(self, false); // a backlog goes on at once
    });
  };
  pull_params(
    self,
    [=](std::vector<float>& params, int64_t) {
      self->state.eval.evaluator->set_params(params.data());
      evaluate_clicks(self, *data, scored, lost);
    },
    lost);
}

void take_next(chief_self self, bool surely) {
  auto& st = self->state;
  auto& f = st.follow;
  if (f.taking || f.closed || st.stopping() || st.recovery.recovering()
      || st.eval.evaluating)
    return;
  if (f.taken.size() >= known_parts(self).part_count())
    return;
  // The steps the workers reported trail those leased by a report's
  // worth per worker: the feeder, asked only when it may be time, says.
  auto reported_left = plan_batches(self) - st.progress.steps();
  if (!surely && reported_left > lead(self) + 16 * st.members.live_workers())
    return;
  f.taking = true;
  auto path = known_parts(self).part(f.taken.size()).path;
  self->request(st.shards.feeder, timeout_of(self), follow_atom_v, int64_t{0})
    .then(
      [=](feeder_stats& fs) {
        auto& s = self->state;
        if (plan_batches(self) - fs.position > lead(self) || s.eval.evaluating
            || s.stopping()) {
          s.follow.taking = false;
          return;
        }
        score_and_take(self, path);
      },
      [=](caf::error& err) {
        self->state.follow.taking = false;
        fail_run(self, std::move(err));
      });
}

/// Ends the plan when no part came for stop_after_idle_seconds.
void close_when_idle(chief_self self) {
  auto& st = self->state;
  auto& f = st.follow;
  auto idle = st.opts.cfg.data.follow_idle_stop_s;
  if (idle <= 0 || f.closed || f.taking
      || f.taken.size() < known_parts(self).part_count()
      || now_seconds() - f.last_part_time < idle)
    return;
  f.closed = true;
  say(self, fmt("data.follow: no new part for %.0f s; the run ends with "
                "the parts it has (%zu)",
                idle, f.taken.size()));
  self->request(st.shards.feeder, timeout_of(self), follow_atom_v, int64_t{-1})
    .then([](feeder_stats&) {},
          [=](caf::error& err) { fail_run(self, std::move(err)); });
}

} // namespace

void start_following(chief_self self) {
  auto& st = self->state;
  if (!st.opts.cfg.data.follow || st.follow.ticking)
    return;
  st.follow.ticking = true;
  st.follow.last_part_time = now_seconds();
  on_follow_tick(self);
}

void on_follow_tick(chief_self self) {
  auto& st = self->state;
  if (st.stopping()) {
    st.follow.ticking = false;
    return;
  }
  auto poll = st.opts.cfg.data.follow_poll_s;
  if (now_seconds() - st.follow.last_listing >= poll * 0.99) {
    st.follow.last_listing = now_seconds();
    list_folder(self);
    if (st.stopping())
      return; // a part that could not be read
  }
  // Checked at least every second: the feeder may have leased the plan's
  // last batches before the workers' reports said so.
  take_next(self, true);
  close_when_idle(self);
  self->delayed_send(self,
                     std::chrono::duration_cast<caf::timespan>(
                       std::chrono::duration<double>(std::min(poll, 1.0))),
                     follow_atom_v);
}

void follow_on_report(chief_self self, const worker_report& r) {
  auto& f = self->state.follow;
  if (!f.ticking)
    return;
  f.step_samples += r.samples;
  f.step_loss_sum += r.loss_sum;
  take_next(self, false);
}

void follow_cover(chief_self self, int64_t batches,
                  std::function<void()> then) {
  auto& st = self->state;
  if (!st.opts.cfg.data.follow)
    return then();
  auto need = batches * static_cast<int64_t>(st.opts.cfg.training.batch_size);
  auto parts = known_parts(self).parts();
  while (st.follow.samples < need && st.follow.taken.size() < parts.size())
    take(self, st.follow.taken.size());
  if (st.follow.samples < need)
    return fail_run(
      self,
      make_error(
        errc::data_changed,
        fmt("data.follow: the run trained %lld samples, but "
            "the parts of %s hold %lld: a part it trained "
            "went missing",
            static_cast<long long>(need), st.opts.cfg.data.follow_glob.c_str(),
            static_cast<long long>(
              parts.empty() ? 0 : parts.back().first + parts.back().count))));
  if (st.follow.samples > 0)
    say(self,
        fmt("data.follow: the %zu parts trained before (%lld samples) "
            "are in the plan again",
            st.follow.taken.size(), static_cast<long long>(st.follow.samples)));
  hand_out(self, std::move(then));
}

void follow_tell_agent(chief_self self, const node_agent_actor& agent) {
  auto& st = self->state;
  if (st.follow.taken.empty())
    return;
  // Before any worker is placed there: the agent takes its messages in
  // the order they were sent.
  self->request(agent, timeout_of(self), follow_atom_v, st.follow.taken)
    .then([](int64_t) {},
          [=](caf::error& err) {
            say(self, "data.follow: a node could not take the parts: "
                        + describe(err));
          });
}

void follow_summary(chief_self self) {
  auto& f = self->state.follow;
  if (!self->state.opts.cfg.data.follow)
    return;
  auto mean = [](double sum, int64_t n) {
    return n > 0 ? sum / static_cast<double>(n) : 0.0;
  };
  say(self, fmt("stream: %zu parts trained; progressive log-loss = %.5f "
                "over %lld samples, each before its step; parts scored "
                "before training: log-loss = %.5f over %lld samples",
                f.taken.size(), mean(f.step_loss_sum, f.step_samples),
                static_cast<long long>(f.step_samples),
                mean(f.loss_sum, f.scored_samples),
                static_cast<long long>(f.scored_samples)));
}

void follow_to_checkpoint(chief_self self, checkpoint& ckpt) {
  auto& f = self->state.follow;
  if (!self->state.opts.cfg.data.follow)
    return;
  std::string names;
  for (auto& p : f.taken)
    names += (names.empty() ? "" : "\n") + base_name(p);
  ckpt.metadata["followed_parts"] = names;
  ckpt.metadata["progressive"] = fmt(
    "%lld %lld %.17g %lld %.17g", static_cast<long long>(f.scored_parts),
    static_cast<long long>(f.scored_samples), f.loss_sum,
    static_cast<long long>(f.step_samples), f.step_loss_sum);
}

caf::error follow_from_checkpoint(chief_self self, const checkpoint& ckpt) {
  auto& st = self->state;
  auto& f = st.follow;
  if (!st.opts.cfg.data.follow)
    return caf::none;
  if (auto it = ckpt.metadata.find("progressive"); it != ckpt.metadata.end()) {
    std::istringstream in{it->second};
    long long parts = 0, samples = 0, steps = 0;
    double sum = 0, step_sum = 0;
    if (in >> parts >> samples >> sum >> steps >> step_sum) {
      f.scored_parts = parts;
      f.scored_samples = samples;
      f.loss_sum = sum;
      f.step_samples = steps;
      f.step_loss_sum = step_sum;
    }
  }
  auto it = ckpt.metadata.find("followed_parts");
  if (it == ckpt.metadata.end() || it->second.empty())
    return caf::none;
  auto parts = known_parts(self).parts();
  std::istringstream in{it->second};
  std::string name;
  for (size_t i = 0; std::getline(in, name); ++i)
    if (i >= parts.size() || base_name(parts[i].path) != name)
      return make_error(errc::data_changed,
                        "data.follow: the checkpoint's part "
                          + std::to_string(i) + " is " + name
                          + ", but the folder's is "
                          + (i < parts.size() ? base_name(parts[i].path)
                                              : std::string{"missing"})
                          + ": the parts trained before changed");
  return caf::none;
}

} // namespace troupe::chief_ops

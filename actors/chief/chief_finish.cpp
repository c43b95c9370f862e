// The end of a run: the last steps settle, then the final checkpoint,
// evaluation and summary, and the nodes are released; and what brings it
// there early (the user's stop, no worker left).
#include <algorithm>
#include <cmath>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

namespace {

/// async and ssp: how many updates of other workers came between a
/// step's pull and its push being applied, the mean over the run's steps
/// and per worker (as the workers reported it; sync has none).
void print_staleness(chief_self self) {
  if (self->state.opts.cfg.cluster.consistency == cluster_config::mode::sync)
    return;
  int64_t steps = 0, sum = 0;
  std::string each;
  for (auto& [id, w] : self->state.members.workers()) {
    if (w.steps <= 0)
      continue;
    steps += w.steps;
    sum += w.staleness_sum;
    each += fmt("%sworker %d %.2f", each.empty() ? "" : ", ", id,
                w.mean_staleness());
  }
  if (steps > 0)
    say(self, fmt("mean staleness of a step: %.2f (%s)",
                  static_cast<double>(sum) / static_cast<double>(steps),
                  each.c_str()));
}

void print_summary(chief_self self, const cluster_summary& r) {
  auto& c = self->state.opts.cfg;
  std::string per_epoch;
  for (auto n : r.epoch_samples)
    per_epoch += " " + std::to_string(n);
  say(self, "samples trained per epoch:" + per_epoch);
  follow_summary(self);
  // replicated, sharded: what each worker's own stream got (an epoch a
  // worker joined after shows 0).
  if (c.training.partition != data_partition::shared)
    for (auto& w : r.workers) {
      std::string line;
      for (auto n : w.samples)
        line += " " + std::to_string(n);
      say(self, fmt("worker %d samples per epoch (%s):", w.worker,
                    to_string(c.training.partition))
                  + line);
    }
  say(self, fmt("pushes accepted %lld, stale %lld, refused %lld",
                static_cast<long long>(r.pushes_accepted),
                static_cast<long long>(r.pushes_stale),
                static_cast<long long>(r.pushes_refused)));
  print_staleness(self);
  if (self->state.recovery.recoveries() > 0)
    say(self,
        fmt("shard recoveries: %d (of which replicas took over: %d), "
            "steps lost and retrained: %lld",
            self->state.recovery.recoveries(), self->state.recovery.takeovers(),
            static_cast<long long>(self->state.recovery.lost_steps())));
  if (self->state.recovery.moves() > 0)
    say(self,
        fmt("shards added or drained: %d, leasing paused %.3f s for "
            "them in all",
            self->state.recovery.moves(), self->state.recovery.move_seconds()));
  // The table comes last: scripts read its row from the final line.
  say(self,
      fmt("%-24s %-6s %7s %6s %8s %7s %8s %11s %9s %8s", "run", "mode",
          "workers", "shards", "steps", "epochs", "seconds", "examples/s",
          is_regression(self->state.opts.cfg.model.loss) ? "test r2"
                                                         : "test acc",
          "restarts"),
      false);
  // "-" where the run was not evaluated, as in the progress lines.
  std::string acc = r.test_accuracy == -1 ? std::string{"-"}
                                          : fmt("%.4f", r.test_accuracy);
  say(self,
      fmt("%-24s %-6s %7zu %6d %8lld %7.2f %8.1f %11.1f %9s %8d",
          c.name.c_str(), to_string(c.cluster.consistency),
          self->state.members.workers().size(), c.cluster.shards,
          static_cast<long long>(r.steps), r.epochs, r.seconds,
          r.examples_per_sec, acc.c_str(), r.restarts),
      false);
}

void finish_run(chief_self self) {
  auto& st = self->state;
  if (st.stopping())
    return;
  st.enter(run_phase::finishing);
  double seconds = st.progress.training_seconds(now_seconds());
  auto after_checkpoint = [=] {
    // The final parameters, pulled once: every worker has left (their
    // leaves reached the shards before this pull), so nothing changes
    // them now. An update applied since the last evaluation began, with
    // no step of its own (sync: the last one, short of pushes, applied as
    // the workers leave), makes the final evaluation score again.
    pull_params(self, [=](std::vector<float>& params, int64_t version) {
      if (version != self->state.eval.last_eval_version)
        self->state.eval.last_eval_step = -1;
      auto final_params = std::make_shared<std::vector<float>>(
        std::move(params));
      evaluate_now(self, [=] {
        auto& s = self->state;
        cluster_summary r;
        r.steps = s.progress.steps();
        r.epochs = epoch_of(self, s.progress.steps());
        r.seconds = seconds;
        r.examples_per_sec = static_cast<double>(s.progress.samples())
                             / seconds;
        r.test_accuracy = s.eval.last_accuracy;
        r.test_loss = s.eval.last_loss;
        if (s.opts.data->validation.count > 0) {
          // The evaluator holds the final parameters (no step since): the
          // test set is scored once, now.
          auto t = evaluate(*s.eval.evaluator, s.opts.data->test,
                            std::max(s.opts.cfg.training.batch_size, 256));
          auto validated = is_regression(s.opts.cfg.model.loss)
                             ? fmt(
                               "validation r2 = %.4f, validation mse = %.4g",
                               r.test_accuracy, r.test_loss)
                             : fmt("validation accuracy = %.4f, validation "
                                   "loss = %.4f",
                                   r.test_accuracy, r.test_loss);
          say(self, fmt("final: %s; %s (%lld examples)", validated.c_str(),
                        describe_scores(t, "test").c_str(),
                        static_cast<long long>(t.count)));
          r.test_accuracy = headline(t);
          r.test_loss = t.loss;
        }
        r.restarts = s.members.total_restarts();
        ask_all_shards<shard_stats>(
          self, [=](size_t i) { return ask_shard(self, i, stats_atom_v); },
          [=](std::vector<shard_stats>& stats) {
            auto summary = r;
            summary.version = version;
            // async, ssp: a version is the batches a shard applied, each
            // once; a lost step would show as a shard behind the others.
            std::string versions;
            for (auto& x : stats)
              versions += " " + std::to_string(x.version);
            say(self, "shard versions at the end:" + versions);
            // "N table rows in X GiB, rows pulled P, pushed Q" of a
            // shard's tables ("N rows ..." of one of them).
            auto rows_text = [](const char* what, int64_t rows, int64_t bytes,
                                int64_t pulled, int64_t pushed) {
              return fmt("%lld %s in %.2f GiB, rows pulled %lld, pushed %lld",
                         static_cast<long long>(rows), what,
                         static_cast<double>(bytes) / (1024.0 * 1024 * 1024),
                         static_cast<long long>(pulled),
                         static_cast<long long>(pushed));
            };
            auto setups = embedding_tables(self->state.opts.cfg);
            for (auto& x : stats) {
              summary.pushes_accepted += x.accepted;
              summary.pushes_stale += x.stale;
              summary.pushes_refused += x.refused;
              if (has_tables(self))
                say(self, fmt("shard %d: %s", x.shard,
                              rows_text("table rows", x.rows, x.row_bytes,
                                        x.rows_pulled, x.rows_pushed)
                                .c_str()));
              // With several tables, each one's share (one table's is the
              // line above).
              if (x.tables.size() > 1)
                for (size_t t = 0; t < x.tables.size() && t < setups.size();
                     ++t) {
                  auto& c = x.tables[t];
                  say(self, fmt("shard %d table %s: %s", x.shard,
                                setups[t].table.name.c_str(),
                                rows_text("rows", c.rows, c.row_bytes,
                                          c.rows_pulled, c.rows_pushed)
                                  .c_str()));
                }
              // A bounded table's admissions and evictions.
              for (size_t t = 0; t < x.tables.size() && t < setups.size();
                   ++t) {
                auto& c = x.tables[t];
                if (c.rows_rejected > 0 || c.rows_evicted > 0)
                  say(self, fmt("shard %d table %s: rows made %lld, not "
                                "admitted %lld, evicted %lld",
                                x.shard, setups[t].table.name.c_str(),
                                static_cast<long long>(c.rows_made),
                                static_cast<long long>(c.rows_rejected),
                                static_cast<long long>(c.rows_evicted)));
              }
            }
            auto shard_stats_copy = std::make_shared<std::vector<shard_stats>>(
              std::move(stats));
            self
              ->request(self->state.shards.feeder, timeout_of(self),
                        stats_atom_v)
              .then(
                [=](feeder_stats& fs) {
                  auto done = summary;
                  // The feeder's count is the authority: a worker that died
                  // may have settled steps it had not reported yet.
                  done.steps = fs.acked;
                  done.epochs = epoch_of(self, fs.acked);
                  done.epoch_samples = std::move(fs.epoch_samples);
                  done.workers = std::move(fs.workers);
                  print_summary(self, done);
                  if (self->state.opts.on_finish)
                    self->state.opts.on_finish(*final_params,
                                               *shard_stats_copy);
                  self->state.enter(run_phase::ended);
                  release_nodes(self, caf::error{}, [=] {
                    self->state.reply.deliver(done);
                    shut_down(self);
                  });
                },
                [=](caf::error& err) { fail_run(self, std::move(err)); });
          });
      });
    });
  };
  // The last export follows the final checkpoint: both at the last step.
  auto files = [=] { export_now(self, after_checkpoint); };
  if (!st.opts.cfg.training.checkpoint.dir.empty())
    checkpoint_now(self, files);
  else
    files();
}

/// When no worker runs or is being started, the ones waiting for their
/// node are let go (nothing is left for them, or the run was stopped),
/// and with no worker left the run finishes.
} // namespace

void release_waiting_if_idle(chief_self self) {
  auto& st = self->state;
  for (auto& [id, w] : st.members.workers())
    if (w.state == worker_phase::running || w.state == worker_phase::starting
        || w.state == worker_phase::leaving)
      return;
  for (auto& [id, w] : st.members.workers())
    if (w.state == worker_phase::waiting) {
      say(self, fmt("worker %d: nothing left to train; it no longer waits "
                    "for node %s",
                    id, w.node.c_str()));
      w.state = worker_phase::finished;
      for (auto& s : st.shards.handles())
        if (s)
          self->send(s, leave_atom_v, id);
    }
  finish_run(self);
}

void stop_run(chief_self self, const std::string& who) {
  auto& st = self->state;
  say(self, "stop requested by " + who
              + "; finishing after the steps in "
                "flight");
  self->send(st.shards.feeder, finish_atom_v);
  if (st.progress.user_paused())
    set_user_pause(self, false);
  // Workers waiting for a node will not come back to end on their own.
  release_waiting_if_idle(self);
}

} // namespace troupe::chief_ops

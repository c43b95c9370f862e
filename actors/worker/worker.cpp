#include "actors/worker/worker.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <type_traits>

#include "actors/fan_out.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using self_ptr = worker_actor::stateful_pointer<worker_state>;

/// The timeout of a request to a shard or to the feeder, made at every
/// step: none of the worker's own. A data-plane stub times its requests
/// out itself (at the request timeout its connection was opened with); a
/// shard in this process and the feeder answer every request, holding one
/// at most their hold time, and when either is lost the chief (or, with
/// the chief, the node agent) stops this worker. A timeout would cost an
/// entry in CAF's clock per request, which CAF 0.17 keeps until it fires,
/// answered or not: at 10,000 steps/s with four shards in the process,
/// 30 s of timeouts are 2.7 million entries on the heap.
caf::duration timeout_per_step() {
  return caf::infinite;
}

void fail(self_ptr self, caf::error err) {
  self->quit(std::move(err));
}

/// Pulls shard `i` (again, when the shard held the pull for as long as it
/// may: a pause, a worker waiting for its node) and stores its values;
/// `one_done` runs once they are in.
void pull_one(self_ptr self, size_t i, std::function<void()> one_done) {
  auto& st = self->state;
  auto placement = st.placement;
  // Asked of a shard map that is gone: pull_all asks the new one.
  auto moved = [=] { return self->state.placement != placement; };
  self
    ->request(st.opts.shards[i], timeout_per_step(), pull_atom_v, st.opts.id,
              i < st.min_versions.size() ? st.min_versions[i] : int64_t{0})
    .then(
      [=](const float_block& b) {
        if (moved())
          return one_done();
        if (b.ask_again())
          return pull_one(self, i, one_done);
        auto& s = self->state;
        auto r = s.opts.ranges[i];
        if (!b.values || b.values->size() != r.size())
          return fail(self, make_error(errc::wrong_size,
                                       "pull from shard " + std::to_string(i)
                                         + " returned the wrong size"));
        s.kind->take_values(i, r, b.values);
        s.versions[i] = b.version;
        one_done();
      },
      [=](caf::error& err) {
        if (moved())
          return one_done();
        fail(self, std::move(err));
      });
}

/// Pulls every shard in parallel; `then` runs once its kind has taken all
/// the values.
void pull_all(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  auto placement = st.placement;
  // Not ask_all: a pull that a shard held comes back as "ask again" and
  // pull_one asks once more, so each part ends in its own time.
  auto pulled = countdown(st.opts.shards.size(), [=] {
    auto& s = self->state;
    if (s.placement == placement)
      return then();
    // The shards moved under the pull: again from the new map, once
    // it is here.
    if (s.shards_moving)
      return s.parked.push_back([=] { pull_all(self, then); });
    pull_all(self, then);
  });
  for (size_t i = 0; i < st.opts.shards.size(); ++i)
    pull_one(self, i, pulled);
}

/// Sends every shard its slice of `flat` (layout.total() floats), computed
/// on plan batch `batch` (-1: an elastic difference, of no one batch);
/// `applied` runs once every shard has accepted its slice.
void push_all(self_ptr self, std::shared_ptr<const std::vector<float>> flat,
              int64_t batch, std::function<void()> applied) {
  auto& st = self->state;
  auto pulled = st.versions; // what each slice was computed on
  ask_all<push_ack>(
    st.opts.shards.size(),
    [=](size_t i) {
      auto& s = self->state;
      gradient_push g;
      g.shard = static_cast<int32_t>(i);
      g.worker = s.opts.id;
      g.tag = pulled[i];
      g.batch = batch;
      g.buffer = flat;
      g.offset = s.opts.ranges[i].begin;
      g.size = s.opts.ranges[i].size();
      return self->request(s.opts.shards[i], timeout_per_step(), push_atom_v,
                           std::move(g));
    },
    [=](std::vector<push_ack>& acks) {
      auto& r = self->state.report;
      int64_t step_staleness = 0;
      for (size_t i = 0; i < acks.size(); ++i)
        step_staleness = std::max(step_staleness,
                                  acks[i].version - 1 - pulled[i]);
      r.staleness = std::max(r.staleness, step_staleness);
      r.staleness_sum += step_staleness;
      applied();
    },
    [=](caf::error& err) { fail(self, std::move(err)); });
}

/// Sends each of `messages` (row requests or pushes, each naming its
/// shard) to that shard after `atom`; `done` gets the replies in order,
/// and a request that fails fails the worker. A shard that is sent more
/// than one (a model of several tables: one per table) gets them in one
/// message (row_requests, row_pushes), which saves a round trip per table
/// and shard, and the thread hand-offs at both ends of each.
template <class Reply, class Atom, class Message, class Done>
void ask_row_shards(self_ptr self, Atom atom, std::vector<Message> messages,
                    Done done) {
  auto all = std::make_shared<std::vector<Message>>(std::move(messages));
  auto failed = [=](caf::error& err) { fail(self, std::move(err)); };
  std::map<int32_t, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < all->size(); ++i)
    by_shard[(*all)[i].shard].push_back(i);
  if (by_shard.size() == all->size()) {
    ask_all<Reply>(
      all->size(),
      [=](size_t i) {
        auto& m = (*all)[i];
        auto shard = static_cast<size_t>(m.shard);
        return self->request(self->state.opts.shards[shard], timeout_per_step(),
                             atom, std::move(m));
      },
      std::move(done), failed);
    return;
  }
  constexpr bool pulls = std::is_same_v<Message, row_request>;
  using parts_message = std::conditional_t<pulls, row_requests, row_pushes>;
  using parts_reply = std::conditional_t<pulls, row_blocks, push_ack>;
  auto groups = std::make_shared<std::vector<std::vector<size_t>>>();
  for (auto& [shard, at] : by_shard)
    groups->push_back(std::move(at));
  ask_all<parts_reply>(
    groups->size(),
    [=](size_t g) {
      parts_message m;
      for (auto i : (*groups)[g])
        m.parts.push_back(std::move((*all)[i]));
      auto shard = static_cast<size_t>(m.parts.front().shard);
      return self->request(self->state.opts.shards[shard], timeout_per_step(),
                           atom, std::move(m));
    },
    [=](std::vector<parts_reply>& replies) {
      std::vector<Reply> out(all->size());
      for (size_t g = 0; g < groups->size(); ++g) {
        auto& at = (*groups)[g];
        if constexpr (pulls) {
          auto& parts = replies[g].parts;
          if (parts.size() != at.size())
            return fail(self, make_error(errc::wrong_size,
                                         "a shard answered rows of "
                                           + std::to_string(parts.size())
                                           + " tables for "
                                           + std::to_string(at.size())));
          for (size_t k = 0; k < at.size(); ++k)
            out[at[k]] = std::move(parts[k]);
        } else {
          for (auto i : at)
            out[i] = replies[g];
        }
      }
      done(out);
    },
    failed);
}

/// The rows of embedding tables the leased batch needs (its kind says
/// which: a click model's), each asked of the shard that holds it; `then`
/// runs once all are in, at once when the kind needs none.
void pull_rows(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  auto needed = st.kind->rows_needed(st.lease, st.opts.id);
  if (!needed)
    return fail(self, needed.error());
  if (needed->empty())
    return then();
  ask_row_shards<row_block>(
    self, pull_atom_v, std::move(*needed), [=](std::vector<row_block>& blocks) {
      if (auto err = self->state.kind->take_rows(blocks))
        return fail(self, std::move(err));
      then();
    });
}

/// Pushes each shard the row gradients of this step that are its own;
/// `applied` runs once every shard took them.
void push_rows(self_ptr self, std::vector<row_push> rows,
               std::function<void()> applied) {
  ask_row_shards<push_ack>(self, push_atom_v, std::move(rows),
                           [=](std::vector<push_ack>&) { applied(); });
}

/// Sends the steps settled since the last report to the chief.
void flush_report(self_ptr self) {
  auto& st = self->state;
  if (st.report.steps == 0)
    return;
  st.report.worker = st.opts.id;
  self->send(st.opts.chief, report_atom_v, st.report);
  st.report = worker_report{};
  st.last_report = now_seconds();
}

/// Acks the leases whose steps are settled, in one message.
void flush_acks(self_ptr self) {
  auto& st = self->state;
  if (st.acks_due.empty())
    return;
  self->send(st.opts.feeder, ack_atom_v, std::exchange(st.acks_due, {}));
}

/// Ends the worker once the feeder is done (or it was told to finish) and
/// every pushed step is settled (and none computes apart: it pushes next).
void quit_when_settled(self_ptr self) {
  auto& st = self->state;
  if ((st.feeder_done || st.draining) && st.unsettled == 0 && !st.computing) {
    flush_acks(self);
    flush_report(self);
    self->quit();
  }
}

void next_step(self_ptr self);
void send_step(self_ptr self);

/// What to do once a step's pushes are applied: ack its lease (the batch is
/// done only then) and count it for the next report to the chief (so every
/// reported step is applied on every shard). While batches leased ahead
/// remain, acks wait to go together: the worker trains those without the
/// feeder, which a pause for a checkpoint waits on no longer than that.
/// Once none remain, the worker is asking (or about to ask) for more, and
/// a paused feeder needs every ack to settle: they go at once. An ack lost
/// with a killed worker leaves its batch leased: it is requeued and
/// trained again, and the shards apply it once (a duplicate is refused).
std::function<void()> settle(self_ptr self) {
  auto& st = self->state;
  worker_report r;
  r.epoch = st.lease.epoch;
  r.steps = 1;
  r.samples = static_cast<int32_t>(st.lease.samples.size());
  r.hits = static_cast<int32_t>(st.loss.correct);
  r.loss_sum = st.loss.loss_sum;
  r.step_seconds = now_seconds() - st.step_start;
  r.clock = st.clock + 1;
  auto cost = st.kind->take_read_cost();
  r.read_seconds = cost.seconds;
  r.read_bytes = cost.bytes;
  auto lease = st.lease.id;
  ++st.unsettled;
  return [=] {
    auto& s = self->state;
    s.acks_due.push_back(lease);
    if (s.leased_ahead.empty())
      flush_acks(self);
    auto& acc = s.report;
    acc.epoch = r.epoch;
    acc.steps += r.steps;
    acc.samples += r.samples;
    acc.hits += r.hits;
    acc.loss_sum += r.loss_sum;
    acc.step_seconds += r.step_seconds;
    acc.read_seconds += r.read_seconds;
    acc.read_bytes += r.read_bytes;
    acc.clock = r.clock;
    --s.unsettled;
    if (acc.steps >= 8 || now_seconds() - s.last_report >= 0.05)
      flush_report(self);
    quit_when_settled(self);
    if (s.step_deferred && s.unsettled < max_unsettled && !s.feeder_done
        && !s.draining) {
      s.step_deferred = false;
      next_step(self);
    }
  };
}

/// The step's messages are out: the next one starts at once. A later pull
/// to a shard is queued behind this step's push to it (CAF keeps the order
/// of messages between two actors), so it sees this step's update.
void next(self_ptr self) {
  ++self->state.clock;
  self->send(self, step_atom_v);
}

/// A flat gradient buffer that no shard reads any more. In one process the
/// shards read their slices of the worker's buffer in place until they have
/// applied them, so the worker cycles through a few.
std::shared_ptr<std::vector<float>> free_gradient_buffer(self_ptr self) {
  auto& st = self->state;
  for (auto& b : st.grad_pool)
    if (b.use_count() == 1) {
      // Pairs with the release in the shards' shared_ptr destructors: their
      // reads of this buffer are done before it is written again.
      std::atomic_thread_fence(std::memory_order_acquire);
      return b;
    }
  st.grad_pool.push_back(
    std::make_shared<std::vector<float>>(st.kind->flat_size()));
  return st.grad_pool.back();
}

bool check_finite(self_ptr self, int n);

/// The step its kind computes on the leased batch; false after reporting
/// a non-finite loss (the chief then stops the run) or failing.
bool compute(self_ptr self) {
  auto& st = self->state;
  if (st.opts.fault_hook)
    st.opts.fault_hook(st.opts.id, st.clock);
  auto loss = st.kind->compute(st.lease, st.clock, [=] {
    auto& s = self->state;
    s.grads = free_gradient_buffer(self);
    return s.grads->data();
  });
  if (!loss) {
    fail(self, std::move(loss.error()));
    return false;
  }
  st.loss = *loss;
  return check_finite(self, static_cast<int>(st.lease.samples.size()));
}

/// True when the step's loss is finite; else reports it to the chief,
/// which stops the run.
bool check_finite(self_ptr self, int n) {
  auto& st = self->state;
  if (std::isfinite(st.loss.loss_sum))
    return true;
  worker_report r;
  r.worker = st.opts.id;
  r.epoch = st.lease.epoch;
  r.samples = n;
  r.loss_sum = st.loss.loss_sum;
  r.clock = st.clock;
  self->send(st.opts.chief, report_atom_v, r);
  return false;
}

/// Runs the step's computation on the kind's own thread (the computer
/// actor), then checks and sends it as compute() and send_step() do; the
/// worker meanwhile leases and pulls the next step. That step's lease and
/// values may come before this one is done: the step is checked and
/// sent with its own lease and pulled versions.
void compute_apart(self_ptr self) {
  auto& st = self->state;
  if (st.opts.fault_hook)
    st.opts.fault_hook(st.opts.id, st.clock);
  st.grads = free_gradient_buffer(self);
  auto lease = std::make_shared<lease_grant>(st.lease);
  auto versions = std::make_shared<std::vector<int64_t>>(st.versions);
  st.computing_slot->job = st.kind->compute_apart(*lease, st.clock,
                                                  st.grads->data(), st.grads);
  st.computing = true;
  self->request(st.computer, caf::infinite, step_atom_v)
    .then(
      [=](bool) {
        auto& s = self->state;
        s.computing = false;
        auto loss = std::move(s.computing_slot->result);
        std::swap(s.lease, *lease);
        std::swap(s.versions, *versions);
        if (!loss) {
          fail(self, std::move(loss.error()));
        } else {
          s.loss = *loss;
          if (check_finite(self, static_cast<int>(s.lease.samples.size())))
            send_step(self);
          else
            s.halted = true;
        }
        std::swap(s.lease, *lease);
        std::swap(s.versions, *versions);
        if (auto waiting = std::exchange(s.waiting_compute, nullptr))
          waiting();
        else
          quit_when_settled(self);
      },
      [=](caf::error& err) { fail(self, std::move(err)); });
}

/// The leased batch's rows are in: async with prefetch starts the next
/// step's pull and lease now, so that their answers (and, for a kind that
/// computes apart, the next batch's rows) come while this one computes;
/// then it computes and sends. Not before the rows are in: the kinds
/// plan one batch's rows at a time.
void start_compute(self_ptr self) {
  auto& st = self->state;
  if (st.halted)
    return;
  // Told to finish meanwhile: the batch stays untrained and unacked, as
  // in next_step's work.
  if (st.draining)
    return quit_when_settled(self);
  if (st.computing) { // the step before still computes apart
    st.waiting_compute = [=] { start_compute(self); };
    return;
  }
  auto& cluster = st.opts.cfg.cluster;
  if (cluster.consistency == cluster_config::mode::async && cluster.prefetch)
    next_step(self);
  if (st.kind->computes_apart())
    return compute_apart(self);
  if (compute(self))
    send_step(self);
  else
    st.halted = true;
}

/// Pushes the gradient of the leased batch to every shard, then goes on.
void push_gradient(self_ptr self) {
  auto& st = self->state;
  auto applied = settle(self);
  auto batch = st.lease.batch;
  auto rows = st.kind->rows_to_push(st.opts.id, batch, st.versions);
  if (!rows.empty()) {
    // Settled once the dense slices and the rows are all applied; the
    // rows go first (sync: a shard holds them for the dense push).
    auto both = countdown(2, std::move(applied));
    push_rows(self, std::move(rows), both);
    applied = both;
  }
  push_all(self, st.grads, batch, std::move(applied));
  auto& cluster = st.opts.cfg.cluster;
  if (cluster.consistency == cluster_config::mode::async && cluster.prefetch) {
    // The next step is already on its way (see next_step).
    ++st.clock;
    return;
  }
  if (cluster.consistency == cluster_config::mode::sync) {
    // The next pull waits for the update this push is part of.
    st.min_versions = st.versions;
    for (auto& v : st.min_versions)
      ++v;
  }
  next(self);
}

/// What a computed step sends the shards, as its kind says: its gradient
/// (and rows); nothing (an elastic worker's local step); or the elastic
/// exchange: the center pulled, the difference pushed.
void send_step(self_ptr self) {
  auto& st = self->state;
  switch (st.kind->push_after(st.clock)) {
    case step_push::gradient: return push_gradient(self);
    case step_push::none: settle(self)(); return next(self);
    case step_push::elastic:
      return pull_all(self, [=] {
        push_all(self, self->state.kind->elastic_difference(), -1,
                 settle(self));
        next(self);
      });
  }
}

/// How many batches to ask the feeder for at once. An async worker leases
/// what it trains in cluster.lease_ahead_ms at its recent pace, at most
/// max_leases_ahead, and one until a step was timed: a lease and its
/// reply cross to the chief's process for every request, and the feeder
/// answers every worker from one actor (docs/scale.md). The other modes
/// lease one at a time: their updates and pulls wait on each worker's
/// lease in turn.
int32_t leases_wanted(const worker_state& st) {
  auto& c = st.opts.cfg.cluster;
  if (c.consistency != cluster_config::mode::async || c.lease_ahead_ms <= 0
      || !(st.step_interval > 0))
    return 1;
  auto n = static_cast<double>(c.lease_ahead_ms) / 1000.0 / st.step_interval;
  return static_cast<int32_t>(
    std::clamp(n, 1.0, static_cast<double>(max_leases_ahead)));
}

/// Leases a batch into state.lease and runs `then` with whether the
/// request was held at the feeder. Quits when the feeder is done. "wait"
/// comes only after the feeder held the request for its hold time, so the
/// worker asks again at once: that is one message per hold, not a poll.
/// Batches granted beyond the first wait in state.leased_ahead for
/// next_step; those a worker holds when it is lost or told to finish go
/// back to the feeder with its other leases (the chief requeues them).
void lease_then(self_ptr self, std::function<void(bool held)> then) {
  auto& st = self->state;
  self
    ->request(st.opts.feeder, timeout_per_step(), lease_atom_v, st.opts.id,
              leases_wanted(st))
    .then(
      [=](lease_reply& r) {
        if (r.status == lease_reply::done) {
          // Done once every pushed step is settled (its lease acked).
          self->state.feeder_done = true;
          return quit_when_settled(self);
        }
        if (r.status == lease_reply::wait)
          return lease_then(self, [=](bool) { then(true); });
        auto& s = self->state;
        s.lease = std::move(r.grant);
        for (auto& g : r.more)
          s.leased_ahead.push_back(std::move(g));
        then(r.held);
      },
      [=](caf::error& err) { fail(self, std::move(err)); });
}

/// One step. async asks for the batch and the values at once. sync and
/// ssp pull first (ssp: see below). sync: a worker then leases its batch
/// for step s+1 only after update s, so every update averages consecutive
/// batches, one per worker.
/// async with cluster.prefetch: as a step starts computing, the next
/// step's pull and lease go out, so their answers wait in the mailbox when
/// it is done and the shards' update of this step overlaps the next one's
/// compute. A step's values then lack the worker's own previous update
/// (one step stale, like Downpour's fetch); every push is still applied
/// once. It is on by default across processes, where the shards' values
/// are then looked ahead by that step (cluster.stale_lookahead), and off in
/// one process. Without prefetch the pull follows the push, as in ssp:
/// every push is then one step less stale, which at SGD 0.1 and without
/// look-ahead is worth 1.8 points of test accuracy with one worker
/// (docs/architecture.md, "Consistency modes").
void next_step(self_ptr self) {
  auto& st = self->state;
  if (st.draining)
    return quit_when_settled(self);
  if (st.unsettled >= max_unsettled) {
    // Backpressure: the shards hold a bounded number of this worker's
    // pushes (see max_unsettled); this step starts when one is applied.
    st.step_deferred = true;
    return;
  }
  auto now = now_seconds();
  if (st.step_start > 0) {
    auto interval = now - st.step_start;
    st.step_interval = st.step_interval > 0
                         ? 0.8 * st.step_interval + 0.2 * interval
                         : interval;
  }
  st.step_start = now;
  auto work = [=] {
    if (self->state.halted)
      return;
    // Told to finish while the batch came: it stays untrained and unacked
    // (the chief puts it back).
    if (self->state.draining)
      return quit_when_settled(self);
    pull_rows(self, [=] { start_compute(self); });
  };
  // An elastic worker computes on its own replica: it pulls every tau
  // steps only (send_step).
  if (!st.kind->pulls_each_step())
    return lease_then(self, [=](bool) { work(); });
  switch (self->state.opts.cfg.cluster.consistency) {
    case cluster_config::mode::sync:
      // Nobody pushes while this lease is held (sync updates need every
      // worker), so the values pulled before it are still current.
      return pull_all(self, [=] { lease_then(self, [=](bool) { work(); }); });
    case cluster_config::mode::ssp:
      // The pull may wait for the slowest worker, which needs a lease to
      // catch up: a worker that held a lease meanwhile would keep a pause
      // (a checkpoint, a move of the shards) from settling, and the
      // slowest worker from ever getting one. So the lease comes after
      // the pull, and a lease that was held does not pull again (it might
      // wait once more, lease in hand): the values met the bound when
      // pulled, and a pause adds at most the pushes it let settle.
      return pull_all(self, [=] { lease_then(self, [=](bool) { work(); }); });
    default: {
      auto left = std::make_shared<int>(2);
      auto was_held = std::make_shared<bool>(false);
      // A batch leased ahead becomes the step's lease once the pull is
      // in, not now: with prefetch this runs as the step before starts
      // computing, and that step still trains state.lease.
      std::shared_ptr<lease_grant> ahead;
      if (!st.leased_ahead.empty()) {
        ahead = std::make_shared<lease_grant>(
          std::move(st.leased_ahead.front()));
        st.leased_ahead.pop_front();
        --*left;
      }
      auto join = [=] {
        if (--*left > 0)
          return;
        if (ahead)
          self->state.lease = std::move(*ahead);
        // Values pulled before a pause or a wait for a straggler are old:
        // pull them again.
        if (*was_held)
          return pull_all(self, work);
        work();
      };
      pull_all(self, join);
      if (!ahead)
        lease_then(self, [=](bool held) {
          *was_held = held;
          join();
        });
    }
  }
}

/// The chief moves the shards (see worker_state::placement): with no map,
/// they are moving; with one, they are where it says. Every push of this
/// worker is applied by then (the feeder is paused until no lease is out),
/// so only pulls can be under way, and they are asked again.
caf::result<bool> take_shard_map(self_ptr self,
                                 std::vector<shard_data_actor>& shards,
                                 std::vector<uint64_t>& bounds) {
  auto& st = self->state;
  ++st.placement;
  if (shards.empty()) {
    st.shards_moving = true;
    return true;
  }
  auto total = st.opts.ranges.empty() ? 0 : st.opts.ranges.back().end;
  if (bounds.size() != shards.size() + 1 || bounds.front() != 0
      || bounds.back() != total)
    return make_error(errc::invalid_argument,
                      "worker " + std::to_string(st.opts.id)
                        + ": a shard map of " + std::to_string(shards.size())
                        + " shards and " + std::to_string(bounds.size())
                        + " bounds that do not cover its "
                        + std::to_string(total) + " parameters");
  auto n = shards.size();
  st.opts.shards = std::move(shards);
  st.opts.ranges = ranges_of(bounds);
  // Every shard took the versions over: the next pull sets them again.
  auto most = [](const std::vector<int64_t>& v) {
    return v.empty() ? int64_t{0} : *std::max_element(v.begin(), v.end());
  };
  st.versions.assign(n, most(st.versions));
  if (!st.min_versions.empty())
    st.min_versions.assign(n, most(st.min_versions));
  st.kind->take_ranges(st.opts.ranges);
  st.shards_moving = false;
  auto parked = std::move(st.parked);
  st.parked.clear();
  for (auto& f : parked)
    f();
  return true;
}

/// What a set-up worker answers: its steps, being told to finish, and the
/// shards' new map.
worker_actor::behavior_type worker_behavior(self_ptr self) {
  return {
    [=](reshard_atom, std::vector<shard_data_actor>& shards,
        std::vector<uint64_t>& bounds) {
      return take_shard_map(self, shards, bounds);
    },
    [=](step_atom) {
      auto& s = self->state;
      if (s.draining)
        return quit_when_settled(self);
      if (s.initialised || !s.kind->starts_from_values())
        return next_step(self);
      // An elastic worker starts from the center.
      pull_all(self, [=] {
        self->state.kind->start_from_values();
        self->state.initialised = true;
        next_step(self);
      });
    },
    [=](finish_atom) {
      self->state.draining = true;
      quit_when_settled(self);
    },
  };
}

/// A worker that quit while it was set up: its behaviour until it is gone.
worker_actor::behavior_type inert(self_ptr) {
  return {[](step_atom) {}, [](finish_atom) {},
          [](reshard_atom, std::vector<shard_data_actor>&,
             std::vector<uint64_t>&) { return true; }};
}

} // namespace

worker_actor::behavior_type
worker_impl(worker_actor::stateful_pointer<worker_state> self,
            worker_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  // An exception (a backend failure, an injected fault) ends the worker
  // with an error that says what happened; the chief restarts it.
  self->set_exception_handler([=](std::exception_ptr& ep) -> caf::error {
    auto id = std::to_string(self->state.opts.id);
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      return make_error(errc::worker_failed,
                        "worker " + id + " threw: " + e.what());
    } catch (...) {
      return make_error(errc::worker_failed,
                        "worker " + id + " threw an unknown exception");
    }
  });
  auto kind = make_step_kind(st.opts);
  if (!kind) {
    self->quit(kind.error());
    return inert(self);
  }
  st.kind = std::move(*kind);
  if (st.kind->computes_apart()) {
    st.computing_slot = std::make_shared<worker_state::compute_slot>();
    st.computer = self->spawn<caf::detached>(
      [slot = st.computing_slot]() -> caf::behavior {
        return {[slot](step_atom) {
          slot->result = std::exchange(slot->job, nullptr)();
          return true;
        }};
      });
    // It ends with the worker, after the computation it runs, if any.
    self->attach_functor([computer = st.computer] {
      caf::anon_send_exit(computer, caf::exit_reason::user_shutdown);
    });
  }
  st.versions.assign(st.opts.shards.size(), 0);
  self->send(self, step_atom_v);
  return worker_behavior(self);
}

} // namespace troupe

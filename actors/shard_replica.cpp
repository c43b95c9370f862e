// A primary shard's replica, kept in step (see `replication` in
// actors/shard.hpp), and a replica applying its primary's op stream.
#include <algorithm>

#include "actors/data_plane/data_link.hpp"
#include "actors/shard_ops.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::shard_ops {

namespace {

/// About this many bytes of rows per chunk of a copy: large enough that
/// a table of 51M rows is about a thousand requests, small enough that
/// the pushes forwarded between chunks wait little behind one.
constexpr size_t copy_chunk_bytes = 8 << 20;

void tell(self_ptr self, int64_t version, const std::string& text) {
  auto& r = self->state.rep;
  // From the shard itself: the chief hears only its current primaries
  // (a shard stopped by a move may still have news on its way).
  if (r.told)
    caf::send_as(caf::actor_cast<caf::actor>(self),
                 caf::actor_cast<caf::actor>(r.told), replicate_atom_v,
                 self->state.id, version, text);
}

/// Gives the replica up: pushes no longer wait for it; whoever asked for
/// it is told why. What waited for its answers runs now.
void drop(self_ptr self, const std::string& why) {
  auto& r = self->state.rep;
  if (!r.to)
    return;
  tell(self, -1, why);
  r.to = nullptr;
  if (r.link)
    r.link->close();
  r.link.reset();
  r.state = replica_state::none;
  update_eviction(self);
  r.pushes_wait = false;
  ++r.generation;
  auto unanswered = std::move(r.unanswered);
  r.unanswered.clear();
  for (auto& op : unanswered)
    op.done(false);
  serve_parked(self); // sync pulls no longer wait for it
}

/// Asks for a check once the oldest unanswered op will have waited the
/// replica timeout. One check is on its way at a time, and none while
/// every op is answered: a timer per op, on CAF's clock thread, cost a
/// wake-up of that thread per forwarded push.
void watch(self_ptr self) {
  auto& r = self->state.rep;
  if (r.check_pending || r.unanswered.empty())
    return;
  r.check_pending = true;
  auto due = r.unanswered.front().sent + self->state.replica_timeout
             - self->clock().now();
  self->delayed_send(self, std::max(due, caf::timespan{0}), expire_atom_v,
                     replicate_atom_v);
}

/// The replica's answer to op `seq` (`a`: its ack, or why it failed),
/// whichever way it came: what waited for it runs. An op no longer
/// listed ran when the replica was given up.
void answer(self_ptr self, uint64_t seq, caf::expected<push_ack> a) {
  auto& r = self->state.rep;
  auto it = std::find_if(r.unanswered.begin(), r.unanswered.end(),
                         [=](const auto& op) { return op.seq == seq; });
  if (it == r.unanswered.end())
    return;
  auto op = std::move(*it);
  r.unanswered.erase(it);
  if (r.generation == op.generation) {
    if (a) {
      r.version = a->version;
      serve_parked(self); // a sync pull may wait for the replica
    } else if (!op.taken || *op.taken) {
      drop(self, "the replica did not take an update: " + describe(a.error()));
    }
  }
  op.done(static_cast<bool>(a));
}

/// Sends one op (`atom`, `x`) to the replica; `done` runs with its answer
/// or its failure, whatever the generation, or when the replica is given
/// up first. A failure drops the replica, unless `taken` says the
/// primary refused the push too. A replica on another node gets it
/// straight from the data plane's connection, and its answer comes
/// straight back (replica_answered); a replica in this process gets a
/// CAF request.
template <class Atom, class Op>
void send_taken(self_ptr self, std::shared_ptr<const bool> taken,
                std::function<void(bool)> done, Atom atom, Op x) {
  auto& r = self->state.rep;
  auto seq = ++r.sent;
  r.unanswered.push_back({seq, 0, self->clock().now(), r.generation,
                          std::move(taken), std::move(done)});
  watch(self);
  if (r.link) {
    auto id = r.link->send(self->state.id, std::move(x),
                           caf::actor_cast<caf::actor>(self));
    if (!id)
      return answer(self, seq, std::move(id.error()));
    r.unanswered.back().link_id = *id; // answers come as messages, later
    return;
  }
  // No timeout of CAF's: watch() bounds the wait.
  self->request(r.to, caf::infinite, atom, std::move(x))
    .then([=](push_ack& a) { answer(self, seq, a); },
          [=](caf::error& err) { answer(self, seq, std::move(err)); });
}

/// An op the primary took: a failure drops the replica.
template <class... Ts>
void send(self_ptr self, std::function<void(bool)> done, Ts&&... xs) {
  send_taken(self, nullptr, std::move(done), std::forward<Ts>(xs)...);
}

/// Rows per chunk of a copy of `t`.
uint64_t chunk_rows(const sparse_table& t) {
  auto per_row = static_cast<size_t>(t.dim()) * (1 + t.slot_count())
                   * sizeof(float)
                 + sizeof(uint64_t);
  return std::max<uint64_t>(1, copy_chunk_bytes / per_row);
}

/// The last chunk is sent: from now on pushes wait for the replica, and
/// once it has answered everything before, it is in step.
void last_sent(self_ptr self, int64_t generation) {
  auto& r = self->state.rep;
  r.pushes_wait = true;
  // Anything answered after this op was applied before it.
  // Forgets nothing: only its answer counts.
  auto mark = replica_op{replica_forget{-1}};
  send(
    self,
    [=](bool ok) {
      auto& rep = self->state.rep;
      if (!ok || rep.generation != generation)
        return;
      rep.state = replica_state::in_step;
      update_eviction(self);
      auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                                - rep.began)
                    .count();
      char text[160];
      std::snprintf(text, sizeof text,
                    "in step after %.2f s: the dense state and %lld table "
                    "rows copied",
                    secs, static_cast<long long>(rep.rows));
      tell(self, self->state.block->version(), text);
    },
    replicate_atom_v, std::move(mark));
}

/// Chunks of a copy on their way at once: the primary reads and sends
/// the next while the replica puts the last ones in.
constexpr int chunks_on_the_way = 3;

/// Admission counters per chunk of a copy: 4 MB, as a chunk of rows.
constexpr uint64_t counts_per_chunk = 4 << 20;

/// Sends the next chunks of rows, or marks the copy's end once all are
/// sent.
void copy_rows(self_ptr self, int64_t generation) {
  auto& st = self->state;
  auto& r = st.rep;
  auto counters = [&](size_t t) {
    auto* f = st.tables[t]->filter();
    return f ? static_cast<uint64_t>(f->counters()) : uint64_t{0};
  };
  while (r.generation == generation && r.to && !r.pushes_wait
         && r.chunks_out < chunks_on_the_way) {
    // First each table's admission counts, as they are when sent (the
    // pushes forwarded before are in them), so that the replica admits
    // as its primary does before any row is copied; then the rows.
    while (r.count_table < st.tables.size()
           && r.next_count >= counters(r.count_table)) {
      ++r.count_table;
      r.next_count = 0;
    }
    while (r.count_table == st.tables.size() && r.table < st.tables.size()
           && r.table_begun && r.next_row >= st.tables[r.table]->rows()) {
      ++r.table;
      r.next_row = 0;
      r.table_begun = false;
    }
    replica_op op;
    if (r.count_table < st.tables.size()) {
      auto c = counts_of(self, *st.tables[r.count_table],
                         static_cast<int32_t>(r.count_table), r.next_count,
                         counts_per_chunk);
      c.replace = true;
      r.next_count += c.counts.size();
      op.op = std::move(c);
    } else if (r.table < st.tables.size()) {
      auto& t = *st.tables[r.table];
      auto n = std::min<uint64_t>(chunk_rows(t), t.rows() - r.next_row);
      op.op = rows_of(self, t, static_cast<int32_t>(r.table), r.next_row, n);
      r.table_begun = true;
      r.next_row += n;
      r.rows += static_cast<int64_t>(n);
    } else if (r.log_table < st.tables.size()) {
      // The rows' stamps came with them; the keys evicted and not yet
      // exported come last, so that a delta cut after a takeover still
      // names them.
      auto& log = st.tables[r.log_table]->eviction_log();
      replica_eviction_log l;
      l.table = static_cast<int32_t>(r.log_table++);
      l.replace = true;
      for (auto& [push, key] : log) {
        l.pushes.push_back(push);
        l.keys.push_back(key);
      }
      op.op = std::move(l);
    } else {
      return last_sent(self, generation);
    }
    ++r.chunks_out;
    send(
      self,
      [=](bool ok) {
        auto& rep = self->state.rep;
        if (rep.generation != generation)
          return;
        --rep.chunks_out;
        if (ok)
          copy_rows(self, generation);
      },
      replicate_atom_v, std::move(op));
  }
}

} // namespace

void set_replica(self_ptr self, shard_data_actor to,
                 std::shared_ptr<data_client> link,
                 caf::strong_actor_ptr told) {
  auto& r = self->state.rep;
  if (r.to) {
    r.told = nullptr; // replaced, not lost: nobody needs telling
    drop(self, "replaced");
  }
  r.told = std::move(told);
  if (!to)
    return;
  r.to = std::move(to);
  r.link = std::move(link);
  r.version = -1;
  start_copy(self);
}

replica_image image_of(self_ptr self) {
  auto& st = self->state;
  replica_image image;
  image.block = st.block->image();
  for (auto& [worker_table, p] : st.sync.held_pushes())
    image.held.push_back(p); // the gradients shared, not copied
  return image;
}

void start_copy(self_ptr self) {
  auto& st = self->state;
  auto& r = st.rep;
  if (!r.to)
    return;
  auto generation = ++r.generation;
  r.state = replica_state::copying;
  update_eviction(self);
  r.pushes_wait = false;
  r.table = 0;
  r.next_row = 0;
  r.count_table = 0;
  r.next_count = 0;
  r.table_begun = false;
  r.log_table = 0;
  r.rows = 0;
  r.chunks_out = 0;
  r.began = std::chrono::steady_clock::now();
  send(
    self, [](bool) {}, replicate_atom_v, replica_op{image_of(self)});
  copy_rows(self, generation);
}

namespace {

/// A dense or a row push, forwarded to the replica as the primary took it.
template <class Push>
void forward_push(self_ptr self, Push p, std::shared_ptr<const bool> taken,
                  std::function<void()> done) {
  if (!replicating(self))
    return done();
  send_taken(
    self, std::move(taken), [done = std::move(done)](bool) { done(); },
    push_atom_v, std::move(p));
}

} // namespace

void forward(self_ptr self, gradient_push g, std::shared_ptr<const bool> taken,
             std::function<void()> done) {
  forward_push(self, std::move(g), std::move(taken), std::move(done));
}

void forward(self_ptr self, row_push p, std::shared_ptr<const bool> taken,
             std::function<void()> done) {
  forward_push(self, std::move(p), std::move(taken), std::move(done));
}

void forward(self_ptr self, replica_op op) {
  if (replicating(self))
    send(
      self, [](bool) {}, replicate_atom_v, std::move(op));
}

void replica_answered(self_ptr self, uint64_t id, caf::expected<push_ack> a) {
  auto& ops = self->state.rep.unanswered;
  auto it = std::find_if(ops.begin(), ops.end(),
                         [=](const auto& op) { return op.link_id == id; });
  if (it != ops.end())
    answer(self, it->seq, std::move(a));
}

void check_replica(self_ptr self) {
  auto& st = self->state;
  auto& r = st.rep;
  r.check_pending = false;
  if (!r.unanswered.empty()
      && self->clock().now() - r.unanswered.front().sent
           >= st.replica_timeout) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                st.replica_timeout)
                .count();
    drop(self,
         "the replica did not answer within " + std::to_string(ms) + " ms");
    return;
  }
  watch(self);
}

namespace {

/// Applies each op to the replica `self` as its primary applied it.
struct replica_applier {
  self_ptr self;

  caf::error operator()(replica_image& op) {
    auto& st = self->state;
    if (auto err = st.block->load(op.block))
      return err;
    st.follower = true;
    for (auto& t : st.tables) // the rows follow
      t = make_table(self, *t);
    st.sync.clear();
    for (auto& h : op.held)
      st.sync.put(std::move(h));
    return {};
  }

  caf::error operator()(row_chunk& op) {
    if (auto rows = restore_rows(self, op); !rows)
      return rows.error();
    return {};
  }

  caf::error operator()(key_counts& op) { return restore_counts(self, op); }

  caf::error operator()(replica_evict& op) { return evict_rows(self, op); }

  caf::error operator()(replica_eviction_log& op) {
    return follow_eviction_log(self, op);
  }

  caf::error operator()(replica_join& op) {
    join(self, op.worker);
    return {};
  }

  caf::error operator()(replica_leave& op) {
    leave(self, op.worker);
    return {};
  }

  caf::error operator()(replica_tune& op) {
    return tune(self, op.key, op.value);
  }

  caf::error operator()(replica_forget& op) {
    if (op.version >= 0)
      self->state.block->forget_through(op.version);
    return {};
  }

  caf::error operator()(replica_adopt&) {
    adopt(self);
    return {};
  }
};

} // namespace

caf::expected<push_ack> apply_replica_op(self_ptr self, replica_op& op) {
  if (auto err = std::visit(replica_applier{self}, op.op))
    return err;
  return push_ack{self->state.block->version(), false};
}

} // namespace troupe::shard_ops

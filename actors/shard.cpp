#include "actors/shard.hpp"

#include <algorithm>
#include <cmath>

#include "actors/data_plane/data_link.hpp"
#include "actors/held_requests.hpp"
#include "runtime/base/host_port.hpp"
#include "actors/shard_ops.hpp"
#include "runtime/params/buffer_pool.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

using shard_ops::self_ptr;

namespace {

float_block answer(self_ptr self, int32_t worker) {
  auto& st = self->state;
  if (st.block->opts().mode == consistency_mode::ssp && worker >= 0) {
    ++st.ssp_pulls;
    st.ssp_max_lead = std::max(st.ssp_max_lead,
                               st.block->clock(worker) - st.block->min_clock());
  }
  // A worker's pull may get the values extrapolated (stale_lookahead);
  // the chief's (evaluation, checkpoints: worker -1) the values themselves.
  auto values = worker >= 0 ? st.block->values_for_workers()
                            : st.block->values();
  st.pulled_bytes += static_cast<int64_t>(values->size() * sizeof(float));
  return float_block{st.id, st.block->version(), std::move(values)};
}

/// Applies push `p` here (`apply`: the ack, or the error that refuses
/// it) and on the replica: the push goes to the replica first, so that
/// both apply it at once, and the answer waits for the replica's when the
/// primary's pushes wait for it (see `replication` in shard.hpp). A push
/// refused here is refused there too, which is no divergence.
template <class Push, class Apply>
caf::result<push_ack> apply_replicated(self_ptr self, std::vector<Push> parts,
                                       Apply apply) {
  // Several parts (row pushes of several tables) are forwarded and applied
  // in order, and answered with the last one's ack (stale if any was).
  auto apply_all = [&]() -> caf::expected<push_ack> {
    push_ack last;
    bool stale = false;
    for (auto& p : parts) {
      caf::expected<push_ack> r = apply(std::move(p));
      if (!r)
        return r;
      stale = stale || r->stale;
      last = *r;
    }
    last.stale = stale;
    return last;
  };
  if (!shard_ops::replicating(self)) {
    auto r = apply_all();
    shard_ops::forward_evictions(self); // forgets them: no replica
    return r;
  }
  struct answer {
    push_ack ack;
    caf::typed_response_promise<push_ack> promise;
    bool waiting = false;
    size_t replica_left = 0; ///< parts it has not answered, or given up
  };
  auto taken = std::make_shared<bool>(true);
  auto out = std::make_shared<answer>();
  out->replica_left = parts.size();
  bool wait = shard_ops::pushes_wait(self);
  // `done` may run before forward() returns: a connection found broken
  // gives the replica up at once.
  for (auto& p : parts)
    shard_ops::forward(self, p, taken, [out] {
      if (out->replica_left > 0 && --out->replica_left == 0 && out->waiting)
        out->promise.deliver(out->ack);
    });
  caf::expected<push_ack> r = apply_all();
  if (!r) {
    *taken = false;
    return std::move(r.error());
  }
  // After the push on the channel: the replica applies it, then evicts
  // what it made this shard evict.
  shard_ops::forward_evictions(self);
  if (!wait || out->replica_left == 0)
    return *r;
  out->ack = *r;
  out->promise = self->make_response_promise<push_ack>();
  out->waiting = true;
  return out->promise;
}

template <class Push, class Apply>
caf::result<push_ack> apply_replicated(self_ptr self, Push p, Apply apply) {
  std::vector<Push> parts;
  parts.push_back(std::move(p));
  return apply_replicated(self, std::move(parts), std::move(apply));
}

/// Whether a worker's pull for `min_version` may be answered now. In
/// sync mode with a replica in step, also only once the replica has
/// answered every update applied here: a worker that saw an update its
/// replica lacks would build the next one on it, and a takeover would
/// leave that shard two updates behind the others. (A push already waits
/// for the replica before it is acknowledged; this makes a pull wait as
/// long.)
bool pull_ready(self_ptr self, int32_t worker, int64_t min_version) {
  auto& st = self->state;
  if (!st.block->pull_ready(worker, min_version))
    return false;
  return st.block->opts().mode != consistency_mode::sync
         || !shard_ops::pushes_wait(self)
         || st.rep.version >= st.block->version();
}

} // namespace

namespace shard_ops {

void serve_parked(self_ptr self) {
  take_if(self->state.parked, [&](shard_state::parked_pull& p) {
    if (!pull_ready(self, p.worker, p.min_version))
      return false;
    p.promise.deliver(answer(self, p.worker));
    return true;
  });
}

} // namespace shard_ops

namespace {

/// Table `t` of the shard, or the error that names what is wrong with the
/// request.
caf::expected<sparse_table*> table_of(self_ptr self, int32_t t) {
  auto& tables = self->state.tables;
  if (t < 0 || static_cast<size_t>(t) >= tables.size())
    return make_error(errc::invalid_argument,
                      "shard " + std::to_string(self->state.id)
                        + " has no embedding table " + std::to_string(t)
                        + " (the run has " + std::to_string(tables.size())
                        + ")");
  return tables[static_cast<size_t>(t)].get();
}

/// The error of a row push that does not fit its table; none when it does.
caf::error check_row_push(self_ptr self, const sparse_table& table,
                          const row_push& p) {
  auto where = [&] {
    return "a push to table \"" + table.table().name + "\" on shard "
           + std::to_string(self->state.id);
  };
  auto expected = p.ids.size() * static_cast<size_t>(table.dim());
  auto got = p.grads ? p.grads->size() : 0;
  if (got != expected)
    return make_error(errc::wrong_size,
                      where() + " holds " + std::to_string(got) + " floats for "
                        + std::to_string(p.ids.size()) + " rows of "
                        + std::to_string(table.dim()) + " (expected "
                        + std::to_string(expected) + ")");
  const float* g = got > 0 ? p.grads->data() : nullptr;
  for (size_t i = 0; i < got; ++i)
    if (!std::isfinite(g[i]))
      return make_error(errc::non_finite,
                        where() + " holds a non-finite value for row "
                          + std::to_string(p.ids[i / table.dim()]));
  return caf::none;
}

/// Rows of one table (a row pull, or one part of several).
caf::expected<row_block> pull_rows(self_ptr self, const row_request& r) {
  auto table = table_of(self, r.table);
  if (!table)
    return std::move(table.error());
  auto values = pooled_floats(r.ids.size()
                              * static_cast<size_t>((*table)->dim()));
  auto err = r.peek
               ? (*table)->peek(r.ids.data(), r.ids.size(), values->data())
               : (*table)->pull(r.ids.data(), r.ids.size(), values->data());
  if (err)
    return err;
  self->state.pulled_bytes += static_cast<int64_t>(values->size()
                                                   * sizeof(float));
  return row_block{self->state.id, r.table, std::move(values)};
}

/// Applies (async, ssp) or holds (sync) row push `p`, to a table of the
/// shard, which check_row_push has passed.
caf::expected<push_ack> apply_row_push(self_ptr self, row_push p) {
  auto& st = self->state;
  auto& t = *st.tables[static_cast<size_t>(p.table)];
  if (sync_rows::applies(*st.block, st.tables)) {
    auto stale = st.sync.hold(
      *st.block, t,
      {p.worker, p.table, p.tag, std::move(p.ids), std::move(p.grads)}, st.id);
    if (!stale)
      return std::move(stale.error());
    return push_ack{st.block->version(), *stale};
  }
  if (auto err = t.push(p.ids.data(), p.ids.size(),
                        p.grads ? p.grads->data() : nullptr))
    return err;
  return push_ack{t.pushes(), false};
}

/// Why several row pushes cannot all be applied (checked before any is,
/// so that one bad part changes nothing); none when they can.
caf::error check_row_pushes(self_ptr self, const row_pushes& pushes) {
  if (pushes.parts.empty())
    return make_error(errc::invalid_argument,
                      "row pushes of no table to shard "
                        + std::to_string(self->state.id));
  for (auto& p : pushes.parts) {
    auto table = table_of(self, p.table);
    if (!table)
      return std::move(table.error());
    if (auto err = check_row_push(self, **table, p))
      return err;
    if (auto err = (*table)->check(p.ids.data(), p.ids.size()))
      return err;
  }
  return {};
}

} // namespace

namespace shard_ops {

int64_t join(self_ptr self, int32_t worker) {
  self->state.block->add_worker(worker);
  serve_parked(self); // a new slowest clock can release ssp pulls
  forward(self, replica_op{replica_join{worker}});
  return self->state.block->version();
}

void leave(self_ptr self, int32_t worker) {
  auto& st = self->state;
  auto before = st.block->version();
  st.block->remove_worker(worker);
  // An update its leaving completes takes its rows if it pushed.
  st.sync.after(*st.block, st.tables, before);
  st.sync.drop(worker);
  serve_parked(self);
  forward(self, replica_op{replica_leave{worker}});
  forward_evictions(self); // of the update it completed, after it
}

caf::error tune(self_ptr self, const std::string& key, double value) {
  auto& b = *self->state.block;
  auto before = b.version();
  caf::error err;
  if (key == "lr")
    err = b.set_learning_rate(value);
  else if (key == "aggregate")
    err = b.set_aggregate(static_cast<int>(value));
  else
    err = make_error(errc::invalid_argument,
                     "unknown shard setting \"" + key + "\" (lr, aggregate)");
  if (err)
    return err;
  self->state.sync.after(b, self->state.tables, before);
  serve_parked(self);
  forward(self, replica_op{replica_tune{key, value}});
  forward_evictions(self); // of the update it completed, after it
  return {};
}

void adopt(self_ptr self) {
  auto& st = self->state;
  st.block->forget_workers();
  st.sync.clear();
  // Pulls parked for the old chief's workers: nobody waits for them.
  take_if(st.parked, [&](shard_state::parked_pull& p) {
    p.promise.deliver(float_block::ask_again_for(st.id));
    return true;
  });
  forward(self, replica_op{replica_adopt{}});
}

row_chunk rows_of(self_ptr self, const sparse_table& t, int32_t table,
                  uint64_t first, uint64_t count) {
  row_chunk c;
  c.shard = self->state.id;
  c.table = table;
  c.rows = t.rows();
  c.pushes = t.pushes();
  auto n = first < c.rows ? std::min<uint64_t>(count, c.rows - first) : 0;
  const auto dim = static_cast<size_t>(t.dim());
  c.ids.resize(n);
  c.values.resize(n * dim);
  c.slots.assign(t.slot_count(), std::vector<float>(n * dim));
  std::vector<float*> slots;
  for (auto& v : c.slots)
    slots.push_back(v.data());
  if (t.keeps_ages()) {
    c.ages.resize(n);
    c.uses.resize(n);
  }
  t.copy_rows(first, n, c.ids.data(), c.values.data(), slots.data(),
              c.ages.empty() ? nullptr : c.ages.data(),
              c.uses.empty() ? nullptr : c.uses.data());
  return c;
}

caf::expected<uint64_t> restore_rows(self_ptr self, const row_chunk& c) {
  auto table = table_of(self, c.table);
  if (!table)
    return std::move(table.error());
  auto& tb = **table;
  const auto dim = static_cast<size_t>(tb.dim());
  auto n = c.ids.size();
  // A chunk of no rows (a push count alone) may leave the slots out.
  bool fits = c.values.size() == n * dim
              && (c.slots.size() == tb.slot_count() || n == 0)
              && (c.ages.empty() || c.ages.size() == n)
              && c.uses.size() == c.ages.size();
  for (auto& v : c.slots)
    fits = fits && v.size() == n * dim;
  if (!fits)
    return make_error(errc::wrong_size,
                      "rows restored to shard " + std::to_string(self->state.id)
                        + " do not fit table \"" + tb.table().name + "\" ("
                        + std::to_string(dim) + " floats and "
                        + std::to_string(tb.slot_count())
                        + " optimizer slots per row)");
  // The push count first: the rows' ages count back from it.
  if (c.pushes >= 0)
    tb.set_pushes(c.pushes);
  std::vector<const float*> slots(c.slots.size());
  const bool aged = !c.ages.empty();
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < slots.size(); ++k)
      slots[k] = c.slots[k].data() + i * dim;
    if (auto err = tb.restore_row(c.ids[i], c.values.data() + i * dim,
                                  slots.data(), aged ? c.ages[i] : -1,
                                  aged ? c.uses[i] : 0))
      return err;
  }
  return static_cast<uint64_t>(tb.rows());
}

namespace {
bool evicting(self_ptr self) {
  auto& st = self->state;
  return !st.follower && st.rep.state != replica_state::copying;
}
} // namespace

std::unique_ptr<sparse_table> make_table(self_ptr self,
                                         const sparse_table& like) {
  auto t = std::make_unique<sparse_table>(like.table(), like.optimizer());
  t->set_evicting(evicting(self));
  return t;
}

void update_eviction(self_ptr self) {
  for (auto& t : self->state.tables)
    t->set_evicting(evicting(self));
}

void forward_evictions(self_ptr self) {
  auto& tables = self->state.tables;
  for (size_t i = 0; i < tables.size(); ++i) {
    auto ids = tables[i]->take_evicted();
    if (!ids.empty() && replicating(self))
      forward(self, replica_op{
                      replica_evict{static_cast<int32_t>(i), std::move(ids)}});
  }
}

caf::error evict_rows(self_ptr self, const replica_evict& op) {
  auto table = table_of(self, op.table);
  if (!table)
    return std::move(table.error());
  (*table)->evict_ids(op.ids.data(), op.ids.size());
  (*table)->take_evicted(); // a replica tells nobody
  return caf::none;
}

caf::error follow_eviction_log(self_ptr self, const replica_eviction_log& op) {
  auto table = table_of(self, op.table);
  if (!table)
    return std::move(table.error());
  auto& t = **table;
  if (op.replace) {
    if (op.pushes.size() != op.keys.size())
      return make_error(errc::wrong_size,
                        "an eviction log of " + std::to_string(op.keys.size())
                          + " keys and " + std::to_string(op.pushes.size())
                          + " pushes");
    std::vector<std::pair<int64_t, uint64_t>> log;
    log.reserve(op.keys.size());
    for (size_t i = 0; i < op.keys.size(); ++i)
      log.emplace_back(op.pushes[i], op.keys[i]);
    t.set_eviction_log(std::move(log));
  }
  t.forget_evicted(op.since);
  return caf::none;
}

caf::expected<row_chunk> cut_export(self_ptr self, int32_t table,
                                    int64_t since) {
  auto found = table_of(self, table);
  if (!found)
    return std::move(found.error());
  auto& t = **found;
  auto& st = self->state;
  if (!t.table().changes)
    return make_error(errc::invalid_argument,
                      "table \"" + t.table().name
                        + "\" keeps no changes to export (training.export "
                          "is not set on shard "
                        + std::to_string(st.id) + ")");
  if (since > t.pushes())
    return make_error(errc::layout_mismatch,
                      "shard " + std::to_string(st.id) + "'s table \""
                        + t.table().name + "\" has taken "
                        + std::to_string(t.pushes())
                        + " pushes, fewer than the export it would follow ("
                        + std::to_string(since) + ")");
  st.cuts.resize(st.tables.size());
  auto& cut = st.cuts[static_cast<size_t>(table)];
  cut.all = since < 0;
  cut.slots = cut.all ? std::vector<uint32_t>{} : t.changed_slots(since);
  row_chunk head;
  head.shard = st.id;
  head.table = table;
  head.rows = cut.all ? t.rows() : cut.slots.size();
  head.pushes = t.pushes();
  if (since >= 0) {
    head.ids = t.evicted_since(since);
    // What the export before this one named is in its file by now.
    t.forget_evicted(since);
    if (replicating(self))
      forward(self,
              replica_op{replica_eviction_log{table, since, false, {}, {}}});
  }
  return head;
}

caf::expected<row_chunk> export_rows(self_ptr self, int32_t table,
                                     uint64_t first, uint64_t count) {
  auto found = table_of(self, table);
  if (!found)
    return std::move(found.error());
  auto& t = **found;
  auto& st = self->state;
  if (static_cast<size_t>(table) >= st.cuts.size())
    return make_error(errc::invalid_argument,
                      "no export of table \"" + t.table().name
                        + "\" is cut on shard " + std::to_string(st.id));
  auto& cut = st.cuts[static_cast<size_t>(table)];
  uint64_t total = cut.all ? t.rows() : cut.slots.size();
  auto n = first < total ? std::min<uint64_t>(count, total - first) : 0;
  row_chunk c;
  c.shard = st.id;
  c.table = table;
  c.rows = total;
  c.pushes = t.pushes();
  c.ids.resize(n);
  c.values.resize(n * static_cast<size_t>(t.dim()));
  if (cut.all) {
    std::vector<uint32_t> slots(n);
    for (uint64_t k = 0; k < n; ++k)
      slots[k] = static_cast<uint32_t>(first + k);
    t.copy_slots(slots.data(), n, c.ids.data(), c.values.data());
  } else {
    t.copy_slots(cut.slots.data() + first, n, c.ids.data(), c.values.data());
  }
  return c;
}

key_counts counts_of(self_ptr self, const sparse_table& t, int32_t table,
                     uint64_t first, uint64_t count) {
  key_counts c;
  c.shard = self->state.id;
  c.table = table;
  if (const auto* f = t.filter()) {
    c.total = f->counters();
    c.hashes = f->hashes();
    auto n = first < c.total ? std::min<uint64_t>(count, c.total - first) : 0;
    c.first = first;
    c.counts.assign(f->counts() + first, f->counts() + first + n);
  }
  return c;
}

caf::error restore_counts(self_ptr self, const key_counts& c) {
  auto table = table_of(self, c.table);
  if (!table)
    return std::move(table.error());
  auto* f = (*table)->filter();
  if (f == nullptr || f->counters() != c.total || f->hashes() != c.hashes)
    return make_error(errc::layout_mismatch,
                      "admission counts for table \"" + (*table)->table().name
                        + "\" of " + std::to_string(c.total) + " counters and "
                        + std::to_string(c.hashes) + " hashes, not shard "
                        + std::to_string(self->state.id) + "'s "
                        + (f ? std::to_string(f->counters()) + " and "
                                 + std::to_string(f->hashes())
                             : std::string{"none"}));
  // A replica's copy sets this part of the primary's counts as they are.
  bool fits = c.replace
                ? f->set_counts(c.first, c.counts.data(), c.counts.size())
                : f->add_counts(c.first, c.counts.data(), c.counts.size());
  if (!fits)
    return make_error(errc::invalid_argument,
                      "admission counts past the end of table \""
                        + (*table)->table().name + "\"'s");
  return caf::none;
}

} // namespace shard_ops

using namespace shard_ops;

shard_self_actor::behavior_type
shard_impl(shard_self_actor::stateful_pointer<shard_state> self,
           shard_options opts) {
  self->state.id = opts.id;
  self->state.hold = opts.hold;
  self->state.follower = opts.follower;
  self->state.replica_timeout = opts.replica_timeout;
  self->state.block = std::make_unique<param_block>(opts.block,
                                                    std::move(opts.initial));
  for (auto& t : opts.tables) {
    self->state.tables.push_back(
      std::make_unique<sparse_table>(t.table, t.optimizer));
  }
  update_eviction(self);
  return {
    [=](join_atom, int32_t worker) -> int64_t { return join(self, worker); },
    [=](leave_atom, int32_t worker) { leave(self, worker); },
    [=](pull_atom, int32_t worker,
        int64_t min_version) -> caf::result<float_block> {
      if (worker < 0 || pull_ready(self, worker, min_version))
        return answer(self, worker);
      auto promise = self->make_response_promise<float_block>();
      auto& st = self->state;
      st.parked.push_back({promise, worker, min_version, self->clock().now()});
      schedule_expiry(self, st.parked, st.hold, st.expiry_pending);
      return promise;
    },
    [=](push_atom, const gradient_push& push) -> caf::result<push_ack> {
      self->state.pushed_bytes += static_cast<int64_t>(push.size
                                                       * sizeof(float));
      return apply_replicated(
        self, push, [=](const gradient_push& g) -> caf::expected<push_ack> {
          auto& st = self->state;
          auto& b = *st.block;
          auto before = b.version();
          auto r = b.push(g.worker, g.tag, g.data(), g.size, g.batch);
          st.sync.settle(b, st.tables, g.worker, r, before);
          if (!r)
            return std::move(r.error());
          serve_parked(self);
          return push_ack{b.version(),
                          *r == param_block::outcome::stale
                            || *r == param_block::outcome::duplicate};
        });
    },
    [=](pull_atom, const row_request& r) -> caf::result<row_block> {
      auto b = pull_rows(self, r);
      if (!b)
        return std::move(b.error());
      return std::move(*b);
    },
    [=](pull_atom, const row_requests& r) -> caf::result<row_blocks> {
      row_blocks out;
      out.parts.reserve(r.parts.size());
      for (auto& part : r.parts) {
        auto b = pull_rows(self, part);
        if (!b)
          return std::move(b.error());
        out.parts.push_back(std::move(*b));
      }
      return out;
    },
    [=](push_atom, row_push& push) -> caf::result<push_ack> {
      if (push.grads)
        self->state.pushed_bytes += static_cast<int64_t>(push.grads->size()
                                                         * sizeof(float));
      return apply_replicated(self, std::move(push),
                              [=](row_push p) -> caf::expected<push_ack> {
                                auto table = table_of(self, p.table);
                                if (!table)
                                  return std::move(table.error());
                                if (auto err = check_row_push(self, **table, p))
                                  return err;
                                return apply_row_push(self, std::move(p));
                              });
    },
    [=](push_atom, row_pushes& pushes) -> caf::result<push_ack> {
      // Every part checked before any is applied (and none again after).
      if (auto err = check_row_pushes(self, pushes))
        return err;
      for (auto& p : pushes.parts)
        if (p.grads)
          self->state.pushed_bytes += static_cast<int64_t>(p.grads->size()
                                                           * sizeof(float));
      return apply_replicated(self, std::move(pushes.parts), [=](row_push p) {
        return apply_row_push(self, std::move(p));
      });
    },
    [=](snapshot_atom) -> shard_state_msg {
      auto& b = *self->state.block;
      shard_state_msg s;
      s.shard = self->state.id;
      s.version = b.version();
      s.values = *b.values();
      for (auto& [name, v] : b.slots()) {
        s.slot_names.push_back(name);
        s.slots.push_back(std::move(v));
      }
      return s;
    },
    [=](restore_atom, shard_state_msg& s) -> caf::result<int64_t> {
      std::vector<std::pair<std::string, std::vector<float>>> slots;
      for (size_t i = 0; i < s.slots.size() && i < s.slot_names.size(); ++i)
        slots.emplace_back(s.slot_names[i], std::move(s.slots[i]));
      if (auto err = self->state.block->restore(std::move(s.values), slots,
                                                s.version))
        return err;
      for (auto& t : self->state.tables) // the checkpoint's rows follow
        t = make_table(self, *t);
      self->state.sync.clear();
      serve_parked(self);
      start_copy(self); // the replica starts over too; the rows follow
      return self->state.block->version();
    },
    [=](snapshot_atom, int32_t t, uint64_t first,
        uint64_t count) -> caf::result<row_chunk> {
      auto table = table_of(self, t);
      if (!table)
        return std::move(table.error());
      return rows_of(self, **table, t, first, count);
    },
    [=](restore_atom, row_chunk& c) -> caf::result<uint64_t> {
      auto rows = restore_rows(self, c);
      if (!rows)
        return std::move(rows.error());
      if (replicating(self))
        forward(self, replica_op{std::move(c)});
      return *rows;
    },
    [=](snapshot_atom, counts_atom, int32_t t, uint64_t first,
        uint64_t count) -> caf::result<key_counts> {
      auto table = table_of(self, t);
      if (!table)
        return std::move(table.error());
      return counts_of(self, **table, t, first, count);
    },
    [=](restore_atom, key_counts& c) -> caf::result<bool> {
      if (auto err = restore_counts(self, c))
        return err;
      if (replicating(self))
        forward(self, replica_op{std::move(c)});
      return true;
    },
    [=](export_atom, int32_t t, int64_t since) -> caf::result<row_chunk> {
      auto head = cut_export(self, t, since);
      if (!head)
        return std::move(head.error());
      return std::move(*head);
    },
    [=](export_atom, int32_t t, uint64_t first,
        uint64_t count) -> caf::result<row_chunk> {
      auto rows = export_rows(self, t, first, count);
      if (!rows)
        return std::move(rows.error());
      return std::move(*rows);
    },
    [=](stats_atom) -> shard_stats {
      auto& st = self->state;
      auto& b = *st.block;
      shard_stats s;
      s.shard = st.id;
      s.version = b.version();
      s.accepted = b.stats().accepted;
      s.stale = b.stats().stale;
      s.refused = b.stats().refused;
      s.ssp_pulls = st.ssp_pulls;
      s.ssp_max_lead = st.ssp_max_lead;
      s.pulled_bytes = st.pulled_bytes;
      s.pushed_bytes = st.pushed_bytes;
      for (auto& t : st.tables) {
        table_counts c{static_cast<int64_t>(t->rows()),
                       static_cast<int64_t>(t->memory_bytes()),
                       t->rows_pulled(),
                       t->rows_pushed(),
                       t->rows_made(),
                       t->rows_rejected(),
                       t->rows_evicted()};
        if (const auto* f = t->filter()) {
          c.filter_used = static_cast<int64_t>(f->used());
          c.filter_counters = static_cast<int64_t>(f->counters());
        }
        s.rows += c.rows;
        s.row_bytes += c.row_bytes;
        s.rows_pulled += c.rows_pulled;
        s.rows_pushed += c.rows_pushed;
        s.tables.push_back(c);
      }
      s.follower = st.follower;
      s.replica = static_cast<int8_t>(st.rep.state);
      s.replica_lag = st.rep.lag();
      s.replica_rows = st.rep.rows;
      s.replica_version = st.rep.version;
      return s;
    },
    [=](adopt_atom, int64_t since) -> shard_history {
      auto& st = self->state;
      auto& b = *st.block;
      adopt(self);
      shard_history h;
      h.shard = st.id;
      h.version = b.version();
      h.since = since;
      h.size = b.size();
      if (auto batches = b.applied_since(since)) {
        h.complete = true;
        h.batches = std::move(*batches);
      }
      return h;
    },
    [=](forget_atom, int64_t version) {
      self->state.block->forget_through(version);
      forward(self, replica_op{replica_forget{version}});
    },
    [=](tune_atom, const std::string& key, double value) -> caf::result<bool> {
      if (auto err = tune(self, key, value))
        return err;
      return true;
    },
    [=](replicate_atom, replica_op& op) -> caf::result<push_ack> {
      auto r = apply_replica_op(self, op);
      if (!r)
        return std::move(r.error());
      return *r;
    },
    [=](replicate_atom, shard_data_actor to,
        const std::string& address) -> caf::result<bool> {
      auto told = self->current_sender();
      if (address.empty()) {
        set_replica(self, std::move(to), nullptr, std::move(told));
        return true;
      }
      auto at = parse_address(address);
      if (!at)
        return std::move(at.error());
      auto& st = self->state;
      auto link = data_client::open(self->system(), at->first, at->second,
                                    st.replica_timeout);
      std::vector<int> dims;
      for (auto& t : st.tables)
        dims.push_back(t->dim());
      auto stub = link->stub(st.id, st.block->size(), std::move(dims));
      set_replica(self, std::move(stub), std::move(link), std::move(told));
      return true;
    },
    [=](promote_atom) -> int64_t {
      self->state.follower = false;
      update_eviction(self); // it evicts on its own now
      return self->state.block->version();
    },
    [=](image_atom) -> replica_image { return image_of(self); },
    [=](expire_atom) {
      auto& st = self->state;
      expire_held(self, st.parked, st.hold, st.expiry_pending,
                  float_block::ask_again_for(st.id));
    },
    [=](expire_atom, replicate_atom) { check_replica(self); },
    [=](data_atom, uint64_t id, push_ack a) { replica_answered(self, id, a); },
    [=](data_atom, uint64_t id, caf::error& err) {
      replica_answered(self, id, std::move(err));
    },
  };
}

} // namespace troupe

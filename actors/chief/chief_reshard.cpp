// Shards added to and drained from a running cluster (the shell's
// add-shard and drain, chief_actor's grow and drain): the flat vector is
// cut anew over the new count of shards and the table rows placed anew,
// while the workers keep their leases, models and data.
//
// A move, in order: leasing pauses until no lease is out, so every push
// of every worker is applied and nothing is in flight to a shard; the
// replicas stop; the workers hear that the shards are moving (a pull
// answered or failed from now on was asked of the old map, and waits);
// the chief takes every shard's image and table rows; the old shards
// stop, the new ones start with the images cut anew (block_reslice.hpp)
// and the rows spread by shard_of_row over the new count; the workers get
// the new map (their node agents make the data-plane stubs); leasing
// resumes and the replicas are built anew. No acknowledged push is lost
// and none is applied twice: the new shards hold the versions, clocks and
// applied logs of the old ones.
//
// While it runs the move is a recovery to the rest of the chief
// (recovery.recovering()): evaluations, checkpoints and new workers wait
// for it, and a shell's resume does not end its pause.
#include <algorithm>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/params/block_reslice.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe::chief_ops {

namespace {

/// One move under way.
struct shard_move {
  std::string what; ///< "shard 2 added on node ps2", for the log and reply
  std::vector<std::string> nodes; ///< the new shards' nodes, in order
  std::vector<flat_range> ranges; ///< and their slices
  std::vector<shard_actor> old;
  std::vector<replica_image> images;        ///< of the new shards
  std::vector<std::vector<row_chunk>> rows; ///< of the new shards
  std::vector<int64_t> pushes; ///< per table: every new shard's push count
  /// Per table that admits by count: the old shards' admission counts
  /// added up (saturating), what every new shard starts from; and their
  /// hashes. Empty for a table that counts no keys.
  std::vector<std::vector<uint8_t>> counts;
  std::vector<int32_t> hashes;
  uint64_t row_count = 0;
  double began = 0;
  bool stopping_old = false; ///< past the point where it can be called off
  caf::typed_response_promise<std::string> promise;
};

using move_ptr = std::shared_ptr<shard_move>;

/// Why the shards cannot move now; empty: they can.
std::string why_not_now(chief_self self) {
  auto& st = self->state;
  if (st.phase != run_phase::training)
    return std::string{"the run is not training (it is "} + to_string(st.phase)
           + ")";
  if (st.recovery.recovering())
    return "a shard recovery or another move is under way; try again "
           "shortly";
  if (st.checkpoints.taking)
    return "a checkpoint is being written; try again shortly";
  for (auto& [id, w] : st.members.workers())
    if (w.placing)
      return "worker " + std::to_string(id)
             + " is being started; try again "
               "shortly";
  for (auto& h : st.shards.handles())
    if (!h)
      return "a shard is down";
  return {};
}

/// Tells every live node's agent (and so its workers) the shard map
/// that `map_for` makes for it.
void tell_agents(chief_self self,
                 std::function<shard_map(const std::string&)> map_for,
                 std::function<void()> then,
                 std::function<void(caf::error)> failed) {
  auto& st = self->state;
  std::vector<std::pair<std::string, node_agent_actor>> agents;
  for (auto& [name, n] : st.members.nodes())
    if (n.up && n.agent)
      agents.emplace_back(name, n.agent);
  ask_all<int32_t>(
    agents.size(),
    [=](size_t i) {
      return self->request(agents[i].second, timeout_of(self), reshard_atom_v,
                           map_for(agents[i].first));
    },
    [then](std::vector<int32_t>&) { then(); },
    [failed](caf::error& err) { failed(err); });
}

/// The shard map of the chief's shards now, for the workers of `node`.
shard_map current_map(chief_self self, const std::string& node) {
  shard_map map;
  map.shards = self->state.shards.handles();
  map.bounds = self->state.shards.bounds();
  map.data_links = data_links(self, node);
  return map;
}

/// The move fails. Before the old shards stop (they were only read) and
/// with all of them alive, it is called off: the workers get the old map
/// back and training goes on as it was; the reply says why. Later, or
/// with a shard lost meanwhile, the run cannot go on with half-moved
/// shards and fails.
void move_failed(chief_self self, const move_ptr& m, caf::error err) {
  auto& st = self->state;
  auto why = describe(err);
  bool intact = !m->stopping_old;
  for (auto& h : st.shards.handles())
    intact = intact && static_cast<bool>(h);
  if (!intact) {
    auto fatal = make_error(errc::actor_down, m->what + " failed: " + why);
    m->promise.deliver(fatal);
    return fail_run(self, fatal);
  }
  auto told = "); training goes on with the shards as they were";
  say(self, m->what + ": not made (" + why + told);
  tell_agents(
    self, [=](const std::string& node) { return current_map(self, node); },
    [=] {
      m->promise.deliver(
        make_error(errc::invalid_argument, m->what + ": not made: " + why));
      resume_after_recovery(self);
    },
    [=](caf::error e) {
      m->promise.deliver(e);
      fail_run(self, std::move(e));
    });
}

/// The held row pushes of a sync update under way, spread over the new
/// shards as the rows are (each shard holds those of its own rows).
void spread_held_rows(const std::vector<replica_image>& old,
                      std::vector<replica_image>& images) {
  auto shards = static_cast<int32_t>(images.size());
  // Per new shard: (worker, table) -> its index in that image's list, and
  // the gradients of each, gathered before they are shared.
  std::vector<std::map<std::pair<int32_t, int32_t>, size_t>> at(images.size());
  std::vector<std::vector<std::vector<float>>> grads(images.size());
  for (auto& image : old)
    for (auto& h : image.held) {
      static const std::vector<float> none;
      auto& from_grads = h.grads ? *h.grads : none;
      auto dim = h.ids.empty() ? 0 : from_grads.size() / h.ids.size();
      for (size_t r = 0; r < h.ids.size(); ++r) {
        auto id = h.ids[r];
        auto s = static_cast<size_t>(shard_of_row(id, shards));
        auto& held = images[s].held;
        auto key = std::make_pair(h.worker, h.table);
        auto it = at[s].find(key);
        if (it == at[s].end()) {
          it = at[s].emplace(key, held.size()).first;
          held.push_back(held_row_push{h.worker, h.table, h.tag, {}, nullptr});
          grads[s].emplace_back();
        }
        held[it->second].ids.push_back(id);
        auto& to = grads[s][it->second];
        auto from = from_grads.begin() + static_cast<ptrdiff_t>(r * dim);
        to.insert(to.end(), from, from + static_cast<ptrdiff_t>(dim));
      }
    }
  for (size_t s = 0; s < images.size(); ++s)
    for (size_t k = 0; k < grads[s].size(); ++k)
      images[s].held[k].grads = std::make_shared<const std::vector<float>>(
        std::move(grads[s][k]));
}

void finish_move(chief_self self, move_ptr m) {
  auto& st = self->state;
  auto paused = now_seconds() - m->began;
  st.recovery.move_done(paused);
  auto text = fmt("%s: %zu shards now, %zu floats and %llu table rows moved "
                  "in %.3f s of paused leasing",
                  m->what.c_str(), m->nodes.size(),
                  static_cast<size_t>(m->ranges.back().end),
                  static_cast<unsigned long long>(m->row_count), paused);
  say(self, text);
  m->promise.deliver(text);
  resume_after_recovery(self);
}

/// The new shards hold everything: they take the old ones' place in the
/// chief and in every worker.
void switch_to_new(chief_self self, move_ptr m) {
  auto& st = self->state;
  st.opts.cfg.cluster.shards = static_cast<int>(m->nodes.size());
  // The rows moved to shards of other push counts: a new export chain.
  exports_start_over(self);
  for (auto& [name, n] : st.members.nodes())
    n.planned_shards = static_cast<int>(
      std::count(m->nodes.begin(), m->nodes.end(), name));
  tell_agents(
    self, [=](const std::string& node) { return current_map(self, node); },
    [=] { finish_move(self, m); },
    [=](caf::error err) { move_failed(self, m, std::move(err)); });
}

/// Sends new shard i its rows, a chunk at a time, then `done`. Each
/// table's push count goes first, with no rows: a shard that gets no row
/// of a table still gets it.
void send_rows(chief_self self, move_ptr m, size_t i, size_t chunk,
               std::function<void()> done) {
  if (chunk == 0) {
    std::vector<row_chunk> heads(m->pushes.size());
    for (size_t t = 0; t < heads.size(); ++t)
      heads[t].table = static_cast<int32_t>(t);
    m->rows[i].insert(m->rows[i].begin(), heads.begin(), heads.end());
  }
  if (chunk == m->rows[i].size())
    return done();
  auto& c = m->rows[i][chunk];
  c.shard = static_cast<int32_t>(i);
  c.pushes = m->pushes[static_cast<size_t>(c.table)];
  ask_shard(self, i, restore_atom_v, std::move(c))
    .then([=](uint64_t) { send_rows(self, m, i, chunk + 1, done); },
          [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Sends new shard i the admission counts of table `table` from `first`
/// on, a piece at a time, then the next table's; then `done`.
void send_counts(chief_self self, move_ptr m, size_t i, size_t table,
                 uint64_t first, std::function<void()> done) {
  if (table >= m->counts.size())
    return done();
  auto& all = m->counts[table];
  if (first >= all.size())
    return send_counts(self, m, i, table + 1, 0, done);
  key_counts c;
  c.shard = static_cast<int32_t>(i);
  c.table = static_cast<int32_t>(table);
  c.total = all.size();
  c.first = first;
  c.hashes = m->hashes[table];
  auto n = std::min<uint64_t>(table_count_piece, all.size() - first);
  c.counts.assign(all.begin() + static_cast<ptrdiff_t>(first),
                  all.begin() + static_cast<ptrdiff_t>(first + n));
  ask_shard(self, i, restore_atom_v, std::move(c))
    .then([=](bool) { send_counts(self, m, i, table, first + n, done); },
          [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// New shard i is started: it loads its image and rows and stops being a
/// copy (the image makes a shard a follower until promoted).
void fill_new_shard(chief_self self, move_ptr m, size_t i,
                    std::function<void()> done) {
  auto h = self->state.shards.handles()[i];
  auto fail = [=](caf::error& err) { move_failed(self, m, std::move(err)); };
  self
    ->request(h, timeout_of(self), replicate_atom_v,
              replica_op{std::move(m->images[i])})
    .then(
      [=](push_ack) {
        send_rows(self, m, i, 0, [=] {
          send_counts(self, m, i, 0, 0, [=] {
            self->request(h, timeout_of(self), promote_atom_v)
              .then([=](int64_t) { done(); }, fail);
          });
        });
      },
      fail);
}

/// The old shards' state is in `m`: they stop, and the new ones start on
/// their nodes.
void start_new_shards(chief_self self, move_ptr m) {
  auto& st = self->state;
  m->stopping_old = true;
  for (auto& h : m->old) {
    st.shards.forget(h.address());
    self->demonitor(h.address());
    self->send_exit(h, caf::exit_reason::user_shutdown);
  }
  auto n = m->nodes.size();
  st.shards.ranges = m->ranges;
  st.shards.plan(m->nodes);
  auto all_filled = countdown(n, [=] { switch_to_new(self, m); });
  for (size_t i = 0; i < n; ++i) {
    shard_state_msg empty; // the image follows
    empty.shard = static_cast<int32_t>(i);
    empty.values.assign(m->ranges[i].size(), 0.f);
    place_shard(self, i, m->nodes[i], std::move(empty),
                [=] { fill_new_shard(self, m, i, all_filled); });
  }
}

void gather_table(chief_self self, move_ptr m, size_t table);

/// Adds old shard p's admission counts of table `table` from `first` on
/// to the move's, then the next shard's; then the next table.
void gather_counts(chief_self self, move_ptr m, size_t table, size_t p,
                   uint64_t first) {
  if (p == m->old.size())
    return gather_table(self, m, table + 1);
  auto t = static_cast<int32_t>(table);
  self
    ->request(m->old[p], timeout_of(self), snapshot_atom_v, counts_atom_v, t,
              first, table_count_piece)
    .then(
      [=](key_counts& c) {
        if (c.total == 0) // the table counts no keys
          return gather_table(self, m, table + 1);
        m->counts.resize(std::max(m->counts.size(), table + 1));
        m->hashes.resize(m->counts.size());
        auto& all = m->counts[table];
        if (all.empty())
          all.assign(c.total, 0);
        if (all.size() != c.total || c.first != first
            || c.counts.size() > c.total - first)
          return move_failed(self, m,
                             make_error(errc::layout_mismatch,
                                        "admission counts of old shard "
                                          + std::to_string(p)
                                          + " do not fit the others'"));
        m->hashes[table] = c.hashes;
        admission_filter::add_saturating(all.data() + first, c.counts.data(),
                                         c.counts.size());
        auto next = first + c.counts.size();
        if (c.counts.empty() || next >= c.total)
          return gather_counts(self, m, table, p + 1, 0);
        gather_counts(self, m, table, p, next);
      },
      [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Reads old shard p's rows of table `table` from row `first` on,
/// spreading them over the new shards, then the next shard's; then the
/// next table.
void gather_rows(chief_self self, move_ptr m, size_t table, size_t p,
                 uint64_t first) {
  if (p == m->old.size())
    return gather_counts(self, m, table, 0, 0);
  auto t = static_cast<int32_t>(table);
  self
    ->request(m->old[p], timeout_of(self), snapshot_atom_v, t, first,
              table_piece_rows)
    .then(
      [=](row_chunk& c) {
        if (c.ids.empty())
          return gather_rows(self, m, table, p + 1, 0);
        auto dim = static_cast<size_t>(
          embedding_tables(self->state.opts.cfg)[table].table.dim);
        std::vector<int64_t> pushes(m->nodes.size(), m->pushes[table]);
        auto spread = spread_rows(c, dim, pushes, t);
        for (size_t s = 0; s < spread.size(); ++s)
          if (!spread[s].ids.empty())
            m->rows[s].push_back(std::move(spread[s]));
        m->row_count += c.ids.size();
        gather_rows(self, m, table, p, first + c.ids.size());
      },
      [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Gathers the old shards' rows of table `table` and those after it; then
/// start_new_shards.
void gather_table(chief_self self, move_ptr m, size_t table) {
  if (table == embedding_tables(self->state.opts.cfg).size())
    return start_new_shards(self, m);
  auto old = m->old;
  auto t = static_cast<int32_t>(table);
  // Adam's bias correction counts a shard's pushes: every new shard
  // gets the most any old one had (as a checkpoint's rows do).
  ask_all<row_chunk>(
    old.size(),
    [=](size_t i) {
      return self->request(old[i], timeout_of(self), snapshot_atom_v, t,
                           uint64_t{0}, uint64_t{0});
    },
    [=](std::vector<row_chunk>& heads) {
      int64_t most = 0;
      for (auto& h : heads)
        most = std::max(most, h.pushes);
      m->pushes.resize(std::max(m->pushes.size(), table + 1));
      m->pushes[table] = most;
      gather_rows(self, m, table, 0, 0);
    },
    [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Every lease is acked: take the old shards' images, cut them anew, and
/// go on with their rows.
void take_images(chief_self self, move_ptr m) {
  auto old = m->old;
  ask_all<replica_image>(
    old.size(),
    [=](size_t i) {
      return self->request(old[i], timeout_of(self), image_atom_v);
    },
    [=](std::vector<replica_image>& images) {
      std::vector<block_image> parts;
      for (auto& image : images)
        parts.push_back(image.block);
      std::vector<size_t> sizes;
      for (auto& r : m->ranges)
        sizes.push_back(r.size());
      auto cut = reslice(parts, sizes,
                         self->state.opts.cfg.cluster.consistency
                           == cluster_config::mode::ssp);
      if (!cut)
        return move_failed(self, m, cut.error());
      for (auto& block : *cut)
        m->images.push_back(replica_image{std::move(block), {}});
      spread_held_rows(images, m->images);
      m->rows.resize(m->nodes.size());
      gather_table(self, m, 0);
    },
    [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Moves the shards as `m` says, unless something since the request
/// forbids it now (the reply then says what).
void begin_move(chief_self self, move_ptr m) {
  auto& st = self->state;
  auto why = why_not_now(self);
  for (auto& node : m->nodes)
    if (why.empty() && !st.members.is_up(node))
      why = "node " + node + " is down";
  if (!why.empty()) {
    m->promise.deliver(refused(m->what + ": not now: " + why));
    return;
  }
  m->old = st.shards.handles();
  m->began = now_seconds();
  say(self, m->what + ": pausing leasing to move the shards");
  st.recovery.begin_move();
  ++st.shards.layout;
  // The replicas are of the old shards: built anew once the move is done.
  for (auto& h : st.shards.drop_replicas()) {
    self->demonitor(h.address());
    self->send_exit(h, caf::exit_reason::user_shutdown);
  }
  self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](feeder_position&) {
        // No map: the shards are moving.
        tell_agents(
          self, [](const std::string&) { return shard_map{}; },
          [=] { take_images(self, m); },
          [=](caf::error err) { move_failed(self, m, std::move(err)); });
      },
      [=](caf::error& err) { move_failed(self, m, std::move(err)); });
}

/// Moves the shards onto `nodes` (one per new shard), after the
/// evaluation under way if there is one (it pulls from the shards in
/// rounds); the reply comes once they have moved.
caf::result<std::string>
move_shards(chief_self self, std::vector<std::string> nodes, std::string what) {
  auto& st = self->state;
  auto ranges = st.eval.layout.split(nodes.size());
  if (!ranges)
    return ranges.error();
  auto m = std::make_shared<shard_move>();
  m->what = std::move(what);
  m->nodes = std::move(nodes);
  m->ranges = std::move(*ranges);
  m->promise = self->make_response_promise<std::string>();
  if (st.eval.evaluating) {
    say(self, m->what + ": after the evaluation under way");
    st.eval.when_done.push_back([=] { begin_move(self, m); });
  } else {
    begin_move(self, m);
  }
  return m->promise;
}

/// A node that may hold a new shard: up, with a data plane where workers
/// of other nodes reach it.
std::string why_not_node(chief_self self, const std::string& node) {
  auto& st = self->state;
  auto it = st.members.nodes().find(node);
  if (it == st.members.nodes().end())
    return "no node \"" + node + "\"";
  if (!it->second.up || !it->second.agent)
    return "node " + node + " is down";
  if (st.opts.cfg.cluster.distributed() && it->second.data_port == 0)
    return "node " + node
           + " has no data plane (a node that joined the run "
             "holds workers only)";
  return {};
}

} // namespace

caf::result<std::string> shell_add_shard(chief_self self,
                                         const std::string& node) {
  auto& st = self->state;
  if (!st.nodes_ready())
    return refused("add-shard: the cluster is still starting");
  if (auto why = why_not_now(self); !why.empty())
    return refused("add-shard: " + why);
  if (auto why = why_not_node(self, node); !why.empty())
    return refused("add-shard: " + why);
  auto total = st.eval.layout.total();
  if (st.shards.count() + 1 > total)
    return refused(fmt("add-shard: %zu shards would hold less than one of "
                       "the model's %zu parameters each",
                       st.shards.count() + 1, static_cast<size_t>(total)));
  auto nodes = st.shards.nodes();
  nodes.push_back(node);
  auto what = fmt("shard %zu added on node %s", nodes.size() - 1, node.c_str());
  return move_shards(self, std::move(nodes), std::move(what));
}

caf::result<std::string> shell_drain_shard(chief_self self, int32_t shard) {
  auto& st = self->state;
  if (!st.nodes_ready())
    return refused("drain: the cluster is still starting");
  if (shard < 0 || static_cast<size_t>(shard) >= st.shards.count())
    return refused(fmt("drain: no shard %d (the run has %zu: 0..%zu)", shard,
                       st.shards.count(), st.shards.count() - 1));
  if (st.shards.count() == 1)
    return refused("drain: shard 0 is the only one; add one first "
                   "(add-shard NODE)");
  if (auto why = why_not_now(self); !why.empty())
    return refused("drain: " + why);
  auto nodes = st.shards.nodes();
  auto what = fmt("shard %d on node %s drained (the shards after it are "
                  "numbered one lower)",
                  shard, nodes[static_cast<size_t>(shard)].c_str());
  nodes.erase(nodes.begin() + shard);
  return move_shards(self, std::move(nodes), std::move(what));
}

} // namespace troupe::chief_ops

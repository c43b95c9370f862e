#include "actors/node_agent.hpp"

#include <algorithm>

#include "actors/data_plane/data_link.hpp"
#include "actors/fan_out.hpp"
#include "actors/net/remote.hpp"
#include "actors/shard.hpp"
#include "actors/timing.hpp"
#include "actors/worker/worker.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using self_ptr = node_agent_actor::stateful_pointer<agent_state>;

/// The stub for shard `shard` on the data plane at `address`, connecting
/// to that node's data server the first time it is needed. The error
/// names a malformed address.
caf::expected<shard_data_actor> data_stub(self_ptr self,
                                          const std::string& address,
                                          int32_t shard, uint64_t size) {
  auto& st = self->state;
  // A connection that broke stays broken: it goes with its stubs, its
  // threads and its socket, whichever node it reached (a shard node that
  // was restarted listens at another port, so its old address is never
  // asked for again); one to `address` starts over.
  for (auto l = st.data_links.begin(); l != st.data_links.end();) {
    if (!l->second || !l->second->failed()) {
      ++l;
      continue;
    }
    l->second->close();
    for (auto it = st.stubs.begin(); it != st.stubs.end();)
      it = it->first.first == l->first ? st.stubs.erase(it) : std::next(it);
    l = st.data_links.erase(l);
  }
  auto key = std::make_pair(address, shard);
  auto& link = st.data_links[address];
  if (auto it = st.stubs.find(key); it != st.stubs.end())
    return it->second;
  auto addr = parse_address(address);
  if (!addr) {
    st.data_links.erase(address);
    return addr.error();
  }
  if (!link)
    link = data_client::open(self->system(), addr->first, addr->second,
                             request_timeout(st.opts.cfg));
  auto stub = link->stub(shard, size, embedding_dims(st.opts.cfg.model));
  st.stubs.emplace(key, stub);
  return stub;
}

/// The handles a worker here pulls and pushes through: `shards` itself
/// for a shard in this process (empty data link), a data-plane stub for
/// one on another node; shard i holds [bounds[i], bounds[i+1]). The error
/// names a malformed address.
caf::expected<std::vector<shard_data_actor>>
reachable_shards(self_ptr self, const std::vector<shard_actor>& shards,
                 const std::vector<uint64_t>& bounds,
                 const std::vector<std::string>& data_links) {
  std::vector<shard_data_actor> out(shards.begin(), shards.end());
  for (size_t i = 0; i < data_links.size() && i < out.size(); ++i) {
    if (data_links[i].empty())
      continue;
    auto stub = data_stub(self, data_links[i], static_cast<int32_t>(i),
                          bounds[i + 1] - bounds[i]);
    if (!stub)
      return stub.error();
    out[i] = *stub;
  }
  return out;
}

/// The layout of an external model's tensors as the chief sent it with a
/// worker; an error names what the message got wrong.
caf::expected<param_layout> layout_of(const worker_spawn& w) {
  if (w.tensor_names.empty() || w.tensor_names.size() != w.tensor_dims.size()
      || (!w.buffer_dtypes.empty()
          && w.buffer_dtypes.size() != w.tensor_names.size()))
    return make_error(errc::invalid_argument,
                      "worker placement: an external model's worker needs "
                      "its tensors, got "
                        + std::to_string(w.tensor_names.size()) + " names and "
                        + std::to_string(w.tensor_dims.size()) + " shapes and "
                        + std::to_string(w.buffer_dtypes.size())
                        + " buffer dtypes");
  param_layout layout;
  for (size_t i = 0; i < w.tensor_names.size(); ++i) {
    if (layout.find(w.tensor_names[i]) != nullptr)
      return make_error(errc::invalid_argument, "worker placement: tensor "
                                                  + w.tensor_names[i]
                                                  + " twice");
    for (auto d : w.tensor_dims[i])
      if (d < 0)
        return make_error(errc::invalid_argument,
                          "worker placement: tensor " + w.tensor_names[i]
                            + " has a negative dimension");
    bool buffer = !w.buffer_dtypes.empty() && !w.buffer_dtypes[i].empty();
    if (buffer)
      layout.add_buffer(w.tensor_names[i], w.tensor_dims[i],
                        w.buffer_dtypes[i]);
    else
      layout.add(w.tensor_names[i], w.tensor_dims[i]);
  }
  if (w.bounds.empty() || w.bounds.back() != layout.total())
    return make_error(
      errc::layout_mismatch,
      "worker placement: the tensors hold " + std::to_string(layout.total())
        + " floats, the shards "
        + std::to_string(w.bounds.empty() ? 0 : w.bounds.back()));
  return layout;
}

/// Closes the data-plane connections (which ends their stubs).
void close_data_links(agent_state& st) {
  for (auto& [address, link] : st.data_links)
    if (link)
      link->close();
  st.data_links.clear();
  st.stubs.clear();
}

/// data.follow: the node's click logs take the parts the chief named
/// last. The samples they hold; 0 where the node reads none yet.
caf::expected<int64_t> follow_parts(self_ptr self) {
  auto& st = self->state;
  if (st.followed.empty() || !st.opts.data || !st.opts.data->read.train
      || !st.opts.data->train.click_parts)
    return int64_t{0};
  return st.opts.data->train.click_parts->follow(st.followed);
}

} // namespace

agent_state::~agent_state() {
  close_data_links(*this);
}

node_agent_actor::behavior_type
node_agent_impl(node_agent_actor::stateful_pointer<agent_state> self,
                agent_options opts) {
  self->state.opts = std::move(opts);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto* m : {&st.shards, &st.replicas})
      for (auto it = m->begin(); it != m->end();)
        it = it->second.address() == dm.source ? m->erase(it) : std::next(it);
    st.workers.erase(std::remove_if(st.workers.begin(), st.workers.end(),
                                    [&](const worker_actor& w) {
                                      return w.address() == dm.source;
                                    }),
                     st.workers.end());
  });
  return {
    [=](place_atom, shard_spawn& s) -> caf::result<shard_actor> {
      auto& cfg = self->state.opts.cfg;
      shard_options so;
      so.id = s.id;
      so.block.mode = cfg.cluster.consistency;
      so.block.optimizer = cfg.training.optimizer;
      so.block.aggregate = s.aggregate;
      so.block.staleness = cfg.cluster.staleness;
      so.block.stale_lr = cfg.cluster.stale_lr;
      so.block.stale_momentum = cfg.cluster.stale_momentum;
      so.block.sync_lr = cfg.cluster.sync_lr;
      so.block.sync_warmup = cfg.cluster.sync_warmup;
      so.block.ordered_batches = cfg.training.partition
                                 == data_partition::shared;
      so.block.delay_compensation = cfg.cluster.delay_compensation;
      so.block.lookahead = cfg.cluster.stale_lookahead;
      so.block.history = compensation_history(cfg.cluster.workers,
                                              s.state.values.size());
      so.block.elastic_rate = cfg.cluster.elastic_rate();
      if (s.buffers.size() % 2 != 0)
        return make_error(errc::invalid_argument,
                          "shard placement: buffer bounds come in pairs");
      for (size_t k = 0; k + 1 < s.buffers.size(); k += 2) {
        if (s.buffers[k] > s.buffers[k + 1]
            || s.buffers[k + 1] > s.state.values.size())
          return make_error(errc::invalid_argument,
                            "shard placement: a buffer outside the slice");
        so.block.buffers.push_back(flat_range{s.buffers[k], s.buffers[k + 1]});
      }
      so.initial = s.state.values;
      so.tables = embedding_tables(cfg);
      so.hold = hold_time(cfg);
      so.replica_timeout = request_timeout(cfg);
      so.follower = s.replica;
      // A shard of the same id from before the chief was lost (or before
      // a recovery), or a replica of it, makes way for this one (the data
      // plane serves one shard of an id here).
      auto& st = self->state;
      for (auto* m : {&st.shards, &st.replicas})
        if (auto old = m->find(s.id); old != m->end()) {
          self->send_exit(old->second, caf::exit_reason::user_shutdown);
          m->erase(old);
        }
      shard_actor h = self->spawn(shard_impl, std::move(so));
      self->monitor(h);
      (s.replica ? st.replicas : st.shards)[s.id] = h;
      if (self->state.opts.data_plane)
        self->state.opts.data_plane->serve(s.id, h, s.state.values.size(),
                                           embedding_dims(cfg.model));
      if (s.replica || (s.state.version == 0 && s.state.slots.empty()))
        return h;
      // A restarted shard: optimizer state and version from a checkpoint.
      auto promise = self->make_response_promise<shard_actor>();
      self->request(h, request_timeout(cfg), restore_atom_v, std::move(s.state))
        .then([=](int64_t) mutable { promise.deliver(h); },
              [=](caf::error& err) mutable {
                promise.deliver(std::move(err));
              });
      return promise;
    },
    [=](follow_atom, std::vector<std::string>& parts) -> caf::result<int64_t> {
      self->state.followed = std::move(parts);
      auto taken = follow_parts(self);
      if (!taken)
        return taken.error();
      return *taken;
    },
    [=](place_atom, worker_spawn& w) -> caf::result<worker_actor> {
      auto& st = self->state;
      // A worker placed where none trained before (the chief's node reads
      // only what it scores) reads the training samples first.
      if (!st.opts.data || !st.opts.data->read.train) {
        auto data = load_datasets(st.opts.cfg.data, data_needs::training());
        if (!data)
          return data.error();
        st.opts.data = std::make_shared<const train_test>(std::move(*data));
      }
      if (auto taken = follow_parts(self); !taken)
        return taken.error();
      if (w.bounds.size() != w.shards.size() + 1)
        return make_error(errc::invalid_argument,
                          "worker placement: " + std::to_string(w.shards.size())
                            + " shards but " + std::to_string(w.bounds.size())
                            + " bounds");
      worker_options wo;
      wo.id = w.id;
      wo.cfg = st.opts.cfg;
      wo.data = st.opts.data;
      wo.feeder = w.feeder;
      // Shards on other nodes are reached on the data plane, through stubs.
      auto shards = reachable_shards(self, w.shards, w.bounds, w.data_links);
      if (!shards)
        return shards.error();
      wo.shards = std::move(*shards);
      wo.ranges = ranges_of(w.bounds);
      wo.chief = caf::actor_cast<chief_actor>(w.chief);
      wo.fault_hook = st.opts.fault_hook;
      if (wo.cfg.model.type == model_config::kind::external
          && st.opts.external) {
        if (!st.declared) {
          auto declared = layout_of(w);
          if (!declared)
            return declared.error();
          st.declared = std::make_shared<const param_layout>(
            std::move(*declared));
        }
        wo.layout = st.declared;
        wo.external = st.opts.external(w.id);
      }
      // A GPU worker waits for its device in every step (the loss is read
      // back), so it gets a thread of its own instead of blocking one of
      // the few scheduler threads; CPU workers stay on the scheduler, which
      // keeps the deterministic actor tests deterministic.
      // So does a worker whose step runs outside troupe (Python).
      auto h = wo.cfg.training.device.is_gpu() || wo.external
                 ? self->spawn<caf::detached>(worker_impl, std::move(wo))
                 : self->spawn(worker_impl, std::move(wo));
      self->monitor(h);
      st.workers.push_back(h);
      return h;
    },
    [=](reshard_atom, shard_map& m) -> caf::result<int32_t> {
      auto& st = self->state;
      // No shards: they are moving (the workers hold their pulls).
      if (!m.shards.empty()
          && (m.bounds.size() != m.shards.size() + 1
              || m.data_links.size() != m.shards.size()))
        return make_error(errc::invalid_argument,
                          "shard map: " + std::to_string(m.shards.size())
                            + " shards, " + std::to_string(m.bounds.size())
                            + " bounds, " + std::to_string(m.data_links.size())
                            + " data links");
      // A shard id now names another slice: the stubs are made anew on
      // the same connections (the old ones end with their connection).
      if (!m.shards.empty())
        st.stubs.clear();
      auto reachable = reachable_shards(self, m.shards, m.bounds, m.data_links);
      if (!reachable)
        return reachable.error();
      auto shards = std::move(*reachable);
      auto workers = st.workers;
      auto promise = self->make_response_promise<int32_t>();
      auto timeout = request_timeout(st.opts.cfg);
      // A worker that ended meanwhile needs no map.
      ask_all_settled<bool>(
        workers.size(),
        [=](size_t i) {
          return self->request(workers[i], timeout, reshard_atom_v, shards,
                               m.bounds);
        },
        [=](auto& replies) mutable {
          int32_t told = 0;
          for (auto& r : replies)
            told += r ? 1 : 0;
          promise.deliver(told);
        });
      return promise;
    },
    [=](stop_atom) {
      for (auto& w : self->state.workers)
        self->send_exit(w, caf::exit_reason::user_shutdown);
    },
    [=](promote_atom, int32_t id) -> caf::result<int64_t> {
      auto& st = self->state;
      auto it = st.replicas.find(id);
      if (it == st.replicas.end())
        return make_error(errc::actor_down, "no replica of shard "
                                              + std::to_string(id)
                                              + " on this node");
      auto h = it->second;
      st.replicas.erase(it);
      st.shards[id] = h;
      auto promise = self->make_response_promise<int64_t>();
      self->request(h, request_timeout(st.opts.cfg), promote_atom_v)
        .then([=](int64_t v) mutable { promise.deliver(v); },
              [=](caf::error& err) mutable {
                promise.deliver(std::move(err));
              });
      return promise;
    },
    [=](adopt_atom, int64_t since) -> caf::result<live_shards> {
      auto& st = self->state;
      // A new chief builds its own replicas from the shards it keeps.
      for (auto& [id, h] : st.replicas)
        self->send_exit(h, caf::exit_reason::user_shutdown);
      st.replicas.clear();
      std::vector<shard_actor> shards;
      for (auto& [id, h] : st.shards)
        shards.push_back(h);
      auto promise = self->make_response_promise<live_shards>();
      auto timeout = request_timeout(st.opts.cfg);
      ask_all_settled<shard_history>(
        shards.size(),
        [=](size_t i) {
          return self->request(shards[i], timeout, adopt_atom_v, since);
        },
        [=](auto& replies) mutable {
          live_shards out;
          for (size_t i = 0; i < replies.size(); ++i)
            if (replies[i]) {
              out.handles.push_back(shards[i]);
              out.histories.push_back(std::move(*replies[i]));
            }
          promise.deliver(std::move(out));
        });
      return promise;
    },
    [=](keep_atom, kept_shards& kept) -> std::string {
      auto& st = self->state;
      auto listed = [&](const shard_actor& h) {
        return std::find(kept.handles.begin(), kept.handles.end(), h)
               != kept.handles.end();
      };
      std::string stopped;
      for (auto* m : {&st.shards, &st.replicas})
        for (auto it = m->begin(); it != m->end();) {
          auto [id, h] = *it;
          bool awaited =
            m == &st.shards
            && std::count(kept.awaited.begin(), kept.awaited.end(), id) > 0;
          if (listed(h) || awaited) {
            ++it;
            continue;
          }
          self->send_exit(h, caf::exit_reason::user_shutdown);
          stopped += (stopped.empty() ? "" : ", ")
                     + std::string{m == &st.shards ? "" : "the replica of "}
                     + "shard " + std::to_string(id);
          it = m->erase(it);
        }
      return stopped;
    },
    [=](finish_atom, caf::error& reason) {
      auto& st = self->state;
      for (auto* m : {&st.shards, &st.replicas})
        for (auto& [id, h] : *m)
          self->send_exit(h, caf::exit_reason::user_shutdown);
      for (auto& w : st.workers)
        self->send_exit(w, caf::exit_reason::user_shutdown);
      st.shards.clear();
      st.replicas.clear();
      st.workers.clear();
      close_data_links(self->state);
      // The node process reads the run's end from the agent's exit reason.
      self->quit(std::move(reason));
      return true;
    },
    [=](stats_atom) { return own_process_usage(); },
    [=](who_atom) -> caf::result<std::string, std::string> {
      auto& cl = self->state.opts.cfg.cluster;
      auto* chief = cl.node(cl.chief_node);
      return {self->state.opts.node,
              chief ? chief->host + ":" + std::to_string(chief->port)
                    : std::string{}};
    },
  };
}

} // namespace troupe

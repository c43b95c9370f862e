#include "actors/worker.hpp"

#include <chrono>
#include <cmath>
#include <cstring>

#include "runtime/cpu_backend.hpp"
#include "runtime/errc.hpp"

namespace troupe {

namespace {

using self_ptr = worker_actor::stateful_pointer<worker_state>;

double now_seconds() {
  return std::chrono::duration<double>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

caf::timespan timeout_of(self_ptr self) {
  return std::chrono::milliseconds(
    self->state.opts.cfg.cluster.request_timeout_ms);
}

bool is_easgd(self_ptr self) {
  return self->state.opts.cfg.cluster.consistency == cluster_config::mode::easgd;
}

void fail(self_ptr self, caf::error err) {
  self->quit(std::move(err));
}

/// Pulls every shard in parallel; `then` runs once all values are in
/// state.host (easgd) or in the replica (the other modes).
void pull_all(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  st.pending = static_cast<int>(st.opts.shards.size());
  auto done = std::make_shared<std::function<void()>>(std::move(then));
  for (size_t i = 0; i < st.opts.shards.size(); ++i) {
    self->request(st.opts.shards[i], timeout_of(self), pull_atom_v, st.opts.id,
                  st.min_version)
      .then(
        [=](const float_block& b) {
          auto& s = self->state;
          auto r = s.opts.ranges[i];
          if (!b.values || b.values->size() != r.size())
            return fail(self, make_error(errc::wrong_size,
                                         "pull from shard " + std::to_string(i)
                                           + " returned the wrong size"));
          if (is_easgd(self))
            std::memcpy(s.host.data() + r.begin, b.values->data(),
                        r.size() * sizeof(float));
          else
            s.backend->upload(s.replica->params() + r.begin, b.values->data(),
                              r.size() * sizeof(float));
          s.versions[i] = b.version;
          if (--s.pending == 0)
            (*done)();
        },
        [=](caf::error& err) { fail(self, std::move(err)); });
  }
}

/// Pushes one slice per shard; `then` runs once every shard has answered.
/// `fill(begin, out)` writes the values from flat offset `begin` into `out`
/// (already sized to the shard).
void push_all(self_ptr self,
              std::function<void(size_t, std::vector<float>&)> fill,
              std::function<void()> then) {
  auto& st = self->state;
  st.pending = static_cast<int>(st.opts.shards.size());
  auto done = std::make_shared<std::function<void()>>(std::move(then));
  for (size_t i = 0; i < st.opts.shards.size(); ++i) {
    gradient_push g;
    g.shard = static_cast<int32_t>(i);
    g.worker = st.opts.id;
    g.tag = st.opts.cfg.cluster.consistency == cluster_config::mode::sync
              ? st.versions[i]
              : st.clock;
    auto r = st.opts.ranges[i];
    g.values.resize(r.size());
    fill(r.begin, g.values);
    self->request(st.opts.shards[i], timeout_of(self), push_atom_v,
                  std::move(g))
      .then(
        [=](const push_ack&) {
          if (--self->state.pending == 0)
            (*done)();
        },
        [=](caf::error& err) { fail(self, std::move(err)); });
  }
}

/// Ack the lease, report to the chief, go on.
void finish_step(self_ptr self) {
  auto& st = self->state;
  self->request(st.opts.feeder, timeout_of(self), ack_atom_v, st.lease.id)
    .then([](bool) {}, [=](caf::error& err) { fail(self, std::move(err)); });
  ++st.clock;
  worker_report r;
  r.worker = st.opts.id;
  r.epoch = st.lease.epoch;
  r.samples = static_cast<int32_t>(st.lease.samples.size());
  r.hits = static_cast<int32_t>(st.loss.correct);
  r.loss_sum = st.loss.loss_sum;
  r.step_seconds = now_seconds() - st.step_start;
  r.clock = st.clock;
  self->send(st.opts.chief, report_atom_v, r);
  self->send(self, step_atom_v);
}

/// Forward/backward on the leased batch; false after reporting a
/// non-finite loss (the chief then stops the run).
bool compute(self_ptr self) {
  auto& st = self->state;
  if (st.opts.fault_hook)
    st.opts.fault_hook(st.opts.id, st.clock);
  int n = static_cast<int>(st.lease.samples.size());
  gather_batch(st.opts.data->train, st.lease.samples.data(), n, st.x.data(),
               st.y.data());
  st.loss = is_easgd(self) ? st.local->step(st.x.data(), st.y.data(), n)
                           : st.replica->forward_backward(st.x.data(),
                                                          st.y.data(), n);
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

/// Pushes the gradient of the leased batch to every shard, then goes on.
void push_gradient(self_ptr self) {
  push_all(
    self,
    [=](size_t begin, std::vector<float>& out) {
      self->state.backend->download(out.data(),
                                    self->state.replica->grads() + begin,
                                    out.size() * sizeof(float));
    },
    [=] {
      auto& st = self->state;
      // sync: the next pull waits for the update this push is part of.
      if (st.opts.cfg.cluster.consistency == cluster_config::mode::sync)
        st.min_version = st.versions.empty() ? 0 : st.versions[0] + 1;
      finish_step(self);
    });
}

/// easgd: a local step; every tau steps the elastic exchange.
void elastic_step(self_ptr self) {
  auto& st = self->state;
  if (!compute(self))
    return;
  int tau = st.opts.cfg.cluster.tau;
  if ((st.clock + 1) % tau != 0)
    return finish_step(self);
  auto local = std::make_shared<std::vector<float>>(st.host.size());
  st.replica->get_params(local->data());
  pull_all(self, [=] {
    auto& s = self->state;
    auto alpha = static_cast<float>(s.opts.cfg.cluster.elastic_rate());
    // diff = local - center; local -= alpha * diff; the shard then does
    // center += alpha * diff (TF's ElasticAverageOptimizer).
    auto diff = std::make_shared<std::vector<float>>(local->size());
    for (size_t i = 0; i < local->size(); ++i) {
      (*diff)[i] = (*local)[i] - s.host[i];
      (*local)[i] -= alpha * (*diff)[i];
    }
    s.replica->set_params(local->data());
    push_all(
      self,
      [diff](size_t begin, std::vector<float>& out) {
        std::memcpy(out.data(), diff->data() + begin,
                    out.size() * sizeof(float));
      },
      [=] { finish_step(self); });
  });
}

/// Leases a batch into state.lease and runs `then`. Quits when the feeder
/// is done; when it says wait, the whole step starts over a little later.
void lease_then(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  self->request(st.opts.feeder, timeout_of(self), lease_atom_v, st.opts.id)
    .then(
      [=](lease_reply& r) {
        if (r.status == lease_reply::done)
          return self->quit();
        if (r.status == lease_reply::wait) {
          self->delayed_send(self, std::chrono::milliseconds(2), step_atom_v);
          return;
        }
        self->state.lease = std::move(r.grant);
        then();
      },
      [=](caf::error& err) { fail(self, std::move(err)); });
}

/// One step. The pull comes before the lease: in sync mode a worker then
/// leases its batch for step s+1 only after update s, so every update
/// averages the gradients of consecutive batches, one per worker.
void next_step(self_ptr self) {
  self->state.step_start = now_seconds();
  if (is_easgd(self))
    return lease_then(self, [=] { elastic_step(self); });
  pull_all(self, [=] {
    lease_then(self, [=] {
      if (compute(self))
        push_gradient(self);
    });
  });
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
  const auto& cfg = st.opts.cfg;
  const auto& train = st.opts.data->train;
  st.backend = make_cpu_backend(cfg.training.threads);
  auto m = make_model(cfg.model, train.height, train.width, train.channels,
                      train.classes, *st.backend);
  if (!m) {
    self->quit(m.error());
    return {[](step_atom) {}};
  }
  st.replica = std::move(*m);
  st.x.resize(static_cast<size_t>(cfg.training.batch_size) * train.sample_size());
  st.y.resize(static_cast<size_t>(cfg.training.batch_size));
  st.versions.assign(st.opts.shards.size(), 0);
  if (cfg.cluster.consistency == cluster_config::mode::easgd) {
    st.local = std::make_unique<local_trainer>(*st.replica,
                                               cfg.training.optimizer);
    st.host.resize(st.replica->layout().total());
  }
  self->send(self, step_atom_v);
  return {
    [=](step_atom) {
      auto& s = self->state;
      if (s.initialised || !is_easgd(self))
        return next_step(self);
      // easgd starts from the center.
      pull_all(self, [=] {
        self->state.replica->set_params(self->state.host.data());
        self->state.initialised = true;
        next_step(self);
      });
    },
  };
}

} // namespace troupe

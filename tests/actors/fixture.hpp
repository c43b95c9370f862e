// A small cluster run for the actor tests: an actor system set up as every
// troupe app sets it up, a synthetic dataset, and a helper that runs a
// config and captures the final parameters and shard counters.
#pragma once

#include <memory>
#include <sstream>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/chief/chief.hpp"
#include "actors/net/remote.hpp"
#include "actors/protocol/system_config.hpp"
#include "caf/all.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"
#include "test_util.hpp"

namespace troupe::test {

/// An actor system with the middleman, as a node's.
struct net_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  /// `shared_memory`: whether its data plane may use shared memory.
  explicit net_system(bool shared_memory = true) {
    init_config(cfg);
    cluster_config c;
    c.shared_memory = shared_memory;
    init_network(cfg, c);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

/// An actor system on CAF's test coordinator: nothing runs until the test
/// runs it, one message at a time, and time moves only when the test moves
/// it, so a test's course is the same every time (no sleeps, no polls).
struct deterministic_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;

  deterministic_system() {
    init_config(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }

  /// Runs messages until none is due (timers wait for advance_time).
  size_t run() { return sched->run(); }
};

/// The state of stateful actor `h` of a deterministic_system: between the
/// test's runs no actor runs, so the test may read it.
template <class State, class Handle>
State& state_of(const Handle& h) {
  auto* ptr = caf::actor_cast<caf::abstract_actor*>(h);
  return dynamic_cast<typename Handle::template stateful_base<State>&>(*ptr)
    .state;
}

/// Pulls shard `h`'s values (version 0 or later) from `sys`.
inline caf::expected<float_block> pull_values(caf::actor_system& sys,
                                              const shard_data_actor& h) {
  caf::scoped_actor self{sys};
  caf::expected<float_block> out{caf::sec::none};
  self
    ->request(h, std::chrono::seconds(10), pull_atom_v, int32_t{0}, int64_t{0})
    .receive([&](float_block& b) { out = std::move(b); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

/// Blobs of 6x6 pixels in 4 classes; 256 training samples.
inline run_config small_run(cluster_config::mode mode, int workers,
                            int shards) {
  run_config cfg;
  cfg.name = "test";
  cfg.model.type = model_config::kind::mlp;
  cfg.model.hidden = {8};
  cfg.data.format = data_config::kind::synthetic;
  cfg.data.width = 6;
  cfg.data.height = 6;
  cfg.data.classes = 4;
  cfg.data.train_samples = 256;
  cfg.data.test_samples = 128;
  cfg.training.batch_size = 16;
  cfg.training.epochs = 2;
  cfg.training.log_every_steps = 1000;
  cfg.training.optimizer.type = optimizer_config::kind::sgd;
  cfg.training.optimizer.learning_rate = 0.1;
  cfg.cluster.consistency = mode;
  cfg.cluster.workers = workers;
  cfg.cluster.shards = shards;
  cfg.cluster.request_timeout_ms = 20000;
  return cfg;
}

struct cluster_fixture {
  caf::actor_system_config sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<float> final_params;
  std::vector<shard_stats> shards;
  std::ostringstream log;
  /// model.type "external": each worker's step.
  external_step_factory external;

  cluster_fixture() {
    init_config(sys_cfg);
    sys = std::make_unique<caf::actor_system>(sys_cfg);
  }

  caf::expected<cluster_summary>
  run(const run_config& cfg,
      std::function<void(int32_t, int64_t)> fault_hook = nullptr) {
    auto data = load_datasets(cfg.data);
    if (!data)
      return data.error();
    chief_options opts;
    opts.cfg = cfg;
    opts.data = std::make_shared<const train_test>(std::move(*data));
    opts.log = &log;
    opts.fault_hook = std::move(fault_hook);
    opts.external = external;
    opts.on_finish = [this](const std::vector<float>& p,
                            const std::vector<shard_stats>& s) {
      final_params = p;
      shards = s;
    };
    return run_cluster(*sys, std::move(opts));
  }

  /// run(cfg, fault_hook), and the test ends, with the run's log, unless
  /// the run succeeds.
  cluster_summary
  run_ok(const run_config& cfg,
         std::function<void(int32_t, int64_t)> fault_hook = nullptr) {
    auto r = run(cfg, std::move(fault_hook));
    BOOST_REQUIRE_MESSAGE(r, why(r) + "\n" + log.str());
    return std::move(*r);
  }
};

/// Runs `cfg` to its end on an actor system of its own; the test ends,
/// with the run's log, unless the run succeeds. Returns the parameters it
/// ended with.
inline std::vector<float> run_to_end(const run_config& cfg) {
  cluster_fixture f;
  f.run_ok(cfg);
  return f.final_params;
}

} // namespace troupe::test

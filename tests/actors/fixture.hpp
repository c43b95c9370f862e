// A small cluster run for the actor tests: an actor system set up as every
// troupe app sets it up, a synthetic dataset, and a helper that runs a
// config and captures the final parameters and shard counters.
#pragma once

#include <memory>
#include <sstream>
#include <vector>

#include "actors/chief.hpp"
#include "actors/system_config.hpp"
#include "caf/all.hpp"
#include "runtime/config.hpp"
#include "runtime/dataset.hpp"

namespace troupe::test {

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
    opts.on_finish = [this](const std::vector<float>& p,
                            const std::vector<shard_stats>& s) {
      final_params = p;
      shards = s;
    };
    return run_cluster(*sys, std::move(opts));
  }
};

} // namespace troupe::test

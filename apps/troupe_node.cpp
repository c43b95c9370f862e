// troupe-node: runs a training run on troupe's actor cluster. With only
// --config, every actor (chief, shards, feeder, workers) lives in this one
// process: the embedded mode.
//
// Exit codes: see apps/exit_codes.hpp.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/chief.hpp"
#include "actors/system_config.hpp"
#include "apps/exit_codes.hpp"
#include "caf/all.hpp"
#include "runtime/config.hpp"
#include "runtime/dataset.hpp"

namespace {

int fail(const caf::error& err) {
  return troupe::report_failure("troupe-node", err);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run a training run on troupe's actor cluster."};
  std::string config_path, mode, metrics_dir;
  int workers = 0, shards = 0, epochs = 0, threads = 0;
  int64_t max_steps = -1;
  app.add_option("-c,--config", config_path, "run config (JSON)")->required();
  app.add_option("--workers", workers, "workers (overrides config)")
    ->check(CLI::Range(1, 1024));
  app.add_option("--shards", shards, "parameter shards (overrides config)")
    ->check(CLI::Range(1, 1024));
  app.add_option("--mode", mode, "consistency mode (overrides config)")
    ->check(CLI::IsMember({"async", "sync", "ssp", "easgd"}));
  app.add_option("--epochs", epochs, "epochs (overrides config)")
    ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-steps", max_steps,
                 "step limit, 0 for none (overrides config)")
    ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads,
                 "compute threads per worker (overrides config)")
    ->check(CLI::Range(1, 256));
  app.add_option("--metrics-dir", metrics_dir,
                 "folder for metrics files (overrides config)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "troupe-node: error: " << e.what() << " (see --help)"
              << std::endl;
    return 2;
  }
  auto cfg = troupe::load_run_config(config_path);
  if (!cfg)
    return fail(cfg.error());
  if (workers > 0)
    cfg->cluster.workers = workers;
  if (shards > 0)
    cfg->cluster.shards = shards;
  // CLI11 has checked the name; the names are those of to_string.
  using troupe::cluster_config;
  for (auto m : {cluster_config::mode::async, cluster_config::mode::sync,
                 cluster_config::mode::ssp, cluster_config::mode::easgd})
    if (mode == to_string(m))
      cfg->cluster.consistency = m;
  if (cfg->cluster.replicas_to_aggregate > cfg->cluster.workers)
    return fail(troupe::make_error(
      troupe::errc::invalid_config,
      "--workers " + std::to_string(cfg->cluster.workers)
        + " is below the config's /cluster/replicas_to_aggregate ("
        + std::to_string(cfg->cluster.replicas_to_aggregate) + ")"));
  if (epochs > 0)
    cfg->training.epochs = epochs;
  if (max_steps >= 0)
    cfg->training.max_steps = max_steps;
  if (threads > 0)
    cfg->training.threads = threads;
  if (!metrics_dir.empty())
    cfg->cluster.metrics_dir = metrics_dir;
  auto data = troupe::load_datasets(cfg->data);
  if (!data)
    return fail(data.error());
  caf::actor_system_config sys_cfg;
  troupe::init_config(sys_cfg);
  caf::actor_system sys{sys_cfg};
  std::cout << "run: " << cfg->name << " (" << config_path << "), "
            << to_string(cfg->cluster.consistency) << ", "
            << cfg->cluster.workers << " workers, " << cfg->cluster.shards
            << " shards, embedded" << std::endl;
  troupe::chief_options opts;
  opts.cfg = *cfg;
  opts.data = std::make_shared<const troupe::train_test>(std::move(*data));
  opts.log = &std::cout;
  auto summary = troupe::run_cluster(sys, std::move(opts));
  if (!summary)
    return fail(summary.error());
  return 0;
}

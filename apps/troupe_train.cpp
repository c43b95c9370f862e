// troupe-train: trains a model from a JSON run config in one process, or
// (--evaluate CKPT) scores a checkpoint on the config's test set.
//
// Exit codes: 0 done; 2 bad input (command line, config, dataset, a
// checkpoint that does not fit); 1 a failure while training (e.g. the loss
// turned NaN, a disk error).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "models/backend_factory.hpp"
#include "apps/command_line.hpp"
#include "apps/options/device_choice.hpp"
#include "apps/exit_codes.hpp"
#include "apps/metrics/local_metrics.hpp"
#include "apps/metrics/metrics_endpoint.hpp"
#include "apps/options/run_overrides.hpp"
#include "models/checkpoint_eval.hpp"
#include "models/trainer.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

namespace {

int fail(const caf::error& err) {
  return troupe::report_failure("troupe-train", err);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a model from a JSON run config in one process."};
  std::string config_path;
  std::optional<troupe::device_spec> device;
  int threads = 0, epochs = 0;
  int64_t max_steps = -1;
  std::string evaluate, metrics_dir, metrics_listen;
  app.add_option("-c,--config", config_path, "run config (JSON)")->required();
  app.add_option("--threads", threads, "compute threads (overrides config)")
    ->check(CLI::Range(1, 256));
  troupe::add_device_option(app, device,
                            "compute device: cpu, gpu or gpu:N (overrides "
                            "config)");
  app.add_option("--epochs", epochs, "epochs (overrides config)")
    ->check(CLI::Range(1, 1 << 20));
  app
    .add_option("--max-steps", max_steps,
                "step limit, 0 for none (overrides config)")
    ->check(CLI::NonNegativeNumber);
  app.add_option("--evaluate", evaluate,
                 "score this checkpoint on the config's test set (accuracy, "
                 "loss, per class, confusion matrix) and exit; trains and "
                 "writes nothing");
  app.add_option("--metrics-dir", metrics_dir,
                 "folder for this run's metrics files (overrides the "
                 "config's cluster.metrics_dir)");
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics "
                 "while training (port 0: any free one, printed)");
  troupe::run_overrides over;
  troupe::add_run_overrides(app, over,
                            "the run's name (overrides the config's)");
  if (auto code = troupe::parse_command_line(app, argc, argv, "troupe-train"))
    return *code;
  auto read = troupe::read_flagged_config(config_path, over);
  if (!read)
    return fail(read.error());
  auto* cfg = &read->cfg;
  if (threads > 0)
    cfg->training.threads = threads;
  cfg->training.threads = troupe::compute_threads(cfg->training.threads, 1);
  if (epochs > 0)
    cfg->training.epochs = epochs;
  if (max_steps >= 0)
    cfg->training.max_steps = max_steps;
  if (!metrics_dir.empty())
    cfg->cluster.metrics_dir = metrics_dir;
  std::optional<std::pair<std::string, uint16_t>> metrics_at;
  if (!metrics_listen.empty()) {
    auto at = troupe::parse_metrics_listen(metrics_listen);
    if (!at)
      return fail(at.error());
    metrics_at = *at;
  }
  if (auto err = troupe::choose_device(*cfg, "", device))
    return fail(err);
  auto data = troupe::load_datasets(cfg->data);
  if (!data)
    return fail(data.error());
  try {
    auto backend = troupe::make_backend(cfg->training.device,
                                        cfg->training.threads);
    if (!backend)
      return fail(backend.error());
    if (!evaluate.empty()) {
      if (auto err = troupe::evaluate_checkpoint(*cfg, *data, **backend,
                                                 evaluate, std::cout))
        return fail(err);
      return 0;
    }
    troupe::local_status status;
    // With a metrics port the run's lines are also kept, for the page.
    troupe::kept_log run_log{metrics_at.has_value(), &std::cout};
    auto tail = run_log.tail();
    std::ostream& out = *run_log.stream();
    std::unique_ptr<troupe::metrics_endpoint> metrics;
    if (metrics_at) {
      auto started = troupe::metrics_endpoint::start(
        metrics_at->first, metrics_at->second,
        [&status, &cfg](std::string& page) {
          page = troupe::local_metrics(status, *cfg);
          return true;
        },
        [&status, &cfg, tail](const troupe::http_request& req) {
          return troupe::local_port_answer(status, *cfg, tail.get(), req);
        });
      if (!started)
        return fail(started.error());
      metrics = std::move(*started);
      out << "metrics: " << metrics->url() << "\npage: http://"
          << metrics->host() << ":" << metrics->port() << "/" << std::endl;
    }
    out << "run: " << cfg->name << " (" << config_path << ")\n";
    auto summary = troupe::run_local_training(*cfg, *data, **backend, out,
                                              &status);
    metrics.reset(); // before `status` goes
    if (!summary)
      return fail(summary.error());
  } catch (const std::exception& e) {
    std::cerr << "troupe-train: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

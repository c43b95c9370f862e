#include "apps/metrics/local_metrics.hpp"

#include <chrono>

#include "apps/metrics/metrics_history.hpp"
#include "apps/metrics/prometheus_text.hpp"
#include "apps/metrics/view_api.hpp"
#include "apps/web/page_files.hpp"

namespace troupe {

cluster_view local_view(local_status& status, const run_config& cfg) {
  cluster_view v;
  auto& r = v.run;
  {
    std::lock_guard<std::mutex> guard{status.mutex};
    r.run_id = status.run_id;
    r.steps = status.steps;
    r.samples = status.samples;
    r.total_steps = status.total_steps;
    r.epoch = status.epoch;
    r.seconds = status.seconds;
    r.examples_per_sec = status.seconds > 0
                           ? static_cast<double>(status.samples)
                               / status.seconds
                           : 0.0;
    r.loss = status.loss;
    r.test_accuracy = status.test_accuracy;
    r.learning_rate = status.learning_rate;
    worker_view w;
    w.node = "local";
    w.state = "running";
    w.step = status.steps;
    w.samples = status.samples;
    w.examples_per_sec = r.examples_per_sec;
    w.loss = status.loss < 0 ? 0 : status.loss;
    v.workers.push_back(w);
  }
  r.name = cfg.name;
  r.mode = "local";
  r.phase = "training";
  r.optimizer = to_string(cfg.training.optimizer.type);
  if (r.examples_per_sec > 0)
    r.eta_seconds = static_cast<double>(r.total_steps - r.steps)
                    * cfg.training.batch_size / r.examples_per_sec;
  node_view self;
  self.name = "local";
  self.up = self.chief = true;
  self.workers = {0};
  take_usage(self, own_process_usage());
  self.heard_age = 0; // this process
  v.nodes.push_back(std::move(self));
  return v;
}

std::string local_metrics(local_status& status, const run_config& cfg) {
  return prometheus_text(local_view(status, cfg), own_process_usage());
}

std::optional<http_response> local_port_answer(local_status& status,
                                               const run_config& cfg,
                                               const log_tail* tail,
                                               const http_request& req) {
  if (auto runs = metrics_history(cfg.cluster.metrics_dir, req))
    return runs;
  cluster_view v;
  auto now = [&] {
    v = local_view(status, cfg);
    return api_view{&v, std::chrono::system_clock::now(), {}};
  };
  if (auto api = view_api(now, tail, req))
    return api;
  return page_answer(req);
}

} // namespace troupe

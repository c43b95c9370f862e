#include "apps/launch/chief_process.hpp"

#include <iostream>
#include <sstream>

#include "actors/chief/chief.hpp"
#include "actors/data_plane/data_link.hpp"
#include "actors/net/remote.hpp"
#include "actors/protocol/system_config.hpp"
#include "actors/timing.hpp"
#include "apps/launch/chief_metrics.hpp"
#include "apps/launch/node_process.hpp"
#include "caf/all.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

namespace {

/// What the run's header says of async workers' prefetch and look-ahead,
/// which "auto" settles by where the run is (runtime/config/
/// config_checks.cpp): ", prefetch, look-ahead 1" or nothing.
std::string overlap_of(const cluster_config& c) {
  std::ostringstream out;
  if (c.consistency == cluster_config::mode::async && c.prefetch)
    out << ", prefetch";
  if (c.consistency != cluster_config::mode::sync
      && c.consistency != cluster_config::mode::easgd && c.stale_lookahead > 0)
    out << ", look-ahead " << c.stale_lookahead;
  return out.str();
}

} // namespace

caf::expected<cluster_summary>
run_chief_node(run_config cfg, chief_process what,
               std::shared_ptr<const link_guard> guard,
               const link_options& links, stop_signals& signals) {
  const auto& cl = cfg.cluster;
  bool runs_workers = !cl.distributed() || cl.node(cl.chief_node)->workers > 0;
  // Without workers of its own, the chief reads the samples it scores.
  auto data = load_datasets(
    cfg.data, runs_workers ? data_needs{} : data_needs::scoring(cfg.data));
  if (!data)
    return data.error();
  caf::actor_system_config sys_cfg;
  init_config(sys_cfg);
  if (cl.distributed() || what.listen)
    init_network(sys_cfg, cl);
  caf::actor_system sys{sys_cfg};
  apply_link_security(sys, std::move(guard), links);
  std::cout << "run: " << cfg.name << " (" << what.config_path << "), "
            << to_string(cfg.cluster.consistency) << ", " << cfg.cluster.workers
            << (cfg.cluster.workers == 1 ? " worker, " : " workers, ")
            << cfg.cluster.shards
            << (cfg.cluster.shards == 1 ? " shard, " : " shards, ")
            << (cl.distributed()
                  ? "chief of " + std::to_string(cl.nodes.size()) + " nodes"
                  : std::string{"embedded"})
            << (runs_workers ? ", workers on " + cfg.training.device.to_string()
                             : std::string{})
            << overlap_of(cfg.cluster)
            << (cl.distributed() ? ", links: " + security_of(sys)->describe()
                                 : std::string{})
            << std::endl;
  // Also settles the threads of the chief's evaluation backend.
  settle_thread_split(sys, cfg,
                      !runs_workers      ? 0
                      : cl.distributed() ? cl.node(cl.chief_node)->workers
                                         : cfg.cluster.workers);
  chief_options opts;
  if (cl.distributed()) { // the chief's node may hold shards too
    auto* me = cl.node(cl.chief_node);
    auto data_plane = data_server::start(sys, me->listen_host(), me->data_port);
    if (!data_plane)
      return data_plane.error();
    opts.data_plane = *data_plane;
    std::cout << "node " << me->name << ": listening on " << me->listen_host()
              << ":" << me->port << ", data plane on " << me->listen_host()
              << ":" << (*data_plane)->port()
              << (me->bind.empty() ? std::string{}
                                   : " (reached at " + me->host + ")")
              << std::endl;
  }
  opts.insecure_links = (cl.distributed() || what.listen) && links.insecure;
  opts.cfg = std::move(cfg);
  opts.config_text = std::move(what.config_text);
  opts.data = std::make_shared<const train_test>(std::move(*data));
  // With a metrics port the chief's log is also kept, for the page.
  kept_log run_log{what.metrics_at.has_value(), &std::cout};
  auto tail = run_log.tail();
  opts.log = run_log.stream();
  opts.listen = what.listen;
  opts.shell_key = links.key_file;
  opts.external = std::move(what.external);
  opts.evaluate = std::move(what.evaluate);
  opts.words = std::move(what.words);
  auto data_plane = opts.data_plane;
  // Bound before the run starts, so a taken port fails the command at once.
  auto slot = std::make_shared<chief_slot>();
  std::unique_ptr<chief_port> metrics;
  if (what.metrics_at) {
    auto key = page_steering_key(sys, links.key_file, opts.log);
    if (!key)
      return key.error();
    auto started = serve_chief_metrics(
      sys, *what.metrics_at, slot, request_timeout(opts.cfg),
      {*key, tail, opts.cfg.cluster.metrics_dir}, opts.log);
    if (!started)
      return started.error();
    metrics = std::move(*started);
  }
  // The first signal is the shell's "stop"; a second one exits at once.
  auto summary = run_cluster(
    sys, std::move(opts), [&](const chief_actor& chief) {
      signals.on_first([chief](const std::string& signal) {
        caf::anon_send(chief, stop_atom_v, signal);
      });
      slot->set(chief);
    });
  slot->set({}); // lets go of the chief's handle
  if (metrics)
    metrics->close(summary); // a page that watches sees how it ended
  metrics.reset();
  signals.on_first(nullptr); // likewise
  if (data_plane)
    data_plane->stop();
  return summary;
}

} // namespace troupe

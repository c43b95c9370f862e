// troupe-node: runs a training run on troupe's actor cluster.
//   troupe-node --config FILE [--listen HOST:PORT]
//                                           every actor in this process
//                                           (the embedded mode; the shell
//                                           connects at HOST:PORT)
//   troupe-node --config FILE --node NAME   one node of the cluster file:
//                                           the chief's node runs the run,
//                                           the others serve it
//   troupe-node --config FILE               with TF_CONFIG or in an srun
//                                           step: the node the scheduler's
//                                           environment names
//                                           (runtime/config/membership.hpp)
//   troupe-node --join HOST:PORT --workers N
//                                           adds N workers to a running
//                                           cluster whose chief is there
//
// Exit codes: see apps/exit_codes.hpp.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/launch/chief_process.hpp"
#include "apps/command_line.hpp"
#include "apps/options/device_choice.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/link_options.hpp"
#include "apps/metrics/metrics_endpoint.hpp"
#include "apps/launch/node_process.hpp"
#include "apps/options/run_overrides.hpp"
#include "apps/launch/stop_signals.hpp"
#include "actors/net/remote.hpp"
#include "actors/net/sockets.hpp"
#include "caf/all.hpp"
#include "runtime/params/buffer_pool.hpp"
#include "runtime/config/config.hpp"
#include "runtime/config/membership.hpp"

namespace {

int fail(const caf::error& err) {
  return troupe::report_failure("troupe-node", err);
}

/// Fills the config's nodes from TF_CONFIG or Slurm's variables, when the
/// environment has them, and says so; returns this process's node name
/// ("" when neither is there).
caf::expected<std::string>
membership_from_environment(troupe::run_config& cfg) {
  using namespace troupe;
  auto env = [](const char* name) -> const char* { return std::getenv(name); };
  auto source = membership_in(env);
  if (source == membership_source::config)
    return std::string{};
  auto m = source == membership_source::tf_config
             ? membership_from_tf_config(env("TF_CONFIG"), cfg.cluster)
             : membership_from_slurm(env, cfg.cluster);
  if (!m)
    return m.error();
  // A pod or a Slurm node may not resolve its own name to the address its
  // peers reach it at: listen on every interface, except on loopback.
  for (auto& n : cfg.cluster.nodes)
    n.bind = is_loopback(n.host) ? std::string{} : std::string{"0.0.0.0"};
  std::cout << "membership: " << to_string(m->source) << ": this is node "
            << m->node << "; " << m->summary << std::endl;
  return m->node;
}

} // namespace

int main(int argc, char** argv) {
  // Before any thread has an arena of its own (the dataset's loading and
  // the actor system start threads): see keep_freed_memory.
  troupe::keep_freed_memory();
  // First: every thread started from here on leaves SIGINT and SIGTERM to
  // the watcher.
  troupe::stop_signals signals{"troupe-node"};
  CLI::App app{"Run a training run on troupe's actor cluster."};
  std::string config_path, mode, metrics_dir, node, join;
  std::string metrics_listen, listen;
  std::optional<troupe::device_spec> device;
  int workers = 0, shards = 0, epochs = 0, threads = 0;
  uint16_t data_port = 0;
  int64_t max_steps = -1;
  double join_timeout = 10;
  auto* config_opt = app.add_option("-c,--config", config_path,
                                    "run config (JSON)");
  app
    .add_option("--node", node,
                "run this node of the config's cluster (its \"nodes\")")
    ->needs(config_opt);
  auto* join_opt = app.add_option(
    "--join", join,
    "add --workers workers to the cluster whose chief "
    "listens at HOST:PORT");
  join_opt->excludes(config_opt);
  troupe::run_overrides over;
  troupe::add_run_overrides(app, over,
                            "the run's name (overrides the config's); with "
                            "--join, the joining node's name");
  app.add_option("--data-port", data_port,
                 "this node's data-plane port (overrides the cluster file; "
                 "0: any free one)");
  app
    .add_option("--timeout", join_timeout,
                "with --join: seconds to wait for the chief")
    ->check(CLI::PositiveNumber);
  app.add_option("--workers", workers, "workers (overrides config)")
    ->check(CLI::Range(1, 1024));
  app.add_option("--shards", shards, "parameter shards (overrides config)")
    ->check(CLI::Range(1, 1024));
  app.add_option("--mode", mode, "consistency mode (overrides config)")
    ->check(CLI::IsMember({"async", "sync", "ssp", "easgd"}));
  app.add_option("--epochs", epochs, "epochs (overrides config)")
    ->check(CLI::Range(1, 1 << 20));
  app
    .add_option("--max-steps", max_steps,
                "step limit, 0 for none (overrides config)")
    ->check(CLI::NonNegativeNumber);
  app
    .add_option("--threads", threads,
                "compute threads per worker (overrides config)")
    ->check(CLI::Range(1, 256));
  troupe::link_options links;
  troupe::add_link_options(app, links);
  troupe::add_device_option(app, device,
                            "the workers' device: cpu, gpu or gpu:N "
                            "(overrides the config and the node's entry)");
  app.add_option("--metrics-dir", metrics_dir,
                 "folder for metrics files (overrides config)");
  app.add_option("--listen", listen,
                 "the embedded mode: listen for troupe-shell at HOST:PORT "
                 "(port 0: any free one, printed)");
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics "
                 "(the chief's process; port 0: any free one, printed)");
  if (auto code = troupe::parse_command_line(app, argc, argv, "troupe-node"))
    return *code;
  if (!join.empty()) {
    if (workers < 1) {
      std::cerr << "troupe-node: error: --join needs --workers N (N >= 1)"
                << std::endl;
      return 2;
    }
    troupe::join_options jo;
    jo.chief_address = join;
    jo.workers = workers;
    jo.name = over.name;
    jo.threads = threads;
    jo.device = device;
    jo.timeout_s = join_timeout;
    jo.links = links;
    auto failure = troupe::run_joining_node(jo, signals);
    return failure ? fail(failure) : 0;
  }
  if (config_path.empty()) {
    std::cerr << "troupe-node: error: --config FILE or --join HOST:PORT is "
                 "required (see --help)"
              << std::endl;
    return 2;
  }
  // The text goes to every node that registers, so it is read once here.
  auto read = troupe::read_flagged_config(config_path, over);
  if (!read)
    return fail(read.error());
  auto& text = read->text;
  auto* cfg = &read->cfg;
  auto& cl = cfg->cluster;
  if (cl.distributed() && node.empty())
    return fail(troupe::make_error(troupe::errc::invalid_config,
                                   config_path
                                     + " places actors on nodes; "
                                       "start each with --node NAME (one of: "
                                     + cl.node_names() + ")"));
  if (!node.empty()) {
    if (!cl.distributed())
      return fail(troupe::make_error(
        troupe::errc::invalid_config,
        config_path + ": --node needs a cluster file with /cluster/nodes"));
    if (cl.node(node) == nullptr)
      return fail(troupe::make_error(troupe::errc::invalid_config,
                                     "unknown node \"" + node
                                       + "\": " + config_path + " lists "
                                       + cl.node_names()));
    if (workers > 0 || shards > 0 || !mode.empty())
      return fail(troupe::make_error(
        troupe::errc::invalid_config,
        "--workers, --shards and --mode come from the cluster file when "
        "--node is given"));
  }
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
  // Neither nodes in the file nor --node: the nodes the scheduler's
  // environment names, if it names them.
  if (!cl.distributed() && node.empty()) {
    auto from_env = membership_from_environment(*cfg);
    if (!from_env)
      return fail(from_env.error());
    node = *from_env;
    // Nodes that join read the nodes from the text the chief hands them,
    // so that their training identity places them as this one does.
    if (!node.empty()) {
      auto with_nodes = troupe::apply_settings(text, config_path,
                                               troupe::node_settings(cl));
      if (!with_nodes)
        return fail(with_nodes.error());
      text = std::move(*with_nodes);
    }
  }
  if (data_port != 0) {
    auto me = std::find_if(cl.nodes.begin(), cl.nodes.end(),
                           [&](const auto& n) { return n.name == node; });
    if (me == cl.nodes.end())
      return fail(troupe::make_error(
        troupe::errc::invalid_config,
        "--data-port is for a node of a cluster (--node, TF_CONFIG or "
        "Slurm)"));
    me->data_port = data_port;
    if (auto clash = troupe::port_clash(cl.nodes); !clash.empty())
      return fail(troupe::make_error(troupe::errc::invalid_config,
                                     "--data-port: " + clash));
  }
  if (epochs > 0)
    cfg->training.epochs = epochs;
  if (max_steps >= 0)
    cfg->training.max_steps = max_steps;
  if (threads > 0)
    cfg->training.threads = threads;
  if (!metrics_dir.empty())
    cfg->cluster.metrics_dir = metrics_dir;
  // A node without workers (shards only) needs no device of its own.
  bool runs_workers = node.empty() || cl.node(node)->workers > 0;
  if (runs_workers)
    if (auto err = troupe::choose_device(*cfg, node, device))
      return fail(err);
  // Certificates and the key are checked before anything else starts; a
  // run that opens no port (embedded, no --listen) needs neither.
  auto guard = troupe::load_link_guard(links, &cl, node,
                                       cl.distributed() || !listen.empty()
                                         ? troupe::key_use::make_if_missing
                                         : troupe::key_use::none);
  if (!guard)
    return fail(guard.error());
  std::optional<std::pair<std::string, uint16_t>> shell_at;
  if (!listen.empty()) {
    if (cl.distributed()) {
      auto* chief = cl.node(cl.chief_node);
      return fail(troupe::make_error(
        troupe::errc::invalid_config,
        "--listen is for the embedded mode: the chief of " + config_path
          + " listens at its node's address (" + chief->host + ":"
          + std::to_string(chief->port) + ")"));
    }
    auto at = troupe::parse_address(listen, 0);
    if (!at)
      return fail(
        troupe::make_error(troupe::errc::invalid_config,
                           "--listen: " + troupe::describe(at.error())));
    shell_at = *at;
  }
  std::optional<std::pair<std::string, uint16_t>> metrics_at;
  if (!metrics_listen.empty()) {
    if (!node.empty() && node != cl.chief_node)
      return fail(troupe::make_error(
        troupe::errc::invalid_config,
        "--metrics-listen: the chief's node (" + cl.chief_node
          + ") serves the run's metrics, not node " + node));
    auto at = troupe::parse_metrics_listen(metrics_listen);
    if (!at)
      return fail(at.error());
    metrics_at = *at;
  }
  if (!node.empty() && node != cl.chief_node) {
    auto failure = troupe::run_member_node(*cfg, node, *guard, links, signals);
    return failure ? fail(failure) : 0;
  }
  troupe::chief_process what;
  what.config_path = config_path;
  what.config_text = std::move(text);
  what.listen = shell_at;
  what.metrics_at = metrics_at;
  auto summary = troupe::run_chief_node(std::move(*cfg), std::move(what),
                                        *guard, links, signals);
  return summary ? 0 : fail(summary.error());
}

#include "apps/launch/node_process.hpp"

#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include "actors/data_plane/data_link.hpp"
#include "actors/node_agent.hpp"
#include "actors/timing.hpp"
#include "actors/net/remote.hpp"
#include "actors/protocol/system_config.hpp"
#include "apps/options/device_choice.hpp"
#include "runtime/base/errc.hpp"
#include "apps/launch/reach_chief.hpp"
#include "runtime/config/run_identity.hpp"

namespace troupe {

namespace {

/// Asks the chief to let this node leave the run (its workers finish their
/// steps and hand back their leases); true once it has, and the agent has
/// stopped what runs here.
bool leave_run(caf::scoped_actor& self, const chief_actor& chief,
               const node_agent_actor& agent, const std::string& name,
               const std::string& signal, const run_config& cfg) {
  std::cout << "node " << name << ": " << signal
            << ": leaving the run; its workers finish their steps in flight"
            << std::endl;
  bool left = false;
  self->request(chief, request_timeout(cfg), leave_atom_v, name)
    .receive([&](bool) { left = true; },
             [&](caf::error& err) {
               std::cerr << "troupe-node: node " << name
                         << " cannot leave: " << describe(err)
                         << " (a second signal ends it at once)" << std::endl;
             });
  if (!left)
    return false;
  self->request(agent, std::chrono::seconds(5), finish_atom_v, caf::error{})
    .receive([](bool) {}, [](caf::error&) {});
  std::cout << "node " << name << ": left the run" << std::endl;
  return true;
}

/// Where this node finds its chief, again after losing it.
struct chief_place {
  std::string host;
  uint16_t port = 0;
  std::string who; ///< for errors: "the chief (node chief at HOST:PORT)"
};

/// How serving one chief ended.
enum class served { run_over, left, chief_lost };

/// The agent ended: with the run's error (kept in `failure`, its kind
/// too) or after a run that succeeded.
void report_agent_end(const caf::down_msg& dm, const std::string& name,
                      caf::error& failure) {
  if (dm.reason && dm.reason != caf::exit_reason::user_shutdown) {
    auto kind = dm.reason.category() == caf::atom("troupe")
                  ? static_cast<errc>(dm.reason.code())
                  : errc::actor_down;
    failure = make_error(kind, "node " + name
                                 + ": the run failed: " + describe(dm.reason));
  } else {
    std::cout << "node " << name << ": the run is over" << std::endl;
  }
}

/// Serves `chief` until the run is over (the agent ended: `failure` says
/// how),
/// the node left it on a signal, or the chief is lost (its link broke).
served serve_chief(caf::scoped_actor& self, const chief_actor& chief,
                   const node_agent_actor& agent, const std::string& name,
                   const run_config& cfg, caf::error& failure) {
  self->monitor(chief);
  for (;;) {
    std::optional<served> end;
    caf::error lost;
    self->receive(
      [&](leave_atom, const std::string& sig) {
        if (leave_run(self, chief, agent, name, sig, cfg))
          end = served::left;
      },
      [&](caf::down_msg& dm) {
        if (dm.source == agent.address()) {
          report_agent_end(dm, name, failure);
          end = served::run_over;
        } else if (dm.source == chief.address()) {
          if (dm.reason && dm.reason != caf::exit_reason::user_shutdown) {
            lost = dm.reason;
            return;
          }
          // It ended the run without releasing this node: stop here too.
          self
            ->request(agent, std::chrono::seconds(5), finish_atom_v,
                      caf::error{})
            .receive([](bool) {}, [](caf::error&) {});
        }
      });
    if (lost) {
      // The chief's last message may have been the finish that the agent
      // is still carrying out: the chief's process exits once the agent
      // has answered, and its closed link can be noticed here before the
      // agent's own end. An agent that ends within 2 s ended the run.
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!end && std::chrono::steady_clock::now() < until)
        self->receive(
          [&](caf::down_msg& dm) {
            if (dm.source == agent.address()) {
              report_agent_end(dm, name, failure);
              end = served::run_over;
            }
          },
          caf::after(std::max(caf::timespan{0},
                              std::chrono::duration_cast<caf::timespan>(
                                until - std::chrono::steady_clock::now())))
            >> [] {});
      if (!end) {
        std::cout << "node " << name << ": lost the chief (" << describe(lost)
                  << ")" << std::endl;
        end = served::chief_lost;
      }
    }
    if (end)
      return *end;
  }
}

/// Registers `agent` with the chief and serves until the run ends. A lost
/// chief is waited for (node_timeout_s) at its address: the workers here
/// stop, the shards keep their values, and the node registers with the
/// chief that comes back (a restarted one, or the same one after a
/// freeze), naming the run it served. Returns no error when the run
/// succeeded or the node left it on a signal, the run's error when it
/// failed (the agent ends with it), or why no chief came back.
caf::error serve(caf::actor_system& sys, chief_actor chief,
                 const chief_place& where, node_agent_actor agent,
                 std::string name, const std::string& host, uint16_t port,
                 int32_t join_workers, uint16_t data_port,
                 const run_config& cfg, stop_signals& signals) {
  caf::scoped_actor self{sys};
  self->monitor(agent);
  // The first signal asks to leave; serve_chief takes it.
  signals.on_first(
    [me = caf::actor_cast<caf::actor>(self.ptr())](const std::string& sig) {
      caf::anon_send(me, leave_atom_v, sig);
    });
  auto identity = identity_text(training_identity(cfg));
  std::string run_id; // the run this node served, once it has
  caf::error failure;
  using clock = std::chrono::steady_clock;
  // Set while a lost chief is waited for: registering again is tried
  // until then (a chief just back from a freeze may let the first
  // attempts run into its old, dead connections).
  std::optional<clock::time_point> deadline;
  for (;;) {
    bool registered = false;
    caf::error refused;
    caf::timespan patience = deadline ? caf::timespan{reregister_patience}
                                      : caf::timespan{std::chrono::seconds(30)};
    self
      ->request(chief, patience, register_atom_v,
                node_registration{name, host, port, agent, join_workers,
                                  data_port, identity, run_id})
      .receive(
        [&](std::string& assigned, std::string& id) {
          registered = true;
          name = assigned;
          run_id = id;
        },
        [&](caf::error& err) { refused = std::move(err); });
    if (!registered && deadline && clock::now() < *deadline
        && refused.category() != caf::atom("troupe")) {
      // Not refused by a chief, only unanswered: connect again.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else if (!registered) {
      failure = std::move(refused);
      self->send(agent, finish_atom_v, caf::error{});
      break;
    } else {
      deadline.reset();
      std::cout << "node " << name << ": registered with the chief (run "
                << run_id << ")" << std::endl;
      if (serve_chief(self, chief, agent, name, cfg, failure)
          != served::chief_lost)
        break;
      self->send(agent, stop_atom_v);
      std::cout << "node " << name << ": its workers stop; its shards keep "
                << "their values; waiting up to " << cfg.cluster.node_timeout_s
                << " s for a chief at " << where.host << ":" << where.port
                << std::endl;
      deadline = clock::now()
                 + std::chrono::duration_cast<clock::duration>(
                   std::chrono::duration<double>(cfg.cluster.node_timeout_s));
    }
    auto left = std::chrono::duration<double>(*deadline - clock::now());
    auto again = reach_chief(sys, where.host, where.port,
                             std::max(left.count(), 0.2), where.who, true);
    if (!again) {
      failure = again.error();
      self
        ->request(agent, std::chrono::seconds(5), finish_atom_v, again.error())
        .receive([](bool) {}, [](caf::error&) {});
      break;
    }
    chief = *again;
  }
  signals.on_first(nullptr); // lets go of this actor's handle
  return failure;
}

} // namespace

void settle_thread_split(caf::actor_system& sys, run_config& cfg,
                         int workers_here) {
  const bool automatic = cfg.training.threads == 0;
  const int each = compute_threads(cfg.training.threads, workers_here);
  cfg.training.threads = each;
  if (workers_here == 0)
    return;
  const int cores = static_cast<int>(
    std::max(1u, std::thread::hardware_concurrency()));
  const int compute = workers_here * each;
  // Workers compute inside their handlers on the actor threads, each
  // helped by each - 1 threads of its backend's pool.
  std::cout << "threads: " << cores << " cores, "
            << sys.scheduler().num_workers() << " actor threads, " << each
            << " compute thread" << (each == 1 ? "" : "s") << " per worker ("
            << workers_here << " worker" << (workers_here == 1 ? "" : "s")
            << " here" << (automatic ? ", auto" : "") << ")"
            << (each > 1 && compute > cores
                  ? "; more compute threads than cores: /training/threads "
                      + std::to_string(std::max(1, cores / workers_here))
                      + " (or \"auto\") would fit"
                  : std::string{})
            << std::endl;
}

caf::error run_member_node(const run_config& cfg_in, const std::string& node,
                           std::shared_ptr<const link_guard> guard,
                           const link_options& links, stop_signals& signals,
                           external_step_factory external) {
  run_config cfg = cfg_in;
  auto* me = cfg.cluster.node(node);
  auto* chief_node = cfg.cluster.node(cfg.cluster.chief_node);
  caf::actor_system_config sys_cfg;
  init_config(sys_cfg);
  init_network(sys_cfg, cfg.cluster);
  caf::actor_system sys{sys_cfg};
  settle_thread_split(sys, cfg, me->workers);
  apply_link_security(sys, std::move(guard), links);
  // Shards placed here (by the file, or restored here after their node
  // was lost) serve workers on other nodes through it.
  auto data_plane = data_server::start(sys, me->listen_host(), me->data_port);
  if (!data_plane)
    return data_plane.error();
  agent_options ao;
  ao.node = node;
  ao.cfg = cfg;
  ao.data_plane = *data_plane;
  ao.external = std::move(external);
  if (me->workers > 0) { // else loaded if a worker is ever moved here
    auto data = load_datasets(cfg.data, data_needs::training());
    if (!data)
      return data.error();
    ao.data = std::make_shared<const train_test>(std::move(*data));
  }
  auto agent = sys.spawn(node_agent_impl, std::move(ao));
  auto stop_agent = [&] {
    (*data_plane)->stop();
    caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
  };
  if (auto port = publish_on(sys, agent, me->listen_host(), me->port); !port) {
    stop_agent();
    return port.error();
  }
  std::cout << "node " << node << ": listening on " << me->listen_host() << ":"
            << me->port << ", data plane on " << me->listen_host() << ":"
            << (*data_plane)->port()
            << (me->bind.empty() ? std::string{}
                                 : " (reached at " + me->host + ")")
            << (me->workers > 0
                  ? ", workers on " + cfg.training.device.to_string()
                  : std::string{})
            << "; connecting to the chief at " << chief_node->host << ":"
            << chief_node->port << "; links: " << security_of(sys)->describe()
            << std::endl;
  chief_place where{chief_node->host, chief_node->port,
                    "the chief (node " + cfg.cluster.chief_node + " at "
                      + chief_node->host + ":"
                      + std::to_string(chief_node->port) + ")"};
  auto chief = reach_chief(sys, where.host, where.port,
                           cfg.cluster.node_timeout_s, where.who);
  if (!chief) {
    stop_agent();
    return chief.error();
  }
  auto failure = serve(sys, *chief, where, agent, node, me->host, me->port, -1,
                       (*data_plane)->port(), cfg, signals);
  (*data_plane)->stop();
  sys.middleman().unpublish(agent);
  return failure;
}

caf::error run_joining_node(const join_options& opts, stop_signals& signals) {
  auto addr = parse_address(opts.chief_address);
  if (!addr)
    return addr.error();
  auto guard = load_link_guard(opts.links, nullptr, "", key_use::must_exist);
  if (!guard)
    return guard.error();
  caf::actor_system_config sys_cfg;
  init_config(sys_cfg);
  init_network(sys_cfg, cluster_config{});
  caf::actor_system sys{sys_cfg};
  apply_link_security(sys, std::move(*guard), opts.links);
  auto chief = reach_chief(sys, addr->first, addr->second, opts.timeout_s);
  if (!chief)
    return chief.error();
  std::string text;
  caf::error err;
  {
    caf::scoped_actor self{sys};
    self->request(*chief, std::chrono::seconds(30), register_atom_v)
      .receive([&](std::string& t) { text = std::move(t); },
               [&](caf::error& e) { err = std::move(e); });
  }
  if (err)
    return err;
  auto cfg = parse_run_config(text, "the chief's config");
  if (!cfg)
    return cfg.error();
  bool external = cfg->model.type == model_config::kind::external;
  if (external != static_cast<bool>(opts.external))
    return make_error(
      errc::invalid_config,
      external ? "the run at " + opts.chief_address
                   + " trains an external model, whose steps are a "
                     "Python function: join it from Python (troupe.join)"
               : "the run at " + opts.chief_address + " trains \""
                   + std::string{to_string(cfg->model.type)}
                   + "\", which troupe computes: join it with troupe-node "
                     "--join");
  if (opts.threads > 0)
    cfg->training.threads = opts.threads;
  settle_thread_split(sys, *cfg, opts.workers);
  if (auto device_err = choose_device(*cfg, "", opts.device))
    return device_err;
  agent_options ao;
  ao.node = opts.name;
  ao.cfg = *cfg;
  ao.external = opts.external;
  auto data = load_datasets(cfg->data, data_needs::training());
  if (!data)
    return data.error();
  ao.data = std::make_shared<const train_test>(std::move(*data));
  auto agent = sys.spawn(node_agent_impl, std::move(ao));
  // It does not listen: its address is the one the chief sees it at.
  auto host = local_address_toward(addr->first, addr->second);
  std::cout << "joining the cluster at " << opts.chief_address << " with "
            << opts.workers
            << (opts.workers == 1 ? " worker on " : " workers on ")
            << cfg->training.device.to_string() << std::endl;
  // It holds no shards, so it serves no data plane.
  chief_place where{addr->first, addr->second,
                    "the chief at " + opts.chief_address};
  return serve(sys, *chief, where, agent, opts.name, host, 0, opts.workers, 0,
               *cfg, signals);
}

} // namespace troupe

// troupe._troupe: troupe's runtime inside a Python process, whose workers
// run the user's step function for a model declared with model.type
// "external". train() runs a whole cluster in this process (the embedded
// mode: chief, feeder, shards and workers as actors); run_node() runs one
// node of a cluster file, as troupe-node --node does. The Python
// side of the package is python/troupe/__init__.py.
#include <chrono>
#include <functional>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <pthread.h>
#include <signal.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "actors/chief/chief.hpp"
#include "actors/protocol/system_config.hpp"
#include "actors/timing.hpp"
#include "apps/launch/chief_metrics.hpp"
#include "apps/launch/chief_process.hpp"
#include "apps/launch/link_options.hpp"
#include "apps/metrics/metrics_endpoint.hpp"
#include "apps/launch/node_process.hpp"
#include "apps/launch/stop_signals.hpp"
#include "python/python_errors.hpp"
#include "python/python_step.hpp"
#include "runtime/base/build_config.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/host_port.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace py = pybind11;

namespace {

using troupe::python::raise;

/// Refuses a `step` that cannot be called, before anything starts.
void check_step(const py::object& step) {
  if (!PyCallable_Check(step.ptr()))
    throw py::type_error("step must be callable: step(params, samples) -> "
                         "(gradients, loss_sum)");
}

/// The arguments of train() and run_node() that change the run as
/// troupe-node's flags do.
struct run_arguments {
  py::object resume = py::none(); ///< None: the config's (resume by default)
  bool fresh = false;
  int64_t epochs = -1, max_steps = -1;
};

/// The hints' words for a Python caller: its arguments, not the flags.
troupe::restart_words python_words() {
  return {"fresh=True",
          "epochs= or max_steps=", "another /training/checkpoint/dir"};
}

/// What train() and run_node() both start from: a callable `step`, and
/// the config (and its text) of a run of an external model, as `args`
/// change it. `caller` names the function in the errors.
std::pair<std::string, troupe::run_config>
external_run(const std::string& config_path, const py::object& step,
             const std::string& caller, const run_arguments& args) {
  using namespace troupe;
  check_step(step);
  bool resume = !args.resume.is_none() && args.resume.cast<bool>();
  if (resume && args.fresh)
    throw py::value_error(caller
                          + ": resume=True and fresh=True exclude "
                            "each other");
  if (args.epochs == 0 || args.epochs < -1)
    throw py::value_error(caller + ": epochs must be at least 1, got "
                          + std::to_string(args.epochs));
  if (args.max_steps < -1)
    throw py::value_error(caller + ": max_steps must be >= 0, got "
                          + std::to_string(args.max_steps));
  auto text = read_config_text(config_path);
  if (!text)
    raise(text.error());
  std::vector<config_setting> settings;
  if (args.epochs > 0)
    settings.push_back({"/training/epochs", std::to_string(args.epochs)});
  if (args.max_steps >= 0)
    settings.push_back({"/training/max_steps", std::to_string(args.max_steps)});
  text = apply_settings(*text, config_path, settings);
  if (!text)
    raise(text.error());
  auto cfg = parse_run_config(*text, config_path, config_folder(config_path));
  if (!cfg)
    raise(cfg.error());
  if (resume || args.fresh) {
    if (cfg->training.checkpoint.dir.empty())
      raise(errc::invalid_config,
            caller + ": " + (args.fresh ? "fresh=True" : "resume=True")
              + ": the run keeps no checkpoints (give /training/checkpoint/dir "
                "in "
              + config_path + ")");
    cfg->training.checkpoint.resume = resume;
  } else if (!args.resume.is_none()) { // resume=False: as fresh=True
    cfg->training.checkpoint.resume = false;
  }
  text = with_base_dir(*text, *cfg);
  if (!text)
    raise(text.error());
  if (cfg->model.type != model_config::kind::external)
    raise(errc::invalid_config,
          config_path + ": /model/type: " + caller
            + " runs workers whose step is a Python "
              "function (\"external\"); troupe-node trains \""
            + std::string{to_string(cfg->model.type)} + "\" itself");
  return {std::move(*text), std::move(*cfg)};
}

/// The user's `keys` (None: none) as a key source, checked against the
/// run's tables when `cfg` is known (a joining node learns them from the
/// chief, and its steps say what does not fit). `caller` names the
/// function in the errors; `has_workers`: whether this process starts
/// workers (a node of only shards or the chief needs no keys).
std::shared_ptr<const troupe::python::key_source>
keys_of(py::object keys, const troupe::run_config* cfg,
        const std::string& caller, bool has_workers = true) {
  using namespace troupe;
  const auto& tables = cfg != nullptr ? cfg->model.tables
                                      : std::vector<table_setup>{};
  if (keys.is_none()) {
    if (!tables.empty() && has_workers)
      raise(errc::invalid_config,
            caller
              + ": the model has embedding tables (/model/tables); "
                "keys= says which rows each sample uses, e.g. keys={\""
              + tables[0].table.name
              + "\": ids} (one row of ids per "
                "training sample)");
    return nullptr;
  }
  auto source = std::make_shared<const python::key_source>(std::move(keys));
  if (cfg == nullptr)
    return source;
  if (tables.empty())
    raise(errc::invalid_config,
          caller
            + ": keys= is given, and the model has no embedding tables "
              "(/model/tables)");
  auto names = source->names();
  for (auto& name : names) {
    bool known = false;
    for (auto& t : tables)
      known = known || t.table.name == name;
    if (!known)
      raise(errc::invalid_config,
            caller + ": keys= names table \"" + name
              + "\", which /model/tables does not declare");
  }
  if (!names.empty()) // a dict: one row of keys per training sample
    for (auto& t : tables) {
      auto rows = source->rows(t.table.name);
      bool given = false;
      for (auto& name : names)
        given = given || name == t.table.name;
      if (!given)
        raise(errc::invalid_config, caller
                                      + ": keys= gives no keys for table \""
                                      + t.table.name + "\"");
      if (rows < static_cast<size_t>(cfg->data.train_samples))
        raise(errc::invalid_config,
              caller + ": keys[\"" + t.table.name + "\"] has "
                + std::to_string(rows) + " rows for "
                + std::to_string(cfg->data.train_samples)
                + " training samples (/data/train_samples)");
    }
  return source;
}

/// "HOST:PORT" for `what` (listen=, metrics_listen=), or none for "".
std::optional<std::pair<std::string, uint16_t>>
address_of(const std::string& text, const std::string& what) {
  if (text.empty())
    return std::nullopt;
  auto at = what == "metrics_listen" ? troupe::parse_metrics_listen(text)
                                     : troupe::parse_address(text, 0);
  if (!at)
    throw py::value_error(what + "=: " + troupe::describe(at.error()));
  return *at;
}

/// The user's evaluate function (None: the run is not evaluated), taking
/// its turn with the steps.
troupe::external_evaluator evaluator_of(py::object evaluate,
                                        const troupe::python::call_turn& turn) {
  if (evaluate.is_none())
    return nullptr;
  if (!PyCallable_Check(evaluate.ptr()))
    throw py::type_error("evaluate must be callable: evaluate(params) -> "
                         "(accuracy, loss)");
  return troupe::python::python_evaluator(
    std::make_shared<troupe::python::held_object>(std::move(evaluate)), turn);
}

/// Calls the user's progress function with each record the run made
/// since the last call (a dict, as the metrics files' JSON lines); false
/// once it raised, with the exception kept in `failed`.
bool deliver_progress(const py::object& progress,
                      std::deque<std::string>& records,
                      std::optional<py::error_already_set>& failed) {
  auto loads = py::module_::import("json").attr("loads");
  for (; !records.empty(); records.pop_front()) {
    if (failed)
      continue;
    try {
      progress(loads(records.front()));
    } catch (py::error_already_set& e) {
      failed.emplace(std::move(e));
      return false;
    }
  }
  return true;
}

/// What train() and the chief's run_node() return: the run's summary,
/// with the test accuracy and loss when the run was evaluated.
py::dict summary_dict(const troupe::cluster_summary& summary, bool evaluated) {
  py::dict out;
  out["steps"] = summary.steps;
  out["epochs"] = summary.epochs;
  out["seconds"] = summary.seconds;
  out["examples_per_sec"] = summary.examples_per_sec;
  out["restarts"] = summary.restarts;
  if (evaluated) {
    out["accuracy"] = summary.test_accuracy;
    out["loss"] = summary.test_loss;
  }
  return out;
}

py::dict train(const std::string& config_path, py::object step,
               py::object evaluate, bool quiet, py::object resume, bool fresh,
               int64_t epochs, int64_t max_steps, const std::string& listen,
               const std::string& metrics_listen, const std::string& key,
               py::object progress, py::object keys) {
  using namespace troupe;
  run_arguments args{std::move(resume), fresh, epochs, max_steps};
  auto [text, cfg] = external_run(config_path, step, "train()", args);
  auto key_source = keys_of(std::move(keys), &cfg, "train()");
  auto turn = std::make_shared<std::mutex>();
  if (cfg.cluster.distributed())
    raise(errc::invalid_config, config_path
                                  + ": /cluster/nodes: train() runs "
                                    "the whole cluster in this process; leave "
                                    "nodes out");
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw py::type_error("progress must be callable: progress(record), "
                         "record a dict");
  auto shell_at = address_of(listen, "listen");
  auto metrics_at = address_of(metrics_listen, "metrics_listen");
  // The shell's port admits only a process that proves the cluster key.
  link_options links;
  links.key_file = key;
  std::shared_ptr<const link_guard> shell_guard;
  if (shell_at) {
    auto loaded = load_link_guard(links, &cfg.cluster, "",
                                  key_use::make_if_missing);
    if (!loaded)
      raise(loaded.error());
    shell_guard = *loaded;
  }
  auto data = load_datasets(cfg.data);
  if (!data)
    raise(data.error());
  chief_options opts;
  opts.cfg = cfg;
  opts.config_text = std::move(text);
  opts.data = std::make_shared<const train_test>(std::move(*data));
  // With a metrics port the chief's log is also kept, for the page (and
  // kept only, when quiet).
  kept_log run_log{metrics_at.has_value(), quiet ? nullptr : &std::cout};
  auto tail = run_log.tail();
  opts.log = run_log.stream();
  opts.listen = shell_at;
  opts.shell_key = key;
  opts.words = python_words();
  opts.external = python::python_steps(
    std::make_shared<python::held_object>(std::move(step)), turn, key_source);
  opts.evaluate = evaluator_of(std::move(evaluate), turn);
  bool opts_evaluated = static_cast<bool>(opts.evaluate);
  // The run goes on a thread of its own; this one, the interpreter's,
  // waits without the GIL (the workers take it for each step) and wakes
  // every 100 ms, or when a progress record comes, to let Python see a
  // signal and to call `progress` here: Ctrl-C stops the run as
  // troupe-node's first SIGINT does (the chief winds it down, with a
  // final checkpoint when the run has a folder), then raises here, as
  // does an exception in `progress`.
  caf::expected<cluster_summary> summary{caf::sec::none};
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false, stop_wanted = false;
  std::deque<std::string> records;
  if (!progress.is_none())
    opts.on_record = [&](const std::string& record) {
      std::lock_guard<std::mutex> guard{mtx};
      records.push_back(record);
      cv.notify_all();
    };
  chief_actor chief;
  std::thread runner{[&] {
    caf::actor_system_config sys_cfg;
    init_config(sys_cfg);
    if (shell_at)
      init_network(sys_cfg, opts.cfg.cluster);
    caf::actor_system sys{sys_cfg};
    if (shell_guard)
      apply_link_security(sys, shell_guard, links);
    auto slot = std::make_shared<chief_slot>();
    std::unique_ptr<chief_port> metrics;
    caf::expected<cluster_summary> result{caf::sec::none};
    if (metrics_at) {
      auto steering = page_steering_key(sys, links.key_file, opts.log);
      auto started =
        steering ? serve_chief_metrics(
          sys, *metrics_at, slot, request_timeout(opts.cfg),
          {*steering, tail, opts.cfg.cluster.metrics_dir}, opts.log)
                 : caf::expected<std::unique_ptr<chief_port>>{steering.error()};
      if (started)
        metrics = std::move(*started);
      else
        result = started.error();
    }
    if (!metrics_at || metrics)
      result = run_cluster(sys, std::move(opts), [&](const chief_actor& c) {
        slot->set(c);
        std::lock_guard<std::mutex> guard{mtx};
        chief = c;
        if (stop_wanted) // Ctrl-C came before the chief did
          caf::anon_send(chief, stop_atom_v, std::string{"Ctrl-C"});
      });
    slot->set({});
    if (metrics)
      metrics->close(result);
    metrics.reset();
    std::lock_guard<std::mutex> guard{mtx};
    summary = std::move(result);
    chief = nullptr;
    done = true;
    cv.notify_all();
  }};
  std::optional<py::error_already_set> interrupted, progress_failed;
  auto stop = [&](const char* why) {
    std::lock_guard<std::mutex> guard{mtx};
    stop_wanted = true;
    if (chief)
      caf::anon_send(chief, stop_atom_v, std::string{why});
  };
  for (;;) {
    std::deque<std::string> ready;
    bool finished = false;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> guard{mtx};
      cv.wait_for(guard, std::chrono::milliseconds(100),
                  [&] { return done || !records.empty(); });
      ready.swap(records);
      finished = done;
    }
    if (!ready.empty() && !deliver_progress(progress, ready, progress_failed))
      stop("the progress function's exception");
    if (finished)
      break;
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted.emplace(); // takes the pending KeyboardInterrupt
      stop("Ctrl-C");
    }
  }
  {
    py::gil_scoped_release release;
    runner.join();
  }
  if (interrupted)
    throw std::move(*interrupted);
  if (progress_failed)
    throw std::move(*progress_failed);
  if (!summary)
    raise(summary.error());
  return summary_dict(*summary, opts_evaluated);
}

/// Runs `serve` (a node's life, from its start to the end of the run) as
/// troupe-node runs it: SIGINT and SIGTERM are taken by a watcher thread
/// meanwhile (the first leaves the run, a second ends the process), and
/// the interpreter's thread gets its signal mask back after. Returns what
/// `serve` returned.
template <class Result>
Result
serve_as_node(const std::function<Result(troupe::stop_signals&)>& serve) {
  sigset_t before;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  std::optional<Result> result;
  {
    py::gil_scoped_release release;
    troupe::stop_signals signals{"python"};
    // The interpreter's threads and NumPy's BLAS pool came before it.
    signals.take_from_every_thread();
    result.emplace(serve(signals));
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return std::move(*result);
}

/// Runs node `node` of the cluster file `config_path` in this process:
/// its shards, and its workers calling `step`; on the chief's node, the
/// run itself, evaluated by `evaluate`. Returns the run's summary on the
/// chief's node, None on another node once the run succeeded or the node
/// left it; raises the class of the failure when the run failed, the
/// chief was lost, or the config or key is bad.
py::object run_node(const std::string& config_path, const std::string& node,
                    py::object step, py::object evaluate,
                    const std::string& key, bool insecure,
                    const std::string& metrics_listen, py::object resume,
                    bool fresh, int64_t epochs, int64_t max_steps,
                    py::object keys) {
  using namespace troupe;
  run_arguments args{std::move(resume), fresh, epochs, max_steps};
  auto [text, cfg] = external_run(config_path, step, "run_node()", args);
  auto& cl = cfg.cluster;
  if (!cl.distributed() || cl.node(node) == nullptr)
    raise(errc::invalid_config,
          config_path + ": no node \"" + node + "\" in /cluster/nodes"
            + (cl.distributed() ? " (the nodes are: " + cl.node_names() + ")"
                                : std::string{}));
  auto key_source = keys_of(std::move(keys), &cfg, "run_node()",
                            cl.node(node)->workers > 0);
  bool chief = node == cl.chief_node;
  if (!chief && !evaluate.is_none())
    raise(errc::invalid_config,
          "run_node(): evaluate runs on the chief's node (" + cl.chief_node
            + "), not on node " + node);
  if (!chief && !metrics_listen.empty())
    raise(errc::invalid_config,
          "run_node(): metrics_listen: the chief's node (" + cl.chief_node
            + ") serves the run's metrics, not node " + node);
  chief_process what;
  if (!metrics_listen.empty()) {
    auto at = parse_metrics_listen(metrics_listen);
    if (!at)
      raise(at.error());
    what.metrics_at = *at;
  }
  link_options links;
  links.key_file = key;
  links.insecure = insecure;
  auto guard = load_link_guard(links, &cl, node, key_use::make_if_missing);
  if (!guard)
    raise(guard.error());
  auto turn = std::make_shared<std::mutex>();
  what.config_path = config_path;
  what.config_text = std::move(text);
  what.words = python_words();
  what.evaluate = evaluator_of(std::move(evaluate), turn);
  bool evaluated = static_cast<bool>(what.evaluate);
  what.external = python::python_steps(
    std::make_shared<python::held_object>(std::move(step)), turn, key_source);
  if (!chief) {
    auto failure = serve_as_node<caf::error>([&](stop_signals& signals) {
      return run_member_node(cfg, node, *guard, links, signals,
                             std::move(what.external));
    });
    if (failure)
      raise(failure);
    return py::none();
  }
  auto summary = serve_as_node<caf::expected<cluster_summary>>(
    [&](stop_signals& signals) {
      return run_chief_node(std::move(cfg), std::move(what), *guard, links,
                            signals);
    });
  if (!summary)
    raise(summary.error());
  return summary_dict(*summary, evaluated);
}

/// Adds `workers` workers calling `step` to the running cluster whose
/// chief listens at `chief_address`, as troupe-node --join does, until the
/// run ends or the node leaves it; raises the class of the failure when
/// the run failed or the chief was lost.
void join(const std::string& chief_address, py::object step, int workers,
          const std::string& name, const std::string& key, bool insecure,
          double timeout, py::object keys) {
  using namespace troupe;
  check_step(step);
  auto key_source = keys_of(std::move(keys), nullptr, "join()");
  if (workers < 1)
    throw py::value_error("join(): workers must be at least 1");
  join_options opts;
  opts.chief_address = chief_address;
  opts.workers = workers;
  opts.name = name;
  opts.timeout_s = timeout;
  opts.links.key_file = key;
  opts.links.insecure = insecure;
  opts.external = python::python_steps(
    std::make_shared<python::held_object>(std::move(step)),
    std::make_shared<std::mutex>(), key_source);
  auto failure = serve_as_node<caf::error>(
    [&](stop_signals& signals) { return run_joining_node(opts, signals); });
  if (failure)
    raise(failure);
}

} // namespace

PYBIND11_MODULE(_troupe, m) {
  m.doc() = "troupe's parameter servers with Python workers";
  m.attr("__version__") = TROUPE_VERSION;
  troupe::python::add_error_classes(m);
  m.def("train", &train, py::arg("config"), py::arg("step"), py::kw_only(),
        py::arg("evaluate") = py::none(), py::arg("quiet") = false,
        py::arg("resume") = py::none(), py::arg("fresh") = false,
        py::arg("epochs") = -1, py::arg("max_steps") = -1,
        py::arg("listen") = "", py::arg("metrics_listen") = "",
        py::arg("key") = "", py::arg("progress") = py::none(),
        py::arg("keys") = py::none(),
        "Trains the run of `config` (model.type \"external\") in this "
        "process, each worker calling step(params, samples) -> "
        "(gradients, loss_sum[, hits]) and the chief evaluate(params) -> "
        "(accuracy, loss[, count]); returns the run's summary. fresh=True "
        "starts over (the checkpoint folder's earlier runs set aside), "
        "resume=True continues the newest checkpoint (the default when "
        "there is one); epochs= and max_steps= override the config; "
        "listen='HOST:PORT' opens troupe-shell's port (key= the cluster "
        "key file), metrics_listen='HOST:PORT' Prometheus'; "
        "progress(record) is called with each progress, worker and "
        "evaluation record (a dict) on the calling thread. A model with "
        "embedding tables (/model/tables) names each sample's keys in "
        "keys={table: array of one row per sample} (or keys(samples) -> "
        "such a dict), and its step is step(params, samples, rows).");
  m.def("run_node", &run_node, py::arg("config"), py::arg("node"),
        py::arg("step"), py::kw_only(), py::arg("evaluate") = py::none(),
        py::arg("key") = "", py::arg("insecure") = false,
        py::arg("metrics_listen") = "", py::arg("resume") = py::none(),
        py::arg("fresh") = false, py::arg("epochs") = -1,
        py::arg("max_steps") = -1, py::arg("keys") = py::none(),
        "Runs node `node` of the cluster file `config` in this process, "
        "its workers calling step(params, samples) and, on the chief's "
        "node, the run's evaluations calling evaluate(params). Returns "
        "the run's summary on the chief's node (None on another, once the "
        "run succeeded or the node left it); raises troupe.Error's class "
        "of the failure otherwise (its exit_code: troupe-node's).");
  m.def(
    "epoch_order",
    [](int64_t samples, uint64_t seed, int64_t epoch) {
      if (samples < 1 || samples > int64_t{1} << 32)
        throw py::value_error("epoch_order(): samples must be 1..2^32, got "
                              + std::to_string(samples));
      if (epoch < 0)
        throw py::value_error("epoch_order(): epoch must be >= 0, got "
                              + std::to_string(epoch));
      auto order = troupe::epoch_order(static_cast<size_t>(samples), seed,
                                       epoch);
      return py::array_t<uint32_t>(static_cast<py::ssize_t>(order.size()),
                                   order.data());
    },
    py::arg("samples"), py::arg("seed"), py::arg("epoch"),
    "The order in which a run with training.seed `seed` leases its "
    "`samples` samples in epoch `epoch` (from 0), as a uint32 NumPy array: "
    "its batches are consecutive runs of batch_size of it. To train a "
    "reference (PyTorch alone) on the batches troupe trains.");
  m.def("join", &join, py::arg("chief"), py::arg("step"), py::kw_only(),
        py::arg("workers") = 1, py::arg("name") = "", py::arg("key") = "",
        py::arg("insecure") = false, py::arg("timeout") = 10.0,
        py::arg("keys") = py::none(),
        "Adds `workers` workers calling step(params, samples) to the "
        "running cluster whose chief listens at `chief` (HOST:PORT), as "
        "troupe-node --join does, until the run ends or this node leaves "
        "it; raises troupe.Error's class of the failure otherwise.");
}

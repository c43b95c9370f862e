// troupe._troupe: troupe's runtime inside a Python process. train() runs
// a whole cluster in this process (the embedded mode: chief, feeder,
// shards and workers as actors), whose workers run the user's step
// function for a model declared with model.type "external". The Python
// side of the package is python/troupe/__init__.py.
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <pybind11/pybind11.h>

#include "actors/chief/chief.hpp"
#include "actors/protocol/system_config.hpp"
#include "python/python_step.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace py = pybind11;

namespace {

[[noreturn]] void raise(const caf::error& err) {
  throw std::runtime_error(troupe::describe(err));
}

py::dict train(const std::string& config_path, py::object step, bool quiet) {
  using namespace troupe;
  if (!PyCallable_Check(step.ptr()))
    throw py::type_error("step must be callable: step(params, samples) -> "
                         "(gradients, loss_sum)");
  auto text = read_config_text(config_path);
  if (!text)
    raise(text.error());
  auto cfg = parse_run_config(*text, config_path);
  if (!cfg)
    raise(cfg.error());
  if (cfg->model.type != model_config::kind::external)
    throw std::runtime_error(config_path
                             + ": /model/type: train() runs a "
                               "model whose step is a Python function "
                               "(\"external\"); troupe-node trains \""
                             + std::string{to_string(cfg->model.type)}
                             + "\" itself");
  if (cfg->cluster.distributed())
    throw std::runtime_error(config_path
                             + ": /cluster/nodes: train() runs "
                               "the whole cluster in this process; leave "
                               "nodes out");
  auto data = load_datasets(cfg->data);
  if (!data)
    raise(data.error());
  chief_options opts;
  opts.cfg = *cfg;
  opts.config_text = std::move(*text);
  opts.data = std::make_shared<const train_test>(std::move(*data));
  opts.log = quiet ? nullptr : &std::cout;
  opts.external = python::python_steps(
    std::make_shared<python::held_object>(std::move(step)));
  // The run goes on a thread of its own; this one, the interpreter's,
  // waits without the GIL (the workers take it for each step) and wakes
  // every 100 ms to let Python see a signal: Ctrl-C stops the run as
  // troupe-node's first SIGINT does (the chief winds it down, with a
  // final checkpoint when the run has a folder), then raises here.
  caf::expected<cluster_summary> summary{caf::sec::none};
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false;
  chief_actor chief;
  std::thread runner{[&] {
    caf::actor_system_config sys_cfg;
    init_config(sys_cfg);
    caf::actor_system sys{sys_cfg};
    auto result = run_cluster(sys, std::move(opts), [&](const chief_actor& c) {
      std::lock_guard<std::mutex> guard{mtx};
      chief = c;
    });
    std::lock_guard<std::mutex> guard{mtx};
    summary = std::move(result);
    chief = nullptr;
    done = true;
    cv.notify_all();
  }};
  std::optional<py::error_already_set> interrupted;
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> guard{mtx};
      if (cv.wait_for(guard, std::chrono::milliseconds(100),
                      [&] { return done; }))
        break;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted.emplace(); // takes the pending KeyboardInterrupt
      std::lock_guard<std::mutex> guard{mtx};
      if (chief)
        caf::anon_send(chief, stop_atom_v, std::string{"Ctrl-C"});
    }
  }
  {
    py::gil_scoped_release release;
    runner.join();
  }
  if (interrupted)
    throw std::move(*interrupted);
  if (!summary)
    raise(summary.error());
  py::dict out;
  out["steps"] = summary->steps;
  out["epochs"] = summary->epochs;
  out["seconds"] = summary->seconds;
  out["examples_per_sec"] = summary->examples_per_sec;
  out["restarts"] = summary->restarts;
  return out;
}

} // namespace

PYBIND11_MODULE(_troupe, m) {
  m.doc() = "troupe's parameter servers with Python workers";
  m.def("train", &train, py::arg("config"), py::arg("step"), py::kw_only(),
        py::arg("quiet") = false,
        "Trains the run of `config` (model.type \"external\") in this "
        "process, each worker calling step(params, samples) -> "
        "(gradients, loss_sum[, hits]); returns the run's summary.");
}

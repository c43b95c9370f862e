#include "python/python_errors.hpp"

#include <utility>

#include <Python.h>

#include "apps/exit_codes.hpp"

namespace py = pybind11;

namespace troupe::python {

namespace {

/// A class of the module: its name and what it stands for.
struct error_class {
  const char* name;
  const char* doc;
};

// Made once, when the module is imported, and kept for the process's
// life, as the module itself is.
PyObject* base_class = nullptr;
PyObject* config_class = nullptr;
PyObject* data_class = nullptr;
PyObject* auth_class = nullptr;
PyObject* step_class = nullptr;
PyObject* training_class = nullptr;
PyObject* cluster_class = nullptr;

PyObject* make_class(py::module_& m, const error_class& what, PyObject* base) {
  auto qualified = std::string{"troupe."} + what.name;
  auto* type = PyErr_NewExceptionWithDoc(qualified.c_str(), what.doc, base,
                                         nullptr);
  if (type == nullptr)
    throw py::error_already_set();
  m.add_object(what.name, py::handle{type});
  return type;
}

/// The class for errors of kind `code`.
PyObject* class_of(errc code) {
  switch (code) {
    case errc::invalid_config:
    case errc::invalid_argument:
    case errc::layout_mismatch: return config_class;
    case errc::file_not_found:
    case errc::io_error:
    case errc::bad_format:
    case errc::wrong_size:
    case errc::data_changed: return data_class;
    case errc::unauthorized: return auth_class;
    case errc::bad_step: return step_class;
    case errc::non_finite: return training_class;
    default: return cluster_class;
  }
}

[[noreturn]] void raise_as(PyObject* type, const std::string& code,
                           int exit_code, const std::string& what) {
  py::object error = py::reinterpret_borrow<py::object>(type)(what);
  error.attr("code") = code;
  error.attr("exit_code") = exit_code;
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

} // namespace

void add_error_classes(py::module_& m) {
  base_class = make_class(
    m,
    {"Error", "Every failure of a troupe run. `code`: the kind's name "
              "(e.g. \"invalid_config\"); `exit_code`: troupe-node's exit "
              "code for it (2 bad input, 1 a failure while running)."},
    PyExc_RuntimeError);
  config_class = make_class(
    m,
    {"ConfigError", "The run config, the cluster file or an argument is "
                    "wrong, or a file does not fit the model it declares."},
    base_class);
  data_class = make_class(
    m,
    {"DataError", "A file the run reads or writes (dataset, parameters, "
                  "checkpoint) is missing, malformed, changed during the "
                  "run, or could not be written."},
    base_class);
  auth_class = make_class(
    m,
    {"AuthError", "A peer did not prove the cluster key, or the key or "
                  "certificates could not be used."},
    base_class);
  step_class = make_class(
    m,
    {"StepError", "The step function returned what its contract refuses "
                  "(a gradient of the wrong name, shape or dtype), or the "
                  "evaluate function failed: a failure every restart would "
                  "repeat."},
    base_class);
  training_class = make_class(
    m,
    {"TrainingError", "Training itself failed: the loss or a parameter "
                      "turned NaN or infinite."},
    base_class);
  cluster_class = make_class(
    m,
    {"ClusterError", "The cluster failed while running: a node could not "
                     "be reached or was lost, workers failed faster than "
                     "they may be restarted, or the run was stopped "
                     "before it began."},
    base_class);
}

void raise(const caf::error& err) {
  bool ours = err.category() == caf::atom("troupe");
  auto code = ours ? static_cast<errc>(err.code()) : errc::actor_down;
  raise_as(class_of(code), ours ? to_string(code) : "caf", exit_code(err),
           describe(err));
}

void raise(errc code, const std::string& what) {
  raise_as(class_of(code), to_string(code), exit_code(make_error(code, what)),
           what);
}

} // namespace troupe::python

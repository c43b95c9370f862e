// A training step in Python: the external_step (models/external_step.hpp)
// of a worker in a Python process. The worker actor, on a thread of its
// own, takes the GIL, hands the user's function the pulled parameters as
// read-only NumPy views of the received blocks (a tensor the shard split
// cuts through is gathered first) and the lease's sample indices, and
// copies the gradients it returns into the buffer the worker pushes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "models/external_step.hpp"

namespace troupe::python {

/// A Python object that C++ may copy and destroy without the GIL: the
/// object itself is let go of with the GIL held (caf-notes: a py::object
/// copied into an actor without the GIL corrupts its reference count).
class held_object {
public:
  explicit held_object(pybind11::object obj); ///< with the GIL held
  ~held_object();
  held_object(const held_object&) = delete;
  held_object& operator=(const held_object&) = delete;

  const pybind11::object& get() const { return obj_; } ///< with the GIL held

private:
  pybind11::object obj_;
};

/// What lets the Python calls of one process (steps, evaluations) run
/// one at a time.
using call_turn = std::shared_ptr<std::mutex>;

/// Where a step's keys of embedding tables come from: the user's `keys=`,
/// a dict of table name -> integer array of one row per training sample
/// (N or N x width keys, -1 for none), read without the GIL, so that a
/// batch's keys are known while another step holds it; or a function
/// keys(samples) -> such a dict for the batch's samples alone.
class key_source {
public:
  /// From the user's `keys` (with the GIL held): a dict's arrays are
  /// checked and kept as contiguous int64 copies. std::invalid_argument
  /// (a ValueError for the caller) names a value that is no integer array.
  explicit key_source(pybind11::object keys);

  /// Each table's keys for `samples` into tables[i].keys and .width;
  /// errc::bad_step names the table the keys lack, or that they name a
  /// table the model has not.
  caf::error fill(const std::vector<uint32_t>& samples,
                  std::vector<table_rows>& tables) const;

  /// The names of the tables it has keys for (a dict's; none for a
  /// function, which says with each batch).
  std::vector<std::string> names() const;

  /// Rows per table of a dict (its arrays' first dimension).
  size_t rows(const std::string& name) const;

private:
  struct array {
    std::string name;
    std::shared_ptr<held_object> keep;
    const int64_t* data = nullptr;
    size_t rows = 0, width = 0;
  };
  std::vector<array> arrays_;
  std::shared_ptr<held_object> fn_; ///< or the function
};

/// Makes each worker's step around the user's function `fn`:
/// fn(params: dict[str, numpy.ndarray], samples: numpy.ndarray[int64])
///   -> (gradients: dict[str, array], loss_sum[, hits])
/// where an array is a float32 NumPy array or a torch tensor of the
/// tensor's shape. With embedding tables (`keys` set) it is
/// fn(params, samples, rows), rows a dict of table name -> troupe.Rows
/// (the batch's keys, their distinct keys, where each key is among them,
/// and their rows as a writable float32 array), and the gradients name
/// each table too: a (distinct keys, dim) array, or one of (samples,
/// width, dim) per key that troupe sums per distinct key. The workers of
/// a process call `fn` one at a time, so one model object serves them
/// all (a user's torch model is not safe to run from two threads); their
/// pulls and pushes still overlap the calls.
external_step_factory python_steps(std::shared_ptr<held_object> fn,
                                   call_turn turn,
                                   std::shared_ptr<const key_source> keys);

/// The chief's evaluation around the user's function `fn`:
/// fn(params: dict[str, numpy.ndarray]) -> (accuracy, loss[, count]),
/// on the user's own test set. It takes its turn with the steps of this
/// process (`turn`, the same model object).
external_evaluator python_evaluator(std::shared_ptr<held_object> fn,
                                    call_turn turn);

} // namespace troupe::python

// A training step in Python: the external_step (models/external_step.hpp)
// of a worker in a Python process. The worker actor, on a thread of its
// own, takes the GIL, hands the user's function the pulled parameters as
// read-only NumPy views of the received blocks (a tensor the shard split
// cuts through is gathered first) and the lease's sample indices, and
// copies the gradients it returns into the buffer the worker pushes.
#pragma once

#include <memory>
#include <mutex>

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

/// Makes each worker's step around the user's function `fn`:
/// fn(params: dict[str, numpy.ndarray], samples: numpy.ndarray[int64])
///   -> (gradients: dict[str, array], loss_sum[, hits])
/// where an array is a float32 NumPy array or a torch tensor of the
/// tensor's shape. The workers of a process call `fn` one at a time, so
/// one model object serves them all (a user's torch model is not safe to
/// run from two threads); their pulls and pushes still overlap the calls.
external_step_factory python_steps(std::shared_ptr<held_object> fn,
                                   call_turn turn);

/// The chief's evaluation around the user's function `fn`:
/// fn(params: dict[str, numpy.ndarray]) -> (accuracy, loss[, count]),
/// on the user's own test set. It takes its turn with the steps of this
/// process (`turn`, the same model object).
external_evaluator python_evaluator(std::shared_ptr<held_object> fn,
                                    call_turn turn);

} // namespace troupe::python

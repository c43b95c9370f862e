// The exceptions the Python module raises for troupe's errors: one class
// per kind of failure under troupe.Error (a RuntimeError), so a script can
// tell a bad config from a lost cluster without reading the message, and
// each carries the errc name (`code`) and troupe-node's exit code for the
// same failure (`exit_code`).
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include "caf/error.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::python {

/// Makes the classes in module `m` (troupe._troupe; troupe re-exports them).
void add_error_classes(pybind11::module_& m);

/// Raises the class of `err`'s kind with describe(err) as its message.
/// Both raise() need the GIL.
[[noreturn]] void raise(const caf::error& err);

/// Raises the class of kind `code` with `what` as its message.
[[noreturn]] void raise(errc code, const std::string& what);

} // namespace troupe::python

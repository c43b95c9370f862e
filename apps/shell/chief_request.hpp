// A shell command sent to the chief as its typed request, with the answer
// rendered as troupe-shell prints it. troupe-shell and the steering of the
// chief's page (apps/launch/page_steering.hpp) both go through here, so a
// command means the same and says the same from either.
#pragma once

#include <functional>
#include <string>

#include "actors/protocol/chief_protocol.hpp"
#include "apps/shell/shell_command.hpp"
#include "caf/actor_system.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// The rendered answer (raw_json: the chief's JSON as is), or why there
/// is none.
using chief_answer = std::function<void(caf::expected<std::string>)>;

/// Sends `c` to `chief` (reached at `where`, for messages) and calls
/// `done` once, on an actor's thread, with the answer. The request goes
/// out from an actor that also monitors the chief: a request to a chief
/// whose process died gets no error until its timeout (a proxy does not
/// fail fast), while the monitor says so at once, in plain words. A chief
/// silent for `patience` is reported as frozen, overloaded or cut off.
/// `help` is answered here, without the chief.
void request_chief(caf::actor_system& sys, const chief_actor& chief,
                   const std::string& where, const shell_command& c,
                   bool raw_json, caf::timespan patience, chief_answer done);

/// Whether `c` changes the run (pause, set lr, kill, ...) rather than
/// reading a view of it.
bool changes_the_run(const shell_command& c);

} // namespace troupe

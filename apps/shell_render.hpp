// How troupe-shell prints the chief's JSON replies for a person: tables for
// lists of actors and nodes, "key: value" lines for the rest.
#pragma once

#include <string>

namespace troupe {

/// Renders the reply `json_text` to command `command` ("status", ...).
std::string render_reply(const std::string& command,
                         const std::string& json_text);

} // namespace troupe

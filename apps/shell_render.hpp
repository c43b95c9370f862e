// How troupe-shell prints the chief's JSON replies for a person: tables for
// lists of actors and nodes, "key: value" lines for the rest.
#pragma once

#include <string>
#include <utility>

namespace troupe {

/// Renders the reply `json_text` to command `command` ("status", ...).
std::string render_reply(const std::string& command,
                         const std::string& json_text);

/// The run id and config digest in a reply to "inspect chief"; empty
/// strings when it names none.
std::pair<std::string, std::string> run_of_reply(const std::string& json_text);

} // namespace troupe

// How troupe-shell prints the chief's typed answers: as JSON (--json, the
// same shape scripts and tests read), or for a person as tables for lists
// of actors and nodes and "key: value" lines for the rest.
#pragma once

#include <string>
#include <vector>

#include "actors/protocol/shell_protocol.hpp"
#include "apps/shell/shell_command.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// What a command answered from the cluster view prints (help, status,
/// nodes, workers, shards, inspect). errc::invalid_argument for an
/// inspect of an actor the view lacks ("no shard 7 (shards: 0-1)").
caf::expected<std::string> render_view(const shell_command& c,
                                       const cluster_view& v, bool raw_json);

/// What the steering commands print once the chief has answered.
std::string render_added(const std::vector<int32_t>& ids,
                         const std::string& node, bool raw_json);
std::string render_killed(const actor_ref& target, bool raw_json);
std::string render_checkpoint(const std::string& path, bool raw_json);
std::string render_export(const std::string& text, bool raw_json);
/// add-shard and drain: what moved, as the chief says it.
std::string render_moved(const std::string& command, const std::string& text,
                         bool raw_json);
std::string render_tuned(tune_key key, double value, bool raw_json);
std::string render_paused(bool paused, bool raw_json);
std::string render_stopping(bool raw_json);

} // namespace troupe

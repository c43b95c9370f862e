// A long list of actors or nodes for a person: past a screenful the shell
// prints how many of each role are in each state, every worker or shard
// not running and every node not up, then the chief, the feeder and the
// first of the others, so that
// `status` of a run with thousands of workers stays a screen long and
// shows what needs looking at. `status all` (and `nodes all`, `workers
// all`) lists every one; --json always does, for scripts.
#pragma once

#include <cstddef>
#include <string>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>
#pragma GCC diagnostic pop

namespace troupe {

/// Rows a table lists before it is summarised.
constexpr size_t shell_table_rows = 40;

struct summarised_rows {
  nlohmann::json rows; ///< the rows to list
  std::string line;    ///< what was left out and why; "" when nothing was
};

/// `rows` (objects with a "state") as a person's table of `command`
/// ("status", "nodes", "workers") lists them: all of them when they are
/// `most` or fewer, otherwise the unusual ones first and then the usual
/// ones in their order, `most` in all, after a line of counts by state.
summarised_rows summarise_rows(const nlohmann::json& rows,
                               const std::string& command,
                               size_t most = shell_table_rows);

} // namespace troupe

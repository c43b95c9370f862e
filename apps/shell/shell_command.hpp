// troupe-shell's command language: the line a person types, parsed into
// what the chief's typed requests take (actors/protocol/shell_protocol.hpp).
// The chief never sees text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/protocol/shell_protocol.hpp"
#include "caf/expected.hpp"

namespace troupe {

struct shell_command {
  enum class verb : uint8_t {
    help,
    status,
    nodes,
    workers,
    shards,
    inspect,
    add_worker,
    kill,
    checkpoint,
    export_tables,
    tune,
    pause,
    resume,
    stop,
    add_shard,
    drain
  };
  verb what = verb::help;
  std::string word;  ///< the command as typed ("add-worker")
  actor_ref target;  ///< inspect, kill, drain
  int32_t count = 1; ///< add-worker: how many
  std::string node;  ///< add-worker: where ("": the least loaded node);
                     ///< add-shard: where
  tune_key key = tune_key::lr; ///< set
  double value = 0;            ///< set
  bool all = false; ///< status, nodes, workers: list every row, however many
};

/// The longest command line.
constexpr size_t max_shell_line = 4096;

/// Parses one command line. errc::invalid_argument names what is wrong
/// and how the command is used.
caf::expected<shell_command> parse_shell_command(const std::string& line);

/// The command words, for completion.
const std::vector<std::string>& shell_command_words();

/// What `help` prints.
extern const char* const shell_help;

} // namespace troupe

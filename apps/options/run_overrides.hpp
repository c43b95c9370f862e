// The flags that override a run config's common settings, shared by
// troupe-node and troupe-train. Most are written into the config's JSON
// before it is read (apply_settings), so the reader checks them as it
// checks the file, and the chief hands the same text to the nodes that
// join; the checkpoint flags, which only the chief acts on, are checked
// against the config read (apply_checkpoint_flags); a
// path given on the command line is read from the working directory, as
// a shell user expects, and goes in absolute.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "caf/error.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

struct run_overrides {
  std::string name;           ///< /name
  std::string checkpoint_dir; ///< /training/checkpoint/dir
  int64_t checkpoint_every = -1;
  double lr = 0;
  int batch_size = 0;
  std::optional<uint64_t> seed;
  int64_t log_every = 0;
  int64_t eval_every = -1;
  bool resume = false; ///< continue the newest compatible checkpoint
  bool fresh = false;  ///< start over, setting earlier runs' files aside

  /// The JSON settings these flags make.
  std::vector<config_setting> settings() const;
};

/// Adds --name (with `name_help`), --lr, --batch-size, --seed,
/// --log-every, --eval-every, --checkpoint-dir, --checkpoint-every,
/// --resume and --fresh.
void add_run_overrides(CLI::App& app, run_overrides& o,
                       const std::string& name_help);

/// --resume, --fresh and --checkpoint-every on a read config (only the
/// chief acts on them); errc::invalid_config when the run keeps no
/// checkpoints.
caf::error apply_checkpoint_flags(run_config& cfg, const run_overrides& o);

/// A config file as the flags change it.
struct flagged_config {
  /// Its text with the flags' settings and "base_dir" in it: what a chief
  /// hands to nodes that join.
  std::string text;
  run_config cfg;
};

/// Reads the config at `path` with `o`'s settings made, its relative
/// paths read from its folder, and the checkpoint flags applied.
caf::expected<flagged_config> read_flagged_config(const std::string& path,
                                                  const run_overrides& o);

} // namespace troupe

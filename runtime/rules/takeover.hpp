// Whether a chief that takes over a lost chief's run may keep the live
// shards' values instead of rewinding every shard to the newest
// checkpoint: only when it can prove that no step is lost or doubled.
//
// The proof rests on the shards' applied logs (runtime/params/param_block):
// each shard names the batches it applied since the checkpoint's version.
// When every shard of the run is alive and each log reaches back to that
// version, the shards hold the checkpoint plus their logged batches, each
// applied once. The batches every shard names are done: the feeder goes
// on from the checkpoint's position with them done (batch_plan::restore).
// A batch only some shards name (a push that reached some and not others
// before its worker stopped) comes again: the shards that applied it drop
// it as a duplicate, the others apply it, so each shard still applies
// every batch once and no step is lost. Anything else (a shard that died
// with its chief, a log that starts later, a mode without logs) and the
// shards are restored from the checkpoint, losing the steps since.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// What a live shard applied since a version (the shard's answer to a
/// chief that takes its run over).
struct shard_history {
  int32_t shard = 0;
  int64_t version = 0;          ///< the shard's version now
  int64_t since = 0;            ///< the version asked about
  bool complete = false;        ///< the log reaches back to `since`
  std::vector<int64_t> batches; ///< applied after `since`, ascending
  uint64_t size = 0;            ///< the floats of its slice
};

struct takeover_verdict {
  bool keep_live = false;    ///< the live shards' values are kept
  std::string why_not;       ///< when not: the reason, for the log
  std::vector<int64_t> done; ///< when kept: batches done since, ascending
  /// When kept: batches some shards applied and others not, ascending:
  /// they come again first (batch_plan::restore's `again`).
  std::vector<int64_t> again;
  int64_t newest_version = -1; ///< the most updates a live shard applied
};

/// Judges the live shards of a run of `shards` shards against a
/// checkpoint (or the initial values) at shard version `since`. `live`
/// holds the answers of the shards that survived, in any order.
takeover_verdict judge_takeover(size_t shards, int64_t since,
                                const std::vector<shard_history>& live);

} // namespace troupe

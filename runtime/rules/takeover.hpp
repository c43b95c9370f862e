// Whether a chief that takes over a lost chief's run may keep the live
// shards' values instead of rewinding every shard to the newest
// checkpoint: only when it can prove that no step is lost or doubled.
//
// The proof rests on the shards' applied logs (runtime/params/param_block):
// each shard names the batches it applied since the checkpoint's version. When
// every shard of the run is alive, each log reaches back to that version,
// and all name the same batches, then the shards hold exactly the
// checkpoint plus those batches, each applied once everywhere. The feeder
// goes on from the checkpoint's position with those batches done
// (batch_plan::restore); every other batch is trained, once. Anything
// else (a shard that died with its chief, a log that starts later, a push
// that reached some shards and not others, a mode without logs) and the
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
  bool keep_live = false;      ///< the live shards' values are kept
  std::string why_not;         ///< when not: the reason, for the log
  std::vector<int64_t> done;   ///< when kept: batches done since, ascending
  int64_t newest_version = -1; ///< the most updates a live shard applied
};

/// Judges the live shards of a run of `shards` shards against a
/// checkpoint (or the initial values) at shard version `since`. `live`
/// holds the answers of the shards that survived, in any order.
takeover_verdict judge_takeover(size_t shards, int64_t since,
                                const std::vector<shard_history>& live);

} // namespace troupe

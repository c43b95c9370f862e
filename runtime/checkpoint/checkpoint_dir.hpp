// The checkpoints of a folder and which of them a run may load. A
// checkpoint records the run that wrote it ("run_id") and the digest of its
// training config ("config_digest", runtime/config/run_identity.hpp):
// - a shard recovery loads only its own run's checkpoints;
// - a resume loads the newest checkpoint of the same config and layout (a
//   checkpoint written before run ids existed counts if its layout fits),
//   and continues that run (its run id); the same config leaves the
//   cluster's placement out (resume_identity), so a run resumes on another
//   number of shards;
// - a run that starts over (--fresh) first moves the folder's checkpoints
//   of other runs into a folder of their own inside it, rather than
//   mixing its files with theirs or deleting them;
// - a run keeps its newest `keep` checkpoints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/config/run_identity.hpp"

namespace troupe {

/// The run a checkpoint belongs to.
struct run_stamp {
  std::string run_id;
  identity_map identity; ///< training_identity of the config
  std::string digest;    ///< identity_digest of it
  /// identity_digest of resume_identity(identity): what a resume matches.
  std::string resume_digest;

  run_stamp() = default;
  run_stamp(std::string id, identity_map m)
    : run_id(std::move(id)), identity(std::move(m)),
      digest(identity_digest(identity)),
      resume_digest(identity_digest(resume_identity(identity))) {}
};

/// Writes `stamp` into the checkpoint's metadata ("run_id",
/// "config_digest", "resume_digest", and "config": the identity's lines,
/// so that a refusal can name the keys that differ).
void stamp_checkpoint(checkpoint& ckpt, const run_stamp& stamp);

struct checkpoint_file {
  std::string path;
  int64_t step = 0;
};

/// Regular files named ckpt-<step>.safetensors in `dir`, highest step
/// first; anything else (a folder, a FIFO, "ckpt-1x.safetensors") is not a
/// checkpoint.
std::vector<checkpoint_file> list_checkpoints(const std::string& dir);

/// Which checkpoints a run may load.
enum class checkpoint_pick {
  this_run,  ///< same run id (a recovery)
  compatible ///< same resume digest (a resume; a file written before
             ///< resume digests: the same config digest)
};

struct loaded_checkpoint {
  std::string path;
  checkpoint ckpt;
};

/// How the user of a program says "start over", "train further" and "a
/// folder of its own", for the hints that name the way out: the command
/// line's flags, or the Python module's arguments.
struct restart_words {
  std::string fresh = "--fresh";
  std::string further = "--epochs or --max-steps";
  std::string own_folder = "--checkpoint-dir";
};

/// The newest checkpoint in `dir` that `stamp` may load by `pick` and
/// whose layout is `layout`. None when the folder holds no checkpoint;
/// when it holds some but none fits, errc::layout_mismatch naming each
/// file passed over and why, and the way out in `words`.
caf::expected<std::optional<loaded_checkpoint>>
load_newest(const std::string& dir, const run_stamp& stamp,
            checkpoint_pick pick, const param_layout& layout,
            const restart_words& words = {});

/// For a run that starts from scratch: moves every checkpoint in `dir` of
/// a run other than `stamp`'s (with its embedding tables) into
/// `dir`/set-aside-<stamp's run id>/. Returns that folder, or "" when
/// there was nothing to move; errc::io_error names a file that could not
/// be moved (the ones before it are moved).
caf::expected<std::string> set_aside_checkpoints(const std::string& dir,
                                                 const run_stamp& stamp);

/// Deletes the checkpoints of `stamp`'s run in `dir` beyond the newest
/// `keep` (0: keeps all); returns how many it deleted.
size_t prune_checkpoints(const std::string& dir, const run_stamp& stamp,
                         int keep);

} // namespace troupe

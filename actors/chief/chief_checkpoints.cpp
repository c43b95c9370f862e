// Checkpoints during a run: the feeder paused until every lease is
// acked, every shard's state taken at that one step, the tables' files
// written first (a model with tables), then the dense file, assembled by
// runtime/checkpoint/checkpoint_assembly.hpp; the feeder resumes.
#include <filesystem>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_assembly.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"

namespace troupe::chief_ops {

namespace {

/// The dense checkpoint file of step `step`.
std::string checkpoint_path(chief_self self, int64_t step) {
  return self->state.opts.cfg.training.checkpoint.dir + "/ckpt-"
         + std::to_string(step) + ".safetensors";
}

} // namespace

caf::expected<checkpoint>
dense_checkpoint_of(chief_self self, const feeder_position& from,
                    std::vector<shard_state_msg>& parts) {
  auto& s = self->state;
  std::vector<shard_slice> slices;
  for (auto& p : parts)
    slices.push_back(shard_slice{&p.values, &p.slots});
  auto assembled = assemble_checkpoint(
    from.step, s.eval.layout, s.shards.ranges, slices, parts[0].slot_names);
  if (!assembled)
    return assembled.error();
  auto& ckpt = *assembled;
  ckpt.metadata["optimizer"] = to_string(s.opts.cfg.training.optimizer.type);
  ckpt.metadata["model"] = s.eval.summary;
  ckpt.metadata["mode"] = to_string(s.opts.cfg.cluster.consistency);
  ckpt.metadata["shard_version"] = std::to_string(parts[0].version);
  if (!s.eval.parameters_digest.empty())
    ckpt.metadata["parameters_digest"] = s.eval.parameters_digest;
  if (!from.plan.empty()) // replicated, sharded: each worker's place
    ckpt.metadata["feeder_plan"] = from.plan;
  follow_to_checkpoint(self, ckpt);
  stamp_checkpoint(ckpt, stamp_of(self));
  return assembled;
}

namespace {

/// Writes the shards' states as one checkpoint file at feeder position
/// `from`; returns the error of the write.
caf::error write_shards(chief_self self, const feeder_position& from,
                        std::vector<shard_state_msg>& parts) {
  auto& s = self->state;
  auto position = from.step;
  auto assembled = dense_checkpoint_of(self, from, parts);
  if (!assembled)
    return assembled.error();
  auto& ckpt = *assembled;
  auto& dir = s.opts.cfg.training.checkpoint.dir;
  std::error_code ec; // a failure shows in the write's own error
  std::filesystem::create_directories(dir, ec);
  auto path = checkpoint_path(self, position);
  if (has_tables(self)) // written already, beside this file
    ckpt.metadata["tables"] = tables_metadata(table_paths(self, path));
  if (auto err = write_checkpoint(path, ckpt))
    return err;
  s.checkpoints.last = path;
  s.checkpoints.last_step = position;
  s.checkpoints.last_written = now_seconds();
  s.checkpoints.last_took = s.checkpoints.last_written - s.checkpoints.began;
  // How long training stood still for it, and what a table run wrote
  // beside the dense file: what an operator sizes checkpoint intervals by.
  std::string took = fmt("%.1f s", now_seconds() - s.checkpoints.began);
  if (has_tables(self)) {
    double size = 0;
    for (auto& table : table_paths(self, path)) {
      std::error_code size_ec;
      auto bytes = std::filesystem::file_size(table, size_ec);
      if (!size_ec)
        size += static_cast<double>(bytes);
    }
    took += size >= 1e9 ? fmt(", tables %.2f GB", size / 1e9)
                        : fmt(", tables %.1f MB", size / 1e6);
  }
  say(self, fmt("step %lld: checkpoint %s (%s)",
                static_cast<long long>(position), path.c_str(), took.c_str()));
  prune_checkpoints(dir, stamp_of(self), s.opts.cfg.training.checkpoint.keep);
  return {};
}

/// Writes the dense file of the checkpoint at `position` from the shards'
/// `parts`, lets the shards forget what it holds, resumes the feeder.
void write_checkpoint_files(chief_self self, const feeder_position& position,
                            std::vector<shard_state_msg>& parts,
                            std::function<void()> finished,
                            std::function<void()> then) {
  if (auto err = write_shards(self, position, parts))
    return fail_run(self, std::move(err));
  // The file holds these versions now: the shards' applied logs need
  // reach back no further (runtime/rules/takeover.hpp).
  for (size_t i = 0; i < parts.size(); ++i)
    self->send(self->state.shards.handles()[i], forget_atom_v,
               parts[i].version);
  if (!self->state.progress.user_paused())
    self->send(self->state.shards.feeder, resume_atom_v);
  finished();
  then();
}

} // namespace

/// Pauses the feeder until every lease is acked, snapshots every shard at
/// that one step, writes the file, resumes.
void checkpoint_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  // One at a time, and not while an export holds the feeder.
  if (st.checkpoints.taking || st.exports.taking || st.recovery.recovering()) {
    auto again = [=] { checkpoint_now(self, then); };
    if (st.checkpoints.taking || st.exports.taking)
      st.checkpoints.waiters.push_back(again);
    else
      st.recovery.when_over(again);
    return;
  }
  st.checkpoints.taking = true;
  st.checkpoints.began = now_seconds();
  auto finished = [=] {
    auto& s = self->state;
    s.checkpoints.taking = false;
    s.checkpoints.wake_waiters();
  };
  // A shard lost meanwhile: the recovery resumes the feeder; this
  // checkpoint is taken again afterwards.
  auto lost = [=] {
    finished();
    when_recovered(self, [=] { checkpoint_now(self, then); });
  };
  auto gen = st.recovery.generation();
  self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](feeder_position& position) {
        if (self->state.recovery.generation() != gen
            || self->state.recovery.recovering())
          return lost();
        ask_all_shards<shard_state_msg>(
          self, [=](size_t i) { return ask_shard(self, i, snapshot_atom_v); },
          [=](std::vector<shard_state_msg>& gathered) {
            auto parts = std::make_shared<std::vector<shard_state_msg>>(
              std::move(gathered));
            if (!has_tables(self))
              return write_checkpoint_files(self, position, *parts, finished,
                                            then);
            // The tables first: the dense file names them, and a run
            // resumes from a dense file only.
            auto& dir = self->state.opts.cfg.training.checkpoint.dir;
            std::error_code ec; // a failure shows in the write's own error
            std::filesystem::create_directories(dir, ec);
            write_tables(
              self, checkpoint_path(self, position.step),
              [=](caf::error err) {
                if (err)
                  return fail_run(self, std::move(err));
                write_checkpoint_files(self, position, *parts, finished, then);
              },
              lost);
          },
          lost);
      },
      [=](caf::error& err) { fail_run(self, std::move(err)); });
}

} // namespace troupe::chief_ops

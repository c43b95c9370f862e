// When the chief evaluates, checkpoints and logs progress, as a plain
// class over step counts (steps: batches trained by all workers together,
// reported a few at a time, so a due point is "crossed", not "hit").
#pragma once

#include <cstdint>

namespace troupe {

class run_schedule {
public:
  /// `eval_every` 0: once per epoch (`per_epoch` steps); `checkpoint_every`
  /// 0: never by steps; `log_every` >= 1.
  run_schedule(int64_t per_epoch, int64_t eval_every, int64_t checkpoint_every,
               int64_t log_every);

  /// Continues a run resumed at `step`: the next evaluation at the next
  /// multiple of its interval, the next checkpoint one interval after the
  /// newest one, at `checkpointed` (-1: at `step`). A chief that takes a
  /// run over keeping the steps its shards trained since the checkpoint
  /// owes a checkpoint that much sooner: counted from its own start, a
  /// run whose chief fails more often than the interval would never
  /// write one, and its shards' applied logs would grow without bound.
  void resume_at(int64_t step, int64_t checkpointed = -1);

  /// Whether an evaluation is due at `steps`; if so the next one moves
  /// past `steps` (several crossed at once count once).
  bool take_eval(int64_t steps);

  /// The same for checkpoints.
  bool take_checkpoint(int64_t steps);

  /// The last multiple of the log interval that going from `before` to
  /// `after` steps crosses (the step a progress line names); 0 when it
  /// crosses none.
  int64_t log_step(int64_t before, int64_t after) const;

  int64_t eval_interval() const { return eval_every_; }
  int64_t next_eval() const { return next_eval_; }
  int64_t next_checkpoint() const { return next_checkpoint_; }

private:
  int64_t eval_every_, checkpoint_every_, log_every_;
  int64_t next_eval_, next_checkpoint_;
};

} // namespace troupe

#include "runtime/rules/run_schedule.hpp"

#include <algorithm>

namespace troupe {

run_schedule::run_schedule(int64_t per_epoch, int64_t eval_every,
                           int64_t checkpoint_every, int64_t log_every)
  : eval_every_(eval_every > 0 ? eval_every : std::max<int64_t>(1, per_epoch)),
    checkpoint_every_(std::max<int64_t>(0, checkpoint_every)),
    log_every_(std::max<int64_t>(1, log_every)), next_eval_(eval_every_),
    next_checkpoint_(checkpoint_every_) {}

void run_schedule::resume_at(int64_t step, int64_t checkpointed) {
  next_eval_ = step + (eval_every_ - step % eval_every_);
  if (checkpoint_every_ > 0)
    next_checkpoint_ = (checkpointed >= 0 ? checkpointed : step)
                       + checkpoint_every_;
}

bool run_schedule::take_eval(int64_t steps) {
  if (steps < next_eval_)
    return false;
  while (next_eval_ <= steps)
    next_eval_ += eval_every_;
  return true;
}

bool run_schedule::take_checkpoint(int64_t steps) {
  if (checkpoint_every_ <= 0 || steps < next_checkpoint_)
    return false;
  while (next_checkpoint_ <= steps)
    next_checkpoint_ += checkpoint_every_;
  return true;
}

int64_t run_schedule::log_step(int64_t before, int64_t after) const {
  return before / log_every_ == after / log_every_
           ? 0
           : after / log_every_ * log_every_;
}

} // namespace troupe

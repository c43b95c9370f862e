// Shard recoveries and moves as the chief keeps them: whether one is under
// way, its generation (a reply asked for before it is recognisably
// stale), the workers it stopped, the wait for lost shards' nodes, the
// work that waits for it to end, and what they cost. chief_recovery.cpp
// recovers, chief_reshard.cpp moves; chief.cpp ends the wait for lost
// nodes when its timer fires.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

namespace troupe {

class recovery_state {
public:
  /// Workers are stopped on purpose and the shards replaced or moved.
  bool recovering() const { return recovering_; }
  /// Counts each recovery and move: a reply to a request made at another
  /// generation comes from shards that were replaced since.
  int64_t generation() const { return generation_; }
  /// Whether something asked at generation `gen` still holds.
  bool stale(int64_t gen) const { return recovering_ || generation_ != gen; }

  /// A shard was lost: a recovery begins.
  void begin_recovery() {
    begin();
    ++recoveries_;
  }
  /// Shards are added or drained: a move begins.
  void begin_move() { begin(); }
  /// A move ended after leasing paused `seconds`.
  void move_done(double seconds) {
    ++moves_;
    move_seconds_ += seconds;
  }
  /// The recovery or move ended.
  void end() { recovering_ = false; }
  /// Keeps `f` to run once the recovery under way ends (take_waiting).
  void when_over(std::function<void()> f) { after_.push_back(std::move(f)); }
  /// What waited for the recovery, to run now that it ended.
  std::vector<std::function<void()>> take_waiting() {
    auto later = std::move(after_);
    after_.clear();
    return later;
  }

  /// Worker `id` was stopped for the recovery.
  void stopping(int32_t id) { stopped_.insert(id); }
  /// Worker `id` is down: true when the recovery stopped it.
  bool stopped(int32_t id) { return stopped_.erase(id) > 0; }
  bool all_stopped() const { return stopped_.empty(); }

  /// The recovery waits for the nodes of lost shards: true when it
  /// begins to (the log says so once, and the timer starts).
  bool wait_for_shard_nodes() {
    bool first = !waiting_for_nodes_;
    waiting_for_nodes_ = true;
    return first;
  }
  /// The timer of the wait fired.
  void shard_wait_expired() { wait_over_ = true; }
  bool shard_wait_over() const { return wait_over_; }
  bool waiting_for_shard_nodes() const { return waiting_for_nodes_; }
  /// The recovery goes on without waiting longer.
  void end_shard_wait() { waiting_for_nodes_ = wait_over_ = false; }

  /// Steps trained and lost with a shard (restored from a checkpoint).
  void lose_steps(int64_t n) { lost_steps_ += n; }
  /// A lost shard's replica took over with no step lost.
  void count_takeover() { ++takeovers_; }

  int recoveries() const { return recoveries_; }
  int takeovers() const { return takeovers_; }
  int64_t lost_steps() const { return lost_steps_; }
  int moves() const { return moves_; }
  double move_seconds() const { return move_seconds_; }

private:
  void begin() {
    recovering_ = true;
    ++generation_;
  }

  bool recovering_ = false;
  int64_t generation_ = 0;
  std::set<int32_t> stopped_;
  bool waiting_for_nodes_ = false, wait_over_ = false;
  int recoveries_ = 0;
  int64_t lost_steps_ = 0;
  int takeovers_ = 0;
  int moves_ = 0;
  double move_seconds_ = 0;
  std::vector<std::function<void()>> after_;
};

} // namespace troupe

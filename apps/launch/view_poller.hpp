// The chief's cluster view for the metrics port's page and its /api
// views, kept fresh by a thread of its own while someone looks, so that no
// request waits on the chief: each is answered at once from the latest
// view, at most `interval` plus one answer of the chief's old. When nobody
// has asked for `linger`, the thread sleeps until someone does: a run that
// nobody watches pays nothing for the page.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/protocol/shell_protocol.hpp"
#include "apps/launch/chief_metrics.hpp"
#include "caf/actor_system.hpp"
#include "runtime/base/process_usage.hpp"

namespace troupe {

class view_poller {
public:
  struct snapshot {
    bool answered = false; ///< false: `error` says why there is no view
    cluster_view view;
    process_usage own; ///< this process (the chief's), when it was taken
    std::chrono::system_clock::time_point taken;
    std::string error;
  };

  view_poller(
    caf::actor_system& sys, std::shared_ptr<chief_slot> slot,
    caf::timespan timeout,
    std::chrono::milliseconds interval = std::chrono::milliseconds{500},
    std::chrono::seconds linger = std::chrono::seconds{10});
  ~view_poller(); ///< waits for a question to the chief under way

  /// The latest snapshot, and notes that someone looks. The first call
  /// waits up to `first_wait` for the first answer; null if none came.
  std::shared_ptr<const snapshot>
  latest(std::chrono::milliseconds first_wait = std::chrono::milliseconds{500});

  /// How many times the chief has been asked (for the tests: none while
  /// nobody looks).
  size_t asked() const;

  /// The run is over: its last view is kept as its final one, with
  /// `outcome` ("done", "failed") and `error`, and `summary`'s figures
  /// when it has them (null: failed); the chief is not asked again.
  void finish(const std::string& outcome, const std::string& error,
              const cluster_summary* summary);

  /// After finish: if someone looked within `linger`, waits until the
  /// final view has been read `reads` times (a page reads three views a
  /// poll) or `most` has passed, so that a page that watches shows how
  /// the run ended. Returns at once when nobody watches.
  void wait_for_watchers(std::chrono::milliseconds most, size_t reads = 3);

  view_poller(const view_poller&) = delete;
  view_poller& operator=(const view_poller&) = delete;

private:
  void run();
  snapshot ask_chief();

  caf::actor_system& sys_;
  std::shared_ptr<chief_slot> slot_;
  caf::timespan timeout_;
  std::chrono::milliseconds interval_;
  std::chrono::seconds linger_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool final_ = false;     ///< finish() was called
  size_t final_reads_ = 0; ///< latest() calls since
  std::chrono::steady_clock::time_point looked_at_{};
  std::shared_ptr<const snapshot> latest_;
  size_t asked_ = 0;
  std::thread thread_;
};

} // namespace troupe

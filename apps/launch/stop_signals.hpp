// SIGINT and SIGTERM as requests, not as deaths: the first asks the
// process to end cleanly (the chief: finish the steps in flight, evaluate,
// checkpoint, summarise; a member node: leave the run), a second one ends
// it at once.
//
// Signals are taken by sigwait() on a thread of their own, not by a
// handler: what the first signal does (a CAF message) is not
// async-signal-safe. For that, SIGINT and SIGTERM must be blocked in every
// other thread, so the watcher is made before the actor system starts its
// threads, which inherit the blocked mask.
#pragma once

#include <atomic>
#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace troupe {

class stop_signals {
public:
  /// Blocks SIGINT and SIGTERM in this thread (and so in every thread it
  /// starts from now on) and starts the watcher. `program` names the
  /// process in the line printed on the second signal.
  explicit stop_signals(std::string program);

  /// Unblocks nothing: the process is about to end (or, in a process
  /// that goes on, its caller restores its signal mask). The handlers
  /// take_from_every_thread replaced come back.
  ~stop_signals();

  /// For a process with threads started before this object, which do not
  /// block SIGINT and SIGTERM (a Python interpreter's, its BLAS pool's):
  /// while this object lives, handlers on both signals send each one on
  /// to the watcher, whichever thread the kernel gave it to.
  void take_from_every_thread();

  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

  /// What the first signal does, on the watcher's thread; it gets the
  /// signal's name ("SIGINT", "SIGTERM"). While none is set (before the
  /// run starts, after it ended, or after on_first(nullptr)), every signal
  /// exits at once: nothing could stop cleanly then.
  void on_first(std::function<void(const std::string&)> f);

private:
  void watch();

  std::string program_;
  std::atomic<bool> closing_{false};
  std::atomic<int> first_{0};
  std::mutex mutex_; ///< guards first_action_
  std::function<void(const std::string&)> first_action_;
  std::thread thread_;
  bool forwarding_ = false;
  struct sigaction previous_[2]; ///< SIGINT's and SIGTERM's, when forwarding
};

/// "SIGINT", "SIGTERM" or "signal N".
std::string signal_name(int signo);

} // namespace troupe

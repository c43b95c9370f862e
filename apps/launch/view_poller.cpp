#include "apps/launch/view_poller.hpp"

#include <pthread.h>

#include "caf/scoped_actor.hpp"

namespace troupe {

using steady = std::chrono::steady_clock;

view_poller::view_poller(caf::actor_system& sys,
                         std::shared_ptr<chief_slot> slot,
                         caf::timespan timeout,
                         std::chrono::milliseconds interval,
                         std::chrono::seconds linger)
  : sys_(sys), slot_(std::move(slot)), timeout_(timeout), interval_(interval),
    linger_(linger), thread_([this] { run(); }) {
  // Named, so that top -H and the page's benchmark see what it costs.
  ::pthread_setname_np(thread_.native_handle(), "troupe-view");
}

view_poller::~view_poller() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<const view_poller::snapshot>
view_poller::latest(std::chrono::milliseconds first_wait) {
  std::unique_lock<std::mutex> lock{mutex_};
  auto was_idle = steady::now() - looked_at_ > linger_;
  looked_at_ = steady::now();
  if (final_) {
    ++final_reads_;
    wake_.notify_all(); // wait_for_watchers counts them
    return latest_;
  }
  if (was_idle)
    wake_.notify_all();
  if (!latest_)
    wake_.wait_for(lock, first_wait, [this] { return latest_ != nullptr; });
  return latest_;
}

void view_poller::finish(const std::string& outcome, const std::string& error,
                         const cluster_summary* summary) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto last = std::make_shared<snapshot>();
  if (latest_ && latest_->answered)
    *last = *latest_;
  last->answered = true;
  auto& run = last->view.run;
  run.phase = "ended";
  run.paused = run.recovering = run.stopping = false;
  run.eta_seconds = -1;
  run.outcome = outcome;
  run.error = error;
  if (summary != nullptr) {
    run.steps = summary->steps;
    run.epoch = summary->epochs;
    run.seconds = summary->seconds;
    run.examples_per_sec = summary->examples_per_sec;
    run.test_accuracy = summary->test_accuracy;
  }
  // Every node and worker as last seen: the processes may be gone.
  last->own = own_process_usage();
  last->taken = std::chrono::system_clock::now();
  latest_ = std::move(last);
  final_ = true;
  final_reads_ = 0;
}

void view_poller::wait_for_watchers(std::chrono::milliseconds most,
                                    size_t reads) {
  std::unique_lock<std::mutex> lock{mutex_};
  if (steady::now() - looked_at_ > linger_)
    return; // nobody watches
  wake_.wait_for(lock, most, [&] { return final_reads_ >= reads; });
}

size_t view_poller::asked() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return asked_;
}

view_poller::snapshot view_poller::ask_chief() {
  snapshot s;
  auto chief = slot_->get();
  if (!chief) {
    s.error = "the run has not started or is over";
  } else {
    caf::scoped_actor self{sys_};
    self->request(chief, timeout_, stats_atom_v)
      .receive(
        [&](cluster_view& v) {
          s.view = std::move(v);
          s.answered = true;
        },
        [&](caf::error& err) {
          s.error = "the chief did not answer: " + to_string(err);
        });
  }
  s.own = own_process_usage();
  s.taken = std::chrono::system_clock::now();
  return s;
}

void view_poller::run() {
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    // Asleep until someone looks (or looked within `linger`).
    wake_.wait(lock, [this] {
      return stopping_ || steady::now() - looked_at_ <= linger_;
    });
    if (stopping_)
      return;
    if (final_) { // the run is over: nothing to ask
      wake_.wait(lock, [this] { return stopping_; });
      return;
    }
    ++asked_;
    lock.unlock();
    auto fresh = std::make_shared<const snapshot>(ask_chief());
    lock.lock();
    if (final_)
      continue; // finished while the chief was asked
    latest_ = std::move(fresh);
    wake_.notify_all(); // a first latest() waits for it
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
    if (stopping_)
      return;
  }
}

} // namespace troupe

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
  if (was_idle)
    wake_.notify_all();
  if (!latest_)
    wake_.wait_for(lock, first_wait, [this] { return latest_ != nullptr; });
  return latest_;
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
    ++asked_;
    lock.unlock();
    auto fresh = std::make_shared<const snapshot>(ask_chief());
    lock.lock();
    latest_ = std::move(fresh);
    wake_.notify_all(); // a first latest() waits for it
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
    if (stopping_)
      return;
  }
}

} // namespace troupe

#include "apps/launch/stop_signals.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <unistd.h>

namespace troupe {

namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

/// One line on stderr and _exit: no destructor or atexit handler runs (the
/// actor system may be in any state), the code says which signal it was.
[[noreturn]] void exit_now(const std::string& program, int signo,
                           const char* why) {
  auto line = program + ": " + signal_name(signo) + why + ": exiting at once\n";
  (void)!::write(2, line.data(), line.size());
  ::_exit(128 + signo);
}

} // namespace

std::string signal_name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(signo);
  }
}

stop_signals::stop_signals(std::string program) : program_(std::move(program)) {
  auto set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread{[this] { watch(); }};
}

namespace {

/// The watcher that take_from_every_thread's handlers send signals to.
pthread_t forward_to;

void forward_signal(int signo) {
  pthread_kill(forward_to, signo); // async-signal-safe
}

} // namespace

void stop_signals::take_from_every_thread() {
  forward_to = thread_.native_handle();
  struct sigaction act {};
  act.sa_handler = forward_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  sigaction(SIGINT, &act, &previous_[0]);
  sigaction(SIGTERM, &act, &previous_[1]);
  forwarding_ = true;
}

stop_signals::~stop_signals() {
  if (forwarding_) {
    sigaction(SIGINT, &previous_[0], nullptr);
    sigaction(SIGTERM, &previous_[1], nullptr);
  }
  // The watcher sleeps in sigwait: a signal sent to that thread alone
  // wakes it, and closing_ tells it that this one is not the user's.
  closing_ = true;
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void stop_signals::on_first(std::function<void(const std::string&)> f) {
  std::lock_guard<std::mutex> guard{mutex_};
  first_action_ = std::move(f);
}

void stop_signals::watch() {
  auto set = stop_set();
  for (;;) {
    int signo = 0;
    if (sigwait(&set, &signo) != 0)
      continue;
    if (closing_)
      return;
    std::function<void(const std::string&)> act;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      act = first_action_;
    }
    int none = 0;
    if (!first_.compare_exchange_strong(none, signo))
      exit_now(program_, signo, " again");
    if (!act)
      exit_now(program_, signo, "");
    act(signal_name(signo));
  }
}

} // namespace troupe

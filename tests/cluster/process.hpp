// Real troupe processes for the multi-process tests: started in the
// background with their output in files, killed with SIGKILL as a crash
// would, waited for with a deadline. Also a free port on 127.0.0.1 and a
// poll of a log file.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <netinet/in.h>
#include <spawn.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace troupe::test {

inline std::string read_all(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, {}};
}

/// A port that was free a moment ago, below the kernel's ephemeral range
/// (32768-60999 here): a port from bind(0) comes from that range, and
/// before a node binds it the kernel may give it to some outgoing
/// connection of a test running beside this one. Candidates start at a
/// point picked by the process id, and no port is handed out twice.
inline uint16_t free_port() {
  static uint16_t next = static_cast<uint16_t>(20000
                                               + (::getpid() * 977) % 12000);
  for (int tries = 0; tries < 12000; ++tries) {
    uint16_t port = next;
    next = next + 1 >= 32000 ? 20000 : next + 1;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (ok)
      return port;
  }
  return 0;
}

/// A port on 127.0.0.1 that this test holds open (bound and listening)
/// until it goes, as another program would: 0 if it could not.
class held_port {
public:
  held_port() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0
        && ::listen(fd_, 1) == 0
        && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~held_port() { ::close(fd_); }
  held_port(const held_port&) = delete;
  held_port& operator=(const held_port&) = delete;

  uint16_t port() const { return port_; }

private:
  int fd_;
  uint16_t port_ = 0;
};

class process {
public:
  /// Starts build/apps/<app> with `args`; stdout and stderr go to
  /// <dir>/<name>.out and <dir>/<name>.err, stdin comes from `stdin_path`
  /// if given. A non-empty `prefix` runs the app under that command, e.g.
  /// {"/usr/sbin/ip", "netns", "exec", NS} to put it in a namespace; such
  /// a prefix execs the app in place, so the pid is still the app's.
  process(const temp_dir& dir, std::string name, const std::string& app,
          std::vector<std::string> args, const std::string& stdin_path = "",
          std::vector<std::string> prefix = {})
    : name_(name), out_(dir.file(name + ".out")),
      err_(dir.file(name + ".err")) {
    std::string exe = std::string{TROUPE_BINARY_DIR} + "/apps/" + app;
    std::vector<char*> argv;
    for (auto& p : prefix)
      argv.push_back(p.data());
    argv.push_back(exe.data());
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!stdin_path.empty())
      posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~process() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  process(const process&) = delete;
  process& operator=(const process&) = delete;

  /// The name it was started with (its output files' name).
  const std::string& name() const { return name_; }
  bool running() const { return pid_ > 0 && code_ == no_code; }
  pid_t pid() const { return pid_; }
  /// Whether the process has ended (a zombie not yet waited for counts),
  /// without reaping it.
  bool ended() const {
    if (pid_ <= 0 || code_ != no_code)
      return true;
    auto stat = read_all("/proc/" + std::to_string(pid_) + "/stat");
    auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size()
           || stat[close + 2] == 'Z';
  }
  /// How the process ended, without reaping it: "exit N", "signal N",
  /// or "running". A zombie's status stays readable for a later wait.
  std::string how_it_ended() const {
    if (pid_ <= 0)
      return "not started";
    if (code_ != no_code)
      return "exit " + std::to_string(code_);
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info,
                 WEXITED | WNOHANG | WNOWAIT)
          != 0
        || info.si_pid == 0)
      return "running";
    if (info.si_code == CLD_EXITED)
      return "exit " + std::to_string(info.si_status);
    return "signal " + std::to_string(info.si_status);
  }
  void kill9() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      code_ = -SIGKILL;
    }
  }
  /// Sends `signo` (SIGTERM, SIGINT, ...), as an operator or init would.
  void signal(int signo) {
    if (running())
      ::kill(pid_, signo);
  }
  /// Freezes the process (SIGSTOP), as a hang or a partition would.
  void freeze() {
    if (running())
      ::kill(pid_, SIGSTOP);
  }
  /// The exit code, or -1 after `timeout_s` (then the process is killed).
  int wait(double timeout_s) {
    auto end = std::chrono::steady_clock::now()
               + std::chrono::duration<double>(timeout_s);
    while (code_ == no_code && pid_ > 0) {
      int status = 0;
      auto r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        kill9();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return code_;
  }
  std::string out() const { return read_all(out_); }
  std::string err() const { return read_all(err_); }
  /// Waits until stdout holds `text`; false after `timeout_s`.
  bool wait_for_output(const std::string& text, double timeout_s) const {
    auto end = std::chrono::steady_clock::now()
               + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      if (out().find(text) != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  /// Waits until the chief's progress lines ("step N, epoch ...") reach
  /// `steps`; false after `timeout_s`.
  bool wait_for_step(long steps, double timeout_s) const {
    auto end = std::chrono::steady_clock::now()
               + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      auto text = out();
      for (size_t at = text.find("\nstep "); at != std::string::npos;
           at = text.find("\nstep ", at + 1))
        if (std::atol(text.c_str() + at + 6) >= steps)
          return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

private:
  static constexpr int no_code = -1000;
  pid_t pid_ = -1;
  int code_ = no_code;
  std::string name_, out_, err_;
};

} // namespace troupe::test

// A lab of Linux network namespaces for the multi-process tests: each node
// gets its own IP address on a private bridge, and no traffic or interface
// ever touches the host's own network namespace.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <fcntl.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

namespace troupe::test {

namespace netns_detail {

/// From the Debian package iproute2. A fixed path, not a PATH lookup, so a
/// test never runs some other `ip` as root.
constexpr const char* ip_binary = "/usr/sbin/ip";

struct run_result {
  int code = -1;      ///< exit code, -1 if it could not run or was killed
  std::string output; ///< stdout and stderr together, for error messages
};

/// Runs `argv` directly (no shell, so names need no quoting) and waits.
inline run_result run(std::vector<std::string> argv) {
  run_result r;
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  int fds[2];
  // Close-on-exec so that processes spawned by other test threads at the
  // same time do not inherit the pipe and keep it open.
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.output = std::string{"cannot run "} + argv[0];
    return r;
  }
  char buf[512];
  for (;;) {
    auto n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0)
      r.output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  while (!r.output.empty() && r.output.back() == '\n')
    r.output.pop_back();
  return r;
}

/// Runs `ip` with `args`; "" on success, else what failed and why.
inline std::string ip(std::vector<std::string> args) {
  args.insert(args.begin(), ip_binary);
  auto r = run(args);
  if (r.code == 0)
    return {};
  std::string cmd;
  for (auto& a : args)
    cmd += (cmd.empty() ? "" : " ") + a;
  return cmd + ": " + (r.output.empty() ? "failed" : r.output);
}

} // namespace netns_detail

/// N node namespaces, each with interface eth0 at 10.213.X.(i+1)/24, all
/// plugged into one bridge that lives in a further "switch" namespace.
/// Interfaces are created directly inside the namespaces (`ip -n`), so the
/// root namespace never holds them even for a moment, and their names
/// (eth0, p<i>, br0) cannot collide with anything outside the lab. There
/// is no default route anywhere: only the lab's own addresses are
/// reachable from inside.
///
/// Processes started inside the lab must end before the lab does (declare
/// the lab before them): deleting a namespace that still has a process
/// only removes its name, and the interfaces live on with the process.
class netns_lab {
public:
  /// The most nodes one /24 holds with .1 upward.
  static constexpr size_t max_nodes = 253;

  /// A lab whose namespaces are named "<prefix>-sw" and "<prefix>-n<i>".
  netns_lab(std::string prefix, size_t nodes) : prefix_(std::move(prefix)) {
    subnet_ = pick_subnet();
    build(nodes);
  }

  /// A lab with a prefix unique to this process and this lab.
  explicit netns_lab(size_t nodes) : netns_lab(unique_prefix(), nodes) {}

  ~netns_lab() {
    // Node namespaces first: deleting one removes its eth0 and with it
    // the peer end on the bridge. Deleting the switch then removes br0.
    for (auto it = made_.rbegin(); it != made_.rend(); ++it)
      netns_detail::ip({"netns", "del", *it});
  }

  netns_lab(const netns_lab&) = delete;
  netns_lab& operator=(const netns_lab&) = delete;

  /// "" when this machine can build a lab, else why not ("not root", "ip
  /// netns add failed: ..."). Probed once per process with a throwaway
  /// namespace holding a veth pair and a bridge, so tests can skip with
  /// the reason instead of failing.
  static std::string unavailable() {
    static const std::string reason = probe();
    return reason;
  }

  /// "tr<pid>x<k>": the pid keeps parallel test processes apart, k the
  /// labs of one process.
  static std::string unique_prefix() {
    return "tr" + std::to_string(::getpid()) + "x"
           + std::to_string(next_serial());
  }

  bool ok() const { return error_.empty(); }
  /// Why construction failed; everything it had made is already gone.
  std::string error() const { return error_; }

  size_t size() const { return nodes_; }
  /// The namespace of node i, for `ip netns exec`.
  std::string ns(size_t i) const { return prefix_ + "-n" + std::to_string(i); }
  /// The namespace holding the bridge.
  std::string switch_ns() const { return prefix_ + "-sw"; }
  /// The address of node i, without the /24.
  std::string ip(size_t i) const {
    return "10.213." + std::to_string(subnet_) + "." + std::to_string(i + 1);
  }
  /// The command prefix that runs a program inside node i's namespace.
  /// `ip netns exec` execs the program in place, so its pid is the pid
  /// that was spawned.
  std::vector<std::string> exec_prefix(size_t i) const {
    return {netns_detail::ip_binary, "netns", "exec", ns(i)};
  }

private:
  static int next_serial() {
    static std::atomic<int> serial{0};
    return serial++;
  }

  /// Third octet: from the pid so two test processes get different
  /// subnets, plus a per-process count so two labs of one process do too.
  /// The namespaces keep labs apart anyway; distinct subnets only make a
  /// stray cross-lab address fail loudly rather than reach the wrong node.
  static int pick_subnet() {
    static std::atomic<int> labs{0};
    return static_cast<int>((::getpid() * 7L + labs++) % 254) + 1;
  }

  static std::string probe() {
    if (::geteuid() != 0)
      return "not root";
    if (::access(netns_detail::ip_binary, X_OK) != 0)
      return std::string{"no "} + netns_detail::ip_binary
             + " (Debian package iproute2)";
    std::string name = "trprobe" + std::to_string(::getpid());
    if (auto e = netns_detail::ip({"netns", "add", name}); !e.empty())
      return "ip netns add failed: " + e;
    // "name" always spelled out: `ip link add a ...` reads "a" as
    // "address".
    std::string why;
    auto veth = netns_detail::ip({"-n", name, "link", "add", "name", "va",
                                  "type", "veth", "peer", "name", "vb"});
    auto bridge = veth.empty() ? netns_detail::ip(
                    {"-n", name, "link", "add", "name", "br", "type", "bridge"})
                               : std::string{};
    auto exec = veth.empty() && bridge.empty() ? netns_detail::ip(
                  {"netns", "exec", name, netns_detail::ip_binary, "link",
                   "set", "lo", "up"})
                                               : std::string{};
    if (!veth.empty())
      why = "veth pair failed: " + veth;
    else if (!bridge.empty())
      why = "bridge failed: " + bridge;
    else if (!exec.empty())
      why = "ip netns exec failed: " + exec;
    netns_detail::ip({"netns", "del", name});
    return why;
  }

  /// Adds namespace `name` and remembers it for the destructor at once,
  /// so a failure later in construction still removes it.
  bool add_ns(const std::string& name) {
    if (auto e = netns_detail::ip({"netns", "add", name}); !e.empty()) {
      error_ = e;
      return false;
    }
    made_.push_back(name);
    return step({"-n", name, "link", "set", "lo", "up"});
  }

  bool step(std::vector<std::string> args) {
    error_ = netns_detail::ip(std::move(args));
    return error_.empty();
  }

  void build(size_t nodes) {
    if (error_ = unavailable(); !error_.empty())
      return;
    if (nodes == 0 || nodes > max_nodes) {
      error_ = "a lab holds 1 to " + std::to_string(max_nodes) + " nodes";
      return;
    }
    auto sw = switch_ns();
    bool good = add_ns(sw)
                && step(
                  {"-n", sw, "link", "add", "name", "br0", "type", "bridge"})
                && step({"-n", sw, "link", "set", "br0", "up"});
    for (size_t i = 0; good && i < nodes; ++i) {
      auto node = ns(i);
      auto port = "p" + std::to_string(i);
      // Created in the switch namespace with its peer straight in the
      // node's: neither end ever appears in the root namespace.
      good = add_ns(node)
             && step({"-n", sw, "link", "add", "name", port, "type", "veth",
                      "peer", "name", "eth0", "netns", node})
             && step({"-n", sw, "link", "set", port, "master", "br0"})
             && step({"-n", sw, "link", "set", port, "up"})
             && step({"-n", node, "addr", "add", ip(i) + "/24", "dev", "eth0"})
             && step({"-n", node, "link", "set", "eth0", "up"});
    }
    if (!good) {
      for (auto it = made_.rbegin(); it != made_.rend(); ++it)
        netns_detail::ip({"netns", "del", *it});
      made_.clear();
      return;
    }
    nodes_ = nodes;
  }

  std::string prefix_;
  int subnet_ = 0;
  size_t nodes_ = 0;
  std::vector<std::string> made_; ///< namespaces to delete, in order made
  std::string error_;
};

} // namespace troupe::test

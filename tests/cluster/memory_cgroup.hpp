// A memory cgroup a test makes (as root, under cgroup v1's memory
// controller, which these machines mount) with a limit, for the processes
// it starts through prefix(): what a container or a Slurm job's cgroup
// does to a node. Its peak usage and OOM kills say whether they kept to it.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace troupe::test {

class memory_cgroup {
public:
  /// Makes <memory controller>/<this process's cgroup>/<name> with
  /// `limit_bytes`; unusable() then says why not, when it could not.
  memory_cgroup(const std::string& name, long long limit_bytes) {
    const std::string root = "/sys/fs/cgroup/memory";
    struct stat st;
    if (::geteuid() != 0) {
      why_ = "a memory cgroup is made as root";
      return;
    }
    if (::stat((root + "/memory.limit_in_bytes").c_str(), &st) != 0) {
      why_ = "no cgroup v1 memory controller at " + root;
      return;
    }
    std::string own;
    std::ifstream self{"/proc/self/cgroup"};
    for (std::string line; std::getline(self, line);) {
      auto at = line.find(":memory:");
      if (at != std::string::npos)
        own = line.substr(at + 8);
    }
    path_ = root + (own == "/" ? "" : own) + "/" + name + "-"
            + std::to_string(::getpid());
    if (::mkdir(path_.c_str(), 0755) != 0
        || !write("memory.limit_in_bytes", std::to_string(limit_bytes))) {
      why_ = "cannot make " + path_ + " with a limit";
      ::rmdir(path_.c_str());
      path_.clear();
    }
  }
  ~memory_cgroup() {
    if (path_.empty())
      return;
    // Processes still in it (a test that failed) go back to the parent,
    // which an empty cgroup's rmdir needs.
    std::ifstream still_in{path_ + "/cgroup.procs"};
    auto parent = path_.substr(0, path_.rfind('/'));
    for (std::string pid; std::getline(still_in, pid);)
      std::ofstream{parent + "/cgroup.procs"} << pid;
    ::rmdir(path_.c_str());
  }
  memory_cgroup(const memory_cgroup&) = delete;
  memory_cgroup& operator=(const memory_cgroup&) = delete;

  /// Why it could not be made; "" when it was.
  const std::string& unusable() const { return why_; }

  /// A process prefix (process.hpp) that moves the process into the
  /// cgroup, then execs the program in place.
  std::vector<std::string> prefix() const {
    return {"/bin/sh", "-c",
            "echo $$ > " + path_ + "/cgroup.procs && exec \"$0\" \"$@\""};
  }

  /// The most memory its processes held at once, page cache included.
  long long peak_bytes() const { return number("memory.max_usage_in_bytes"); }
  /// Processes the kernel killed for it ("oom_kill" of memory.oom_control).
  long long oom_kills() const {
    std::ifstream in{path_ + "/memory.oom_control"};
    std::string key;
    long long value = 0;
    while (in >> key >> value)
      if (key == "oom_kill")
        return value;
    return 0;
  }

private:
  bool write(const std::string& file, const std::string& text) const {
    std::ofstream out{path_ + "/" + file};
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }
  long long number(const std::string& file) const {
    std::ifstream in{path_ + "/" + file};
    long long v = -1;
    in >> v;
    return v;
  }

  std::string path_;
  std::string why_;
};

} // namespace troupe::test

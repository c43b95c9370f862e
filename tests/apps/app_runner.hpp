// Runs one of troupe's executables as a user would: a real process with
// its stdout and stderr captured in files, and its exit code.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

#include "test_util.hpp"

namespace troupe::test {

struct outcome {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, {}};
}

/// Runs build/apps/<app> with `args` (shell words), bounded by `timeout`;
/// in the folder `cwd` when one is given.
inline outcome run_app(const temp_dir& tmp, const std::string& app,
                       const std::string& args, int timeout_s = 120,
                       const std::string& cwd = "") {
  std::string cmd = (cwd.empty() ? std::string{} : "cd '" + cwd + "' && ")
                    + "timeout " + std::to_string(timeout_s) + " "
                    + std::string{TROUPE_BINARY_DIR} + "/apps/" + app + " "
                    + args + " >" + tmp.file("out") + " 2>" + tmp.file("err");
  int status = std::system(cmd.c_str());
  outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(tmp.file("out"));
  o.err = slurp(tmp.file("err"));
  return o;
}

} // namespace troupe::test

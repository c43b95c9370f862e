// A benchmark's server in a child process of its own, so that the bytes
// between the two cross the loopback as between two nodes.
#pragma once

#include <cstdint>
#include <iostream>

#include <sys/wait.h>
#include <unistd.h>

namespace troupe {

/// Runs `serve(ready_fd, stop_fd)` in a child process, which writes the
/// port it serves on to ready_fd and serves until stop_fd closes; then
/// `measure(port)` here, after which the child is stopped and waited for.
/// Returns measure's exit code; 1, naming `program` and `what` did not
/// start, when no port came.
template <class Serve, class Measure>
int with_forked_server(const char* program, const char* what, Serve serve,
                       Measure measure) {
  int ready[2], stop[2];
  if (::pipe(ready) != 0 || ::pipe(stop) != 0)
    return 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    ::close(stop[1]);
    return serve(ready[1], stop[0]);
  }
  ::close(ready[1]);
  ::close(stop[0]);
  uint16_t port = 0;
  if (::read(ready[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::cerr << program << ": error: " << what << " did not start"
              << std::endl;
    return 1;
  }
  int code = measure(port);
  ::close(stop[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return code;
}

} // namespace troupe

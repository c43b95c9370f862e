// A benchmark's server in a child process of its own, so that the bytes
// between the two cross the loopback as between two nodes.
#pragma once

#include <cstdint>
#include <iostream>

#include <sys/wait.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/protocol/shard_protocol.hpp"

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

/// The child's part for one shard on the data plane: serves `shard` (one
/// float of dense values and a table of rows of `dim` floats) at a free
/// port of 127.0.0.1, writes the port to ready_fd, and serves until
/// stop_fd closes; then the shard stops. 1 when no server started.
inline int serve_shard_until_stopped(caf::actor_system& sys, shard_actor shard,
                                     int dim, int ready_fd, int stop_fd) {
  auto data = data_server::start(sys, "127.0.0.1", 0);
  uint16_t port = data ? (*data)->port() : uint16_t{0};
  if (::write(ready_fd, &port, sizeof(port)) != sizeof(port) || port == 0)
    return 1;
  ::close(ready_fd);
  (*data)->serve(0, shard, 1, {dim});
  char byte;
  (void)::read(stop_fd, &byte, 1); // EOF: the parent is done
  (*data)->stop();
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace troupe

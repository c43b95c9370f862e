// Helpers for actors in several processes: the middleman settings every
// networked node uses, connecting with a deadline, and publishing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <string>

#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "runtime/config.hpp"

namespace troupe {

/// Loads the middleman and turns its heartbeats on: CAF 0.17 leaves them
/// off, and then a frozen or partitioned node is never noticed (a killed
/// one is, at once, from the closed socket).
void init_network(caf::actor_system_config& cfg, const cluster_config& c);

/// remote_actor with a deadline: CAF's own waits forever on a listener
/// that never speaks its protocol. Errors name host and port.
template <class Handle>
caf::expected<Handle> connect_to(caf::actor_system& sys,
                                 const std::string& host, uint16_t port,
                                 caf::timespan timeout) {
  caf::scoped_actor self{sys};
  caf::expected<Handle> result{caf::sec::cannot_connect_to_node};
  auto where = host + ":" + std::to_string(port);
  self
    ->request(sys.middleman().actor_handle(), timeout, caf::connect_atom::value,
              host, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr,
          const std::set<std::string>& ifs) {
        if (!ptr)
          result = caf::make_error(caf::sec::no_actor_published_at_port,
                                   "nothing published at " + where);
        else if (!sys.assignable<Handle>(ifs))
          result = caf::make_error(caf::sec::unexpected_actor_messaging_interface,
                                   where + " is not a troupe node of this "
                                           "kind (or of another version)");
        else
          result = caf::actor_cast<Handle>(std::move(ptr));
      },
      [&](caf::error& e) { result = std::move(e); });
  return result;
}

/// Tries connect_to every 200 ms until it works or `deadline_s` passes;
/// the last error names host and port.
template <class Handle>
caf::expected<Handle> connect_retrying(caf::actor_system& sys,
                                       const std::string& host, uint16_t port,
                                       double deadline_s) {
  using clock = std::chrono::steady_clock;
  auto end = clock::now() + std::chrono::duration<double>(deadline_s);
  for (;;) {
    auto left = std::chrono::duration_cast<caf::timespan>(end - clock::now());
    auto r = connect_to<Handle>(sys, host, port,
                                std::max(left, caf::timespan{1000000}));
    if (r || clock::now() >= end)
      return r;
    // Only "nothing listens yet" is worth another try.
    if (r.error() != caf::sec::cannot_connect_to_node)
      return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

/// The error for a failed publish, naming the address.
caf::error publish_error(const std::string& host, uint16_t port,
                         const caf::error& cause);

/// The address to listen on for a node's configured host: "localhost" is
/// 127.0.0.1 (not every address the name resolves to).
inline std::string bind_address(const std::string& host) {
  return host == "localhost" ? std::string{"127.0.0.1"} : host;
}

/// Publishes `handle` on host:port (reuse_addr, so that a restarted node
/// gets its port back at once); the error names the address.
template <class Handle>
caf::expected<uint16_t> publish_on(caf::actor_system& sys, Handle handle,
                                   const std::string& host, uint16_t port) {
  auto bind = bind_address(host);
  auto r = sys.middleman().publish(handle, port, bind.c_str(), true);
  if (!r)
    return publish_error(host, port, r.error());
  return *r;
}

/// The address of this host on the way to host:port (the source address
/// the kernel picks for a connection there, without sending anything):
/// what a node that does not listen on a configured address reports as
/// its own. The host name when that fails.
std::string local_address_toward(const std::string& host, uint16_t port);

/// "host:port" -> parts; the error names the bad text.
caf::expected<std::pair<std::string, uint16_t>>
parse_address(const std::string& text);

} // namespace troupe

// Connecting to a cluster's chief from another process (a member node, a
// joining node, the shell): retried until a deadline, with one error
// message for all of them.
#pragma once

#include <cstdio>
#include <string>

#include "actors/protocol.hpp"
#include "actors/remote.hpp"
#include "runtime/errc.hpp"

namespace troupe {

/// The chief published at host:port, tried every 200 ms for `timeout_s`.
/// The error (errc::node_unreachable) reads "cannot reach <who> within
/// <timeout_s> s: <cause>"; `who` defaults to "the chief at host:port".
/// `patient`: see connect_retrying (a chief that comes back).
inline caf::expected<chief_actor> reach_chief(caf::actor_system& sys,
                                              const std::string& host,
                                              uint16_t port, double timeout_s,
                                              std::string who = "",
                                              bool patient = false) {
  auto chief = connect_retrying<chief_actor>(sys, host, port, timeout_s,
                                             patient);
  if (chief)
    return chief;
  if (who.empty())
    who = "the chief at " + host + ":" + std::to_string(port);
  char within[48];
  std::snprintf(within, sizeof(within), " within %g s: ", timeout_s);
  auto why = describe(chief.error());
  // CAF's word for a peer that closed the connection before speaking
  // BASP: what a TLS listener does to a plaintext client.
  if (chief.error() == caf::sec::disconnect_during_handshake
      && !security_of(sys)->tls)
    why += " (the chief closed the connection: it may use TLS; give "
           "--tls-ca, --tls-cert and --tls-key)";
  return make_error(errc::node_unreachable, "cannot reach " + who + within
                                              + why);
}

} // namespace troupe

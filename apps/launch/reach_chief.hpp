// Connecting to a cluster's chief from another process (a member node, a
// joining node, the shell): retried until a deadline, with one error
// message for all of them.
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "actors/protocol/chief_protocol.hpp"
#include "actors/net/remote.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

/// When a node agent listens at host:port (an address of a cluster file
/// other than the chief's): "H:P is node NAME of a troupe cluster, not its
/// chief; the chief is at C". Nothing: something else listens there.
inline std::optional<std::string> node_listening_at(caf::actor_system& sys,
                                                    const std::string& host,
                                                    uint16_t port) {
  // The connection is open already (the first try got as far as the
  // interface), so a short deadline is plenty.
  auto agent = connect_to<node_agent_actor>(sys, host, port,
                                            std::chrono::seconds(3));
  if (!agent)
    return std::nullopt;
  std::optional<std::string> said;
  caf::scoped_actor self{sys};
  self->request(*agent, std::chrono::seconds(3), who_atom_v)
    .receive(
      [&](const std::string& node, const std::string& chief) {
        said = host + ":" + std::to_string(port) + " is node " + node
               + " of a troupe cluster, not its chief; "
               + (chief.empty() ? std::string{"it does not know where the "
                                              "chief is"}
                                : "the chief is at " + chief);
      },
      [](const caf::error&) {});
  return said;
}

/// The chief published at host:port, tried every 200 ms for `timeout_s`.
/// The error (errc::node_unreachable) reads "cannot reach <who> within
/// <timeout_s> s: <cause>"; `who` defaults to "the chief at host:port".
/// `patient`: see connect_retrying (a chief that comes back).
inline caf::expected<chief_actor>
reach_chief(caf::actor_system& sys, const std::string& host, uint16_t port,
            double timeout_s, std::string who = "", bool patient = false) {
  auto chief = connect_retrying<chief_actor>(sys, host, port, timeout_s,
                                             patient);
  if (chief)
    return chief;
  if (chief.error() == caf::sec::unexpected_actor_messaging_interface)
    if (auto node = node_listening_at(sys, host, port))
      return make_error(errc::node_unreachable, *node);
  if (who.empty())
    who = "the chief at " + host + ":" + std::to_string(port);
  char within[48];
  std::snprintf(within, sizeof(within), " within %g s: ", timeout_s);
  auto why = describe(chief.error());
  // CAF's word for a peer that closed the connection before speaking
  // BASP: what a keyed or TLS listener does to a client with --insecure.
  if (chief.error() == caf::sec::disconnect_during_handshake
      && !security_of(sys)->guard)
    why += " (the chief closed the connection: it wants the cluster key "
           "(run without --insecure; the key is in "
           + default_key_path()
           + ") or TLS (give --tls-ca, --tls-cert and --tls-key))";
  // Another key is bad input (exit 2), not a chief that may yet come.
  auto code = chief.error() == errc::unauthorized ? errc::unauthorized
                                                  : errc::node_unreachable;
  return make_error(code, "cannot reach " + who + within + why);
}

} // namespace troupe

// CAF's remoting (BASP) in plaintext, through a middleman actor whose
// connections start their silence clock when they are opened (see
// actors/link_clock.hpp): CAF's own middleman actor leaves it at the epoch,
// and a heartbeat tick before the peer's handshake then cuts the link.
// Listening (publish) is CAF's own.
#pragma once

#include "caf/actor_system.hpp"
#include "caf/io/middleman_actor.hpp"

namespace troupe {

/// Spawns a plaintext middleman actor for `sys` (which must have the
/// middleman loaded); use it where CAF's middleman().actor_handle() would
/// be used (publish, connect). A connect that TCP cannot finish within
/// middleman.connection-timeout fails with sec::cannot_connect_to_node.
caf::io::middleman_actor make_plain_middleman(caf::actor_system& sys);

} // namespace troupe

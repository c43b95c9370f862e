// CAF's remoting (BASP) behind troupe's front door: a middleman actor like
// CAF's own, whose connections have proven the cluster's key (or finished
// a mutual TLS handshake) before CAF sees them, and whose every read is
// checked by basp_check before CAF's parser gets it. `connect` runs the
// client side of the proof with a deadline; `open` listens behind a
// front_door and hands each proven connection to CAF's BASP broker as an
// accepted one. Bytes from a peer that proved nothing never reach BASP,
// whose parser trusts its input (a 32-byte header can crash CAF 0.17's,
// and a length field makes it allocate up to 4 GiB); a member's malformed
// header closes only its own connection.
//
// Its connections also start their silence clock when they are opened
// (actors/net/link_clock.hpp): CAF's own middleman actor leaves it at the
// epoch, and a heartbeat tick before the peer's handshake then cuts the
// link.
#pragma once

#include <memory>

#include "caf/actor_system.hpp"
#include "caf/io/middleman_actor.hpp"

#include "actors/net/link_guard.hpp"

namespace troupe {

/// Spawns the middleman actor of `sys` for links guarded by `guard`; use
/// it where CAF's middleman().actor_handle() would be used (publish,
/// connect).
caf::io::middleman_actor
make_guarded_middleman(caf::actor_system& sys,
                       std::shared_ptr<const link_guard> guard);

} // namespace troupe

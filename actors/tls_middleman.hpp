// CAF's remoting (BASP) over troupe's TLS: a middleman actor like the one
// CAF's OpenSSL module makes, whose connections are TLS sessions finished
// before CAF sees them. `connect` runs the client handshake with a
// deadline; `open` listens behind a tls_front_door and hands each
// authenticated connection to CAF's BASP broker as an accepted
// connection. Bytes from a peer without a certificate of the cluster's CA
// never reach BASP, whose parser trusts its input (a 32-byte header can
// crash CAF 0.17's, and a length field makes it allocate up to 4 GiB).
#pragma once

#include <memory>

#include "caf/actor_system.hpp"
#include "caf/io/middleman_actor.hpp"

#include "actors/tls.hpp"

namespace troupe {

/// Spawns the TLS middleman actor of `sys`; use it where CAF's
/// middleman().actor_handle() would be used (publish, connect).
caf::io::middleman_actor
make_tls_middleman(caf::actor_system& sys,
                   std::shared_ptr<const tls_context> tls);

} // namespace troupe

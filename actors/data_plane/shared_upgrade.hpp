// How a data-plane connection between two processes on one host moves
// from TCP to a shared-memory link (actors/data_plane/shared_link.hpp).
//
// The client's first frame offers it (shared_offer, with its boot id); the
// server answers on TCP (shared_answer): no (another host, or shared
// memory turned off), or the name of a Unix socket it listens on for this
// connection alone (in the abstract namespace: nothing on disk) and a
// random token. The client connects there and sends the token; the server
// sends the segment and its eventfds with SCM_RIGHTS; the client maps them
// and says yes or no in one byte. Only then do both sides switch; on any
// failure both stay on TCP, which is why the token travels on the TCP
// link: it is proven by the cluster key (or TLS) already, and the Unix
// socket, which any local process could reach, gives the segment only to
// the holder of the token. While it waits for the client, the server also
// watches the TCP connection: a client that fell back sends its next frame
// there.
#pragma once

#include <memory>
#include <string>

#include "caf/actor_system.hpp"
#include "caf/expected.hpp"
#include "caf/timespan.hpp"

#include "actors/data_plane/data_link.hpp"
#include "actors/net/link_socket.hpp"

namespace troupe {

/// Whether `sys` offers and accepts shared-memory links: yes unless its
/// config's "troupe.shared-memory" says no (init_network puts the
/// cluster file's "shared_memory" there).
bool shared_links_allowed(caf::actor_system& sys);

/// The client's side, on a new connection `tcp` before any other frame:
/// the shared link to use from now on, null to go on over `tcp`, or an
/// error when `tcp` broke (or the server answered nonsense). `note` says
/// why a shared link was not made, for the log.
caf::expected<std::shared_ptr<byte_link>>
offer_shared_link(link_socket& tcp, caf::timespan timeout, std::string& note);

/// The server's side, when a connection's first frame `offer` is a
/// shared_offer (`allowed`: whether this side may take it): reads the
/// rest of it, answers, and returns the shared
/// link to use from now on, null to go on over `tcp`, or an error when
/// `tcp` broke or the offer was malformed (the connection is to close).
caf::expected<std::shared_ptr<byte_link>>
answer_shared_link(link_socket& tcp, const data_frame& offer, bool allowed);

} // namespace troupe

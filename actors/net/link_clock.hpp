// Starts the silence clock of a connection this process opens to a peer's
// BASP broker (CAF's remoting), which CAF 0.17.6 leaves at the epoch.
//
// Why: the BASP broker cuts a link when it has heard nothing on it for
// middleman.connection-timeout, checking at every heartbeat tick. For a
// connection it accepts, the clock starts with the first bytes. For one it
// opens (remote_actor, our connect_to), basp_broker's connect handler makes
// the endpoint context with `ctx[hdl]`, so `last_seen` is a default
// time_point, i.e. the steady clock's epoch, until the server's handshake
// arrives. A tick that runs in between finds the link silent since boot and
// cuts it: the connect fails with sec::connection_timeout within
// milliseconds. That happens whenever the server's handshake takes longer
// than the gap to the next tick (a loaded host, a TLS handshake, a busy
// chief), and it made member nodes and shells give up on their chief.
#pragma once

namespace caf::io {
class scribe;
} // namespace caf::io

namespace troupe {

/// Call from a scribe's first configure_read: when the scribe belongs to
/// the BASP broker and its endpoint context still holds the epoch, sets
/// `last_seen` to now (the broker's clock), so the link gets its full
/// connection timeout to hear the peer's handshake. Runs on the broker's
/// thread (configure_read is called from the broker's connect handler,
/// right after it made the context). A no-op for accepted connections,
/// whose context does not exist yet, and for other brokers.
void start_link_clock(caf::io::scribe& s);

} // namespace troupe

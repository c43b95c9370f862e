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
#include "actors/net/link_guard.hpp"
#include "runtime/base/host_port.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

/// How the links of one actor system are secured: set once by
/// guard_links (or secure_links) after the system is made; until then (and
/// in tests that never call it) plaintext on loopback addresses only.
struct link_security {
  /// What every peer proves before its bytes are read: the cluster key or
  /// mutual TLS; null: nothing (--insecure, or never secured).
  std::shared_ptr<const link_guard> guard;
  bool insecure = false; ///< plaintext beyond loopback allowed (--insecure)
  /// The middleman actor of CAF's remoting, over TLS or in plaintext
  /// (see middleman_of); weak, so that this record may outlive its actor
  /// system (the registry of all systems lives until exit).
  caf::actor_addr middleman;

  /// Why this process may not listen on `host` for `what`, or none:
  /// without a guard only loopback addresses, unless --insecure.
  caf::error may_listen(const std::string& host, const std::string& what) const;

  /// "mutual TLS", "cluster key ... in PATH", "plaintext, loopback only"
  /// or "INSECURE: plaintext".
  std::string describe() const;
};

/// Guards every link `sys` makes from now on: CAF's remoting (publish_on,
/// connect_to) and the data plane admit only peers that prove what
/// `guard` asks for (null: nothing, as --insecure).
void guard_links(caf::actor_system& sys,
                 std::shared_ptr<const link_guard> guard, bool insecure);

/// guard_links with mutual TLS when `tls` is set, else nothing.
void secure_links(caf::actor_system& sys,
                  std::shared_ptr<const tls_context> tls, bool insecure);

/// The security of `sys` (never null).
std::shared_ptr<const link_security> security_of(caf::actor_system& sys);

/// The middleman actor that makes `sys`'s remote connections, behind its
/// guard (actors/net/guarded_middleman.hpp); for a system that guard_links
/// never saw, an open one made on first use. Not CAF's own: CAF's trusts
/// every byte, and its connects are cut by the first heartbeat tick that
/// comes before the peer's handshake (actors/net/link_clock.hpp).
caf::io::middleman_actor middleman_of(caf::actor_system& sys);

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
    ->request(middleman_of(sys), timeout, caf::connect_atom::value, host, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr,
          const std::set<std::string>& ifs) {
        if (!ptr)
          result = caf::make_error(caf::sec::no_actor_published_at_port,
                                   "nothing published at " + where);
        else if (!sys.assignable<Handle>(ifs))
          result = caf::make_error(
            caf::sec::unexpected_actor_messaging_interface,
            where
              + " is not a troupe node of this "
                "kind (or of another version)");
        else
          result = caf::actor_cast<Handle>(std::move(ptr));
      },
      [&](caf::error& e) { result = std::move(e); });
  return result;
}

/// Tries connect_to every 200 ms until it works or `deadline_s` passes;
/// the last error names host and port. Only "nothing listens yet" is
/// tried again, unless `patient`: then any failure is but a refused key
/// (errc::unauthorized: the peer holds another key, and will next time),
/// and each try gets at most 3 s (a peer coming back from a crash or a
/// freeze may close or stall the first handshakes).
template <class Handle>
caf::expected<Handle>
connect_retrying(caf::actor_system& sys, const std::string& host, uint16_t port,
                 double deadline_s, bool patient = false) {
  using clock = std::chrono::steady_clock;
  auto end = clock::now() + std::chrono::duration<double>(deadline_s);
  for (;;) {
    auto left = std::chrono::duration_cast<caf::timespan>(end - clock::now());
    if (patient)
      left = std::min(left, caf::timespan{std::chrono::seconds(3)});
    auto r = connect_to<Handle>(sys, host, port,
                                std::max(left, caf::timespan{1000000}));
    if (r || clock::now() >= end)
      return r;
    if (!patient && r.error() != caf::sec::cannot_connect_to_node)
      return r;
    if (r.error() == errc::unauthorized)
      return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

/// The error for a failed publish, naming the address: errc::invalid_config
/// (the address is the operator's input).
caf::error publish_error(const std::string& host, uint16_t port,
                         const caf::error& cause);

/// Publishes an actor with interface `sigs` on host:port through
/// middleman_of(sys); see publish_on.
caf::expected<uint16_t> publish_actor(caf::actor_system& sys,
                                      caf::strong_actor_ptr whom,
                                      std::set<std::string> sigs,
                                      const std::string& host, uint16_t port);

/// Publishes `handle` on host:port (reuse_addr, so that a restarted node
/// gets its port back at once), behind the links' guard; the error names
/// the address. Without a guard a non-loopback host is refused unless the
/// process runs --insecure.
template <class Handle>
caf::expected<uint16_t> publish_on(caf::actor_system& sys, Handle handle,
                                   const std::string& host, uint16_t port) {
  auto sigs = sys.message_types(handle);
  return publish_actor(sys, caf::actor_cast<caf::strong_actor_ptr>(handle),
                       std::move(sigs), host, port);
}

/// The address of this host on the way to host:port (the source address
/// the kernel picks for a connection there, without sending anything):
/// what a node that does not listen on a configured address reports as
/// its own. The host name when that fails.
std::string local_address_toward(const std::string& host, uint16_t port);

} // namespace troupe

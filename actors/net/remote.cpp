#include "actors/net/remote.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "actors/net/guarded_middleman.hpp"
#include "actors/net/sockets.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// Every actor system's security, by the id init_config gave the system
/// (an address may be reused by the next system a test makes, and a node
/// id is the same for every system of a process).
struct security_registry {
  std::mutex mtx;
  std::map<int64_t, std::shared_ptr<const link_security>> by_system;
};

int64_t system_id(caf::actor_system& sys) {
  return caf::get_or(sys.config(), "troupe.system-id", int64_t{0});
}

security_registry& registry() {
  static security_registry r;
  return r;
}

} // namespace

caf::error link_security::may_listen(const std::string& host,
                                     const std::string& what) const {
  if (guard || insecure || is_loopback(host))
    return {};
  return make_error(errc::invalid_config,
                    "refusing to listen for " + what + " on " + host
                      + " with no key and no TLS: anyone who reaches it "
                        "could steer or crash the run. Leave the cluster "
                        "key on (the default), give the cluster's "
                        "certificates, or --insecure on a network you "
                        "trust");
}

std::string link_security::describe() const {
  if (guard)
    return guard->describe();
  return insecure ? "INSECURE: plaintext links" : "plaintext, loopback only";
}

void guard_links(caf::actor_system& sys,
                 std::shared_ptr<const link_guard> guard, bool insecure) {
  auto s = std::make_shared<link_security>();
  s->insecure = insecure;
  if (sys.has_middleman()) // embedded runs have none
    s->middleman = caf::actor_cast<caf::actor_addr>(
      make_guarded_middleman(sys, guard ? guard : make_open_guard()));
  s->guard = std::move(guard);
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mtx};
  r.by_system[system_id(sys)] = std::move(s);
}

void secure_links(caf::actor_system& sys,
                  std::shared_ptr<const tls_context> tls, bool insecure) {
  guard_links(sys, tls ? make_tls_guard(std::move(tls)) : nullptr, insecure);
}

std::shared_ptr<const link_security> security_of(caf::actor_system& sys) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto it = r.by_system.find(system_id(sys));
  if (it != r.by_system.end())
    return it->second;
  static const auto plain = std::make_shared<const link_security>();
  return plain;
}

namespace {

/// The middleman of `s` if it is alive and belongs to `sys`, else null
/// (systems not made by init_config share system id 0).
caf::io::middleman_actor middleman_in(const link_security& s,
                                      caf::actor_system& sys) {
  auto mm = caf::actor_cast<caf::io::middleman_actor>(s.middleman);
  if (mm && &caf::actor_cast<caf::abstract_actor*>(mm)->home_system() == &sys)
    return mm;
  return {};
}

} // namespace

caf::io::middleman_actor middleman_of(caf::actor_system& sys) {
  if (auto mm = middleman_in(*security_of(sys), sys))
    return mm;
  // A system guard_links never saw (tests, benches): plaintext, as
  // security_of says, through a middleman of its own.
  auto mm = make_guarded_middleman(sys, make_open_guard());
  auto& r = registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto& s = r.by_system[system_id(sys)];
  if (s) {
    if (auto first = middleman_in(*s, sys)) { // another thread's
      caf::anon_send_exit(mm, caf::exit_reason::kill);
      return first;
    }
  }
  auto updated = s ? std::make_shared<link_security>(*s)
                   : std::make_shared<link_security>();
  updated->middleman = caf::actor_cast<caf::actor_addr>(mm);
  s = std::move(updated);
  return mm;
}

caf::expected<uint16_t> publish_actor(caf::actor_system& sys,
                                      caf::strong_actor_ptr whom,
                                      std::set<std::string> sigs,
                                      const std::string& host, uint16_t port) {
  if (auto err = security_of(sys)->may_listen(host, "the cluster's control "
                                                    "messages"))
    return err;
  caf::scoped_actor self{sys};
  caf::expected<uint16_t> result{caf::sec::cannot_open_port};
  self
    ->request(middleman_of(sys), caf::infinite, caf::publish_atom::value, port,
              std::move(whom), std::move(sigs), bind_address(host), true)
    .receive([&](uint16_t actual) { result = actual; },
             [&](caf::error& e) { result = publish_error(host, port, e); });
  return result;
}

caf::error publish_error(const std::string& host, uint16_t port,
                         const caf::error& cause) {
  // The node's own address, from its cluster file or flags: a port another
  // program holds, or a host that is not this one, is bad input (exit 2).
  const auto where = "cannot listen on " + host + ":" + std::to_string(port);
  auto why = describe(cause);
  if (why.rfind(where + ": ", 0) == 0) // the socket's own words: said once
    return make_error(errc::invalid_config, why);
  return make_error(errc::invalid_config,
                    where + " (port in use, or not an address of this host): "
                      + why);
}

std::string local_address_toward(const std::string& host, uint16_t port) {
  char name[256] = "unknown";
  ::gethostname(name, sizeof(name) - 1);
  std::string fallback = name;
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0)
    return fallback;
  std::string out = fallback;
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    // A datagram socket's connect only picks the route and source address.
    int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0)
      continue;
    sockaddr_storage me{};
    socklen_t len = sizeof(me);
    char text[INET6_ADDRSTRLEN] = {};
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0
              && ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0;
    ::close(fd);
    if (!ok)
      continue;
    const void* raw = me.ss_family == AF_INET
                        ? static_cast<const void*>(
                          &reinterpret_cast<sockaddr_in*>(&me)->sin_addr)
                        : static_cast<const void*>(
                          &reinterpret_cast<sockaddr_in6*>(&me)->sin6_addr);
    if (::inet_ntop(me.ss_family, raw, text, sizeof(text)) != nullptr) {
      out = text;
      break;
    }
  }
  ::freeaddrinfo(found);
  return out;
}

} // namespace troupe

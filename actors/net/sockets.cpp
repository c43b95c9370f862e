#include "actors/net/sockets.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/base/host_port.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_nonblocking(int fd, bool on) {
  auto flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    if (a.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
      port = ntohs(v6->sin6_port);
    }
  }
  return std::string{host} + ":" + std::to_string(port);
}

int connect_within(const std::string& host, uint16_t port,
                   caf::timespan timeout, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
      rc = ::poll(&p, 1, static_cast<int>(ms.count())) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (rc == 0)
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    set_nonblocking(fd, false);
    no_delay(fd);
  }
  return fd;
}

caf::expected<int> listen_on(const std::string& host, uint16_t port,
                             bool reuse) {
  auto bind_host = bind_address(host);
  auto fail = [&](const std::string& why) {
    return make_error(errc::node_unreachable, "cannot listen on " + host + ":"
                                                + std::to_string(port) + ": "
                                                + why);
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(bind_host.c_str(), service.c_str(), &hints,
                             &found);
      rc != 0)
    return fail(::gai_strerror(rc));
  int fd = -1;
  std::string why = "no address";
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int one = 1;
    if (reuse)
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    return fail(why);
  return fd;
}

uint16_t local_port_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6
           ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
           : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1")
    return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1
         && (ntohl(v4.s_addr) >> 24) == 127;
}

} // namespace troupe

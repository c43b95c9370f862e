// A shard as a shard node holds one: spawned and joined to a run as shard
// 0, as the chief joins it, and served on a data plane at 127.0.0.1; a
// shard that answers nothing; a raw connection to a data plane. For the
// tests of the data plane, of the links around it (TLS, the key, the
// front door) and of what travels on it (rows, replicas).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>

#include "actors/data_plane/data_link.hpp"
#include "actors/shard.hpp"
#include "caf/all.hpp"
#include "test_util.hpp"

namespace troupe::test {

/// A shard of `o` spawned on `sys` and joined to a run as shard 0.
inline shard_actor spawn_joined_shard(caf::actor_system& sys,
                                      const shard_options& o) {
  auto shard = sys.spawn(shard_impl, o);
  caf::scoped_actor self{sys};
  self->request(shard, std::chrono::seconds(5), join_atom_v, int32_t{0})
    .receive([](int64_t) {}, [](caf::error&) {});
  return shard;
}

/// A data plane on 127.0.0.1 (a port from the kernel) that serves `shard`
/// as shard 0 of `size` floats; the test ends if it cannot listen.
inline std::shared_ptr<data_server>
serve_on_data_plane(caf::actor_system& sys, const shard_actor& shard,
                    uint64_t size) {
  auto s = data_server::start(sys, "127.0.0.1", 0);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  (*s)->serve(0, shard, size);
  return *s;
}

/// A shard that takes every data request and answers none (a hung node,
/// or a replica that never acknowledges).
inline shard_data_actor::behavior_type silent_shard(
  shard_data_actor::stateful_pointer<std::vector<caf::response_promise>> self) {
  auto hold = [=](auto promise) {
    self->state.push_back(static_cast<caf::response_promise&>(promise));
    return promise;
  };
  return {
    [=](pull_atom, int32_t, int64_t) {
      return hold(self->make_response_promise<float_block>());
    },
    [=](push_atom, const gradient_push&) {
      return hold(self->make_response_promise<push_ack>());
    },
    [=](pull_atom, const row_request&) {
      return hold(self->make_response_promise<row_block>());
    },
    [=](push_atom, const row_push&) {
      return hold(self->make_response_promise<push_ack>());
    },
    [=](pull_atom, const row_requests&) {
      return hold(self->make_response_promise<row_blocks>());
    },
    [=](push_atom, const row_pushes&) {
      return hold(self->make_response_promise<push_ack>());
    },
    [=](replicate_atom, const replica_op&) {
      return hold(self->make_response_promise<push_ack>());
    },
  };
}

/// A plain TCP connection to 127.0.0.1:port whose reads give up after
/// 5 s: a peer that writes frames by hand.
inline int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

} // namespace troupe::test

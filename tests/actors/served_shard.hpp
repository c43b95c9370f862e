// A shard as a shard node holds one: spawned and joined to a run as shard
// 0, as the chief joins it, and served on a data plane at 127.0.0.1. For
// the tests of the data plane and of the links around it (TLS, the key,
// the front door).
#pragma once

#include <chrono>
#include <memory>

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

} // namespace troupe::test

// The node agent (actors/node_agent.hpp) as the chief drives it: a node
// that lost its link to the chief and registered with it again keeps the
// shards and replicas the chief still has there, and any shard a recovery
// waits for, and stops the rest, so that no shard lives on two nodes.
#include "actors/node_agent.hpp"

#include <boost/test/unit_test.hpp>

#include <set>

#include "fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

struct agent_with_shards {
  cluster_fixture f;
  caf::scoped_actor self{*f.sys};
  node_agent_actor agent;

  agent_with_shards() {
    agent_options o;
    o.node = "ps0";
    o.cfg = small_run(cluster_config::mode::async, 1, 3);
    agent = f.sys->spawn(node_agent_impl, std::move(o));
  }

  ~agent_with_shards() { self->send_exit(agent, caf::exit_reason::kill); }

  /// Starts shard `id` (or its replica) of 4 floats here.
  shard_actor place(int32_t id, bool replica) {
    shard_spawn s;
    s.id = id;
    s.replica = replica;
    s.state.shard = id;
    s.state.values.assign(4, 1.f);
    shard_actor h;
    self->request(agent, 5s, place_atom_v, std::move(s))
      .receive([&](shard_actor& x) { h = x; },
               [](caf::error& err) { BOOST_FAIL(describe(err)); });
    self->monitor(h);
    return h;
  }

  std::string keep(std::vector<shard_actor> handles,
                   std::vector<int32_t> awaited) {
    std::string stopped;
    self
      ->request(agent, 5s, keep_atom_v,
                kept_shards{std::move(handles), std::move(awaited)})
      .receive([&](std::string& s) { stopped = std::move(s); },
               [](caf::error& err) { BOOST_FAIL(describe(err)); });
    return stopped;
  }

  /// The actors among `watched` that went down within a second.
  std::set<caf::actor_addr> downs() {
    std::set<caf::actor_addr> out;
    bool more = true;
    while (more)
      self->receive([&](caf::down_msg& dm) { out.insert(dm.source); },
                    caf::after(1s) >> [&] { more = false; });
    return out;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(node_agent)

BOOST_AUTO_TEST_CASE(a_node_back_from_a_cut_link_keeps_what_the_run_has) {
  agent_with_shards a;
  // While the link was down shard 1's replica elsewhere took over, and
  // the chief gave up the replica of shard 2 that ran here; shard 0 is
  // still the run's, and shard 3 was lost: its recovery waits for it.
  auto s0 = a.place(0, false);
  auto s1 = a.place(1, false);
  auto r2 = a.place(2, true);
  auto s3 = a.place(3, false);
  BOOST_TEST(a.keep({s0}, {3}) == "shard 1, the replica of shard 2");
  auto down = a.downs();
  BOOST_TEST(down.size() == 2u);
  BOOST_TEST(down.count(s1.address()) == 1u);
  BOOST_TEST(down.count(r2.address()) == 1u);
  // Nothing else goes on a second keep of the same; an empty one stops
  // all that is left.
  BOOST_TEST(a.keep({s0}, {3}) == "");
  BOOST_TEST(a.keep({}, {}) == "shard 0, shard 3");
  down = a.downs();
  BOOST_TEST(down.count(s0.address()) == 1u);
  BOOST_TEST(down.count(s3.address()) == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

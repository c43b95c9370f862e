// A worker keeps a bounded number of steps' pushes in flight: against a
// shard that answers pulls at once but sits on pushes, it stops at
// max_unsettled (one more in async with prefetch, the prefetched step) and
// goes on when they are applied (backpressure). On CAF's test coordinator:
// the test runs every message until none is due, so "stops" means that the
// worker has nothing more to do, not that it was quiet for a while.
// An ssp worker whose pull waits for the slowest worker holds no lease
// meanwhile, so a pause of the feeder settles.
#include "actors/worker/worker.hpp"

#include <boost/test/unit_test.hpp>

#include "actors/feeder.hpp"
#include "actors/fixture.hpp"
#include "models/model.hpp"
#include "runtime/compute/cpu_backend.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

/// A shard that answers pulls at once (or, with `hold_pulls`, never: an
/// ssp worker too far ahead of the slowest) and holds every push until it
/// is told "release" (through tune, the one steering message it has).
struct slow_shard_state {
  static inline const char* name = "slow_shard";
  std::vector<float> values;
  std::vector<caf::typed_response_promise<push_ack>> held;
  std::vector<caf::typed_response_promise<float_block>> held_pulls;
  int64_t pushes = 0;
  int64_t pulls = 0;
};

shard_actor::behavior_type
slow_shard(shard_actor::stateful_pointer<slow_shard_state> self, size_t n,
           bool hold_pulls) {
  self->state.values.assign(n, 0.f);
  auto snapshot = [=] {
    return std::make_shared<const std::vector<float>>(self->state.values);
  };
  return {
    [=](join_atom, int32_t) -> int64_t { return 0; },
    [=](leave_atom, int32_t) {},
    [=](pull_atom, int32_t, int64_t) -> caf::result<float_block> {
      ++self->state.pulls;
      if (!hold_pulls)
        return float_block{0, 0, snapshot()};
      auto p = self->make_response_promise<float_block>();
      self->state.held_pulls.push_back(p);
      return p;
    },
    [=](push_atom, const gradient_push&) -> caf::result<push_ack> {
      ++self->state.pushes;
      auto p = self->make_response_promise<push_ack>();
      self->state.held.push_back(p);
      return p;
    },
    [=](pull_atom, const row_request& r) -> row_block {
      return {r.shard, r.table, {}};
    },
    [=](push_atom, const row_push&) -> push_ack { return {}; },
    [=](pull_atom, const row_requests&) -> row_blocks { return {}; },
    [=](push_atom, const row_pushes&) -> push_ack { return {}; },
    [=](snapshot_atom, int32_t, uint64_t, uint64_t) -> row_chunk { return {}; },
    [=](restore_atom, const row_chunk&) -> uint64_t { return 0; },
    [=](snapshot_atom, counts_atom, int32_t, uint64_t, uint64_t) -> key_counts {
      return {};
    },
    [=](restore_atom, const key_counts&) -> bool { return true; },
    [=](export_atom, int32_t, int64_t) -> row_chunk { return {}; },
    [=](export_atom, int32_t, uint64_t, uint64_t) -> row_chunk { return {}; },
    [=](snapshot_atom) -> shard_state_msg { return {}; },
    [=](restore_atom, shard_state_msg&) -> int64_t { return 0; },
    [=](stats_atom) -> shard_stats {
      shard_stats s;
      s.accepted = self->state.pushes;
      return s;
    },
    [=](adopt_atom, int64_t) -> shard_history { return {}; },
    [=](forget_atom, int64_t) {},
    [=](tune_atom, const std::string&, double) -> bool {
      for (auto& p : self->state.held)
        p.deliver(push_ack{0, false});
      self->state.held.clear();
      return true;
    },
    [=](replicate_atom, const replica_op&) -> push_ack { return {}; },
    [=](replicate_atom, const shard_data_actor&, const std::string&) {
      return true;
    },
    [=](promote_atom) -> int64_t { return 0; },
    [=](image_atom) { return replica_image{}; },
  };
}

/// Worker 0 of `cfg` against a feeder of `epochs` and one slow_shard
/// (holding pulls or not) on `d`; stop() ends all three.
struct one_worker {
  deterministic_system& d;
  feeder_self_actor feeder;
  shard_actor shard;
  worker_actor worker;

  one_worker(deterministic_system& sys, const run_config& cfg, int epochs,
             bool hold_pulls)
    : d(sys) {
    auto data = std::make_shared<const train_test>(
      std::move(*load_datasets(cfg.data)));
    auto backend = make_cpu_backend(1);
    auto m = make_model(cfg.model, data->train.height, data->train.width,
                        data->train.channels, data->train.classes, *backend);
    BOOST_REQUIRE(m);
    auto total = (*m)->layout().total();
    feeder_options fo;
    fo.samples = data->train.count;
    fo.batch = cfg.training.batch_size;
    fo.epochs = epochs;
    feeder = d.sys->spawn(feeder_impl, fo);
    shard = d.sys->spawn(slow_shard, total, hold_pulls);
    worker_options wo;
    wo.id = 0;
    wo.cfg = cfg;
    wo.data = data;
    wo.feeder = feeder;
    wo.shards = {shard};
    wo.ranges = {flat_range{0, total}};
    worker = d.sys->spawn(worker_impl, std::move(wo));
  }

  void stop() {
    for (auto h : {caf::actor_cast<caf::actor>(worker),
                   caf::actor_cast<caf::actor>(shard),
                   caf::actor_cast<caf::actor>(feeder)})
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    d.run();
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(worker)

BOOST_AUTO_TEST_CASE(a_bounded_number_of_pushes_is_in_flight) {
  struct variant {
    cluster_config::mode mode;
    bool prefetch;
  };
  for (auto [mode, prefetch] : {variant{cluster_config::mode::async, false},
                                variant{cluster_config::mode::async, true},
                                variant{cluster_config::mode::ssp, false}}) {
    deterministic_system d;
    auto cfg = small_run(mode, 1, 1);
    cfg.cluster.prefetch = prefetch;
    one_worker run{d, cfg, 4, false};
    auto shard = run.shard;
    auto pushes = [&] { return state_of<slow_shard_state>(shard).pushes; };
    int64_t bound = max_unsettled + (prefetch ? 1 : 0);
    // The worker pushes that many steps and stops there.
    auto what = std::string{to_string(mode)} + (prefetch ? " prefetch" : "");
    d.run();
    BOOST_TEST(pushes() == bound, what);
    // Applied: it goes on, and stops at as many more.
    caf::anon_send(shard, tune_atom_v, std::string{"release"}, 0.0);
    d.run();
    BOOST_TEST(pushes() == 2 * bound, what);
    run.stop();
  }
}

BOOST_AUTO_TEST_CASE(an_ssp_worker_waiting_for_the_slowest_holds_no_lease) {
  // The slowest worker needs a lease to catch up: one held by a worker
  // waiting for it would keep a pause (a checkpoint, a move) from ever
  // settling, and the slowest from its batches.
  deterministic_system d;
  one_worker run{d, small_run(cluster_config::mode::ssp, 1, 1), 1, true};
  auto shard = run.shard;
  auto feeder = run.feeder;
  d.run();
  BOOST_TEST(state_of<slow_shard_state>(shard).pulls == 1);
  auto& plan = *state_of<feeder_state>(feeder).plan;
  BOOST_TEST(plan.quiet());
  BOOST_TEST(plan.position() == 0);
  // A pause asked now is answered.
  bool settled = false;
  d.sys->spawn([&](caf::event_based_actor* self) {
    self->request(feeder, caf::infinite, pause_atom_v)
      .then([&](feeder_position&) { settled = true; });
  });
  d.run();
  BOOST_TEST(settled);
  run.stop();
}

BOOST_AUTO_TEST_SUITE_END()

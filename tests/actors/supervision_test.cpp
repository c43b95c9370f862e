// The chief as a supervisor: restarts, the restart limit, NaN, checkpoints.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <stdexcept>

#include "fixture.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;
using mode = cluster_config::mode;

namespace {

/// sync with one worker and Adam: every step sees the previous update, so
/// the run is deterministic and an interrupted run must equal a straight
/// one (an async worker prefetches values one step stale, which a restart
/// resets).
run_config deterministic_run() {
  auto cfg = small_run(mode::sync, 1, 2);
  cfg.training.optimizer.type = optimizer_config::kind::adam;
  cfg.training.optimizer.learning_rate = 0.01;
  cfg.training.max_steps = 20;
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(supervision)

BOOST_AUTO_TEST_CASE(a_failed_worker_is_restarted_and_no_sample_is_lost) {
  cluster_fixture f;
  auto cfg = small_run(mode::async, 2, 2);
  std::atomic<int> thrown{0};
  std::atomic<int32_t> faulty{-1};
  auto r = f.run(cfg, [&](int32_t worker, int64_t clock) {
    // Once: the restarted worker counts its clock from 0 again. In the
    // first step of whichever worker comes first, with a batch leased: on
    // a loaded machine one worker may take all 32 batches (worker 0 alone
    // was once never given one).
    if (clock == 0 && thrown.exchange(1) == 0) {
      faulty = worker;
      throw std::runtime_error("injected fault");
    }
  });
  BOOST_REQUIRE_MESSAGE(r, troupe::test::why(r) + "\n" + f.log.str());
  BOOST_TEST(thrown.load() == 1);
  BOOST_TEST(r->restarts == 1);
  BOOST_TEST(r->steps == 2 * 16);
  BOOST_TEST(r->epoch_samples == (std::vector<int64_t>{256, 256}));
  auto w = std::to_string(faulty.load());
  BOOST_TEST(f.log.str().find("worker " + w + " failed (worker " + w
                              + " threw: injected fault)")
               != std::string::npos,
             f.log.str());
}

BOOST_AUTO_TEST_CASE(a_worker_that_keeps_failing_trips_the_restart_limit) {
  cluster_fixture f;
  auto cfg = small_run(mode::async, 1, 1); // alone: the run cannot end well
  cfg.cluster.max_restarts = 2;
  auto r = f.run(cfg, [](int32_t worker, int64_t) {
    if (worker == 0)
      throw std::runtime_error("broken replica");
  });
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::restart_limit));
  auto msg = describe(r.error());
  BOOST_TEST(msg.find("worker 0 failed and the restart limit is reached (2 "
                      "restarts within 60 s)")
               == 0,
             msg);
}

BOOST_AUTO_TEST_CASE(a_nan_loss_stops_the_run) {
  cluster_fixture f;
  auto cfg = small_run(mode::async, 1, 1);
  cfg.training.optimizer.learning_rate = 1e30;
  auto r = f.run(cfg);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::non_finite), describe(r.error()));
  BOOST_TEST(describe(r.error()).find("the loss turned") == 0,
             describe(r.error()));
}

BOOST_AUTO_TEST_CASE(reaching_the_target_accuracy_ends_the_run_early) {
  cluster_fixture f;
  auto cfg = small_run(mode::async, 2, 2);
  cfg.training.epochs = 50;
  cfg.training.eval_every_steps = 4;
  cfg.cluster.target_accuracy = 0.9;
  auto r = f.run_ok(cfg);
  // The target line is printed only for an evaluation at or above it. The
  // final evaluation comes after the steps still in flight (async), which
  // can move this small problem's accuracy either way, so it only has to
  // show training, not the target.
  BOOST_TEST(r.test_accuracy > 0.5);
  BOOST_TEST(r.steps < 50 * 16);
  BOOST_TEST(f.log.str().find("target accuracy 0.9000 reached; finishing")
               != std::string::npos,
             f.log.str());
}

BOOST_AUTO_TEST_CASE(checkpoint_then_resume_is_bitwise_the_same_run) {
  temp_dir dir;
  auto cfg = deterministic_run();
  auto straight = run_to_end(cfg);
  cfg.training.checkpoint.dir = dir.path();
  cfg.training.checkpoint.every_steps = 6;
  cfg.training.max_steps = 12;
  {
    cluster_fixture f;
    auto r = f.run(cfg);
    BOOST_REQUIRE_MESSAGE(r, troupe::test::why(r));
    // One every 6 steps (at the first quiet point after it) and one at the
    // end.
    auto log = f.log.str();
    auto first = log.find(": checkpoint ");
    BOOST_TEST(first != std::string::npos, log);
    BOOST_TEST(log.find(": checkpoint ", first + 1) != std::string::npos, log);
    BOOST_TEST(log.find("ckpt-12.safetensors") != std::string::npos, log);
  }
  cfg.training.checkpoint.resume = true;
  cfg.training.max_steps = 20;
  cluster_fixture f;
  auto r = f.run_ok(cfg);
  BOOST_TEST(f.log.str().find("resuming from") != std::string::npos);
  BOOST_TEST(r.steps == 20);
  BOOST_TEST(f.final_params == straight); // bitwise
}

BOOST_AUTO_TEST_CASE(a_checkpoint_resumes_on_another_shard_count_bitwise) {
  // A checkpoint holds the model whole, and the shard count is no part of
  // what a resume must match: the chief places the values and optimizer
  // state on this run's shards. Sync, so the run is deterministic; a
  // checkpoint of 2 shards resumed on 1, 3 and 4 trains bitwise what the
  // resume on 2 trains, with SGD and with Adam (whose state is sliced
  // too).
  for (auto type :
       {optimizer_config::kind::sgd, optimizer_config::kind::adam}) {
    BOOST_TEST_CONTEXT(to_string(type)) {
      temp_dir dir;
      auto cfg = small_run(mode::sync, 1, 2);
      cfg.training.optimizer.type = type;
      cfg.training.optimizer.learning_rate = 0.01;
      cfg.training.checkpoint.dir = dir.path();
      cfg.training.checkpoint.every_steps = 100;
      cfg.training.max_steps = 12;
      run_to_end(cfg); // its checkpoint at step 12
      std::vector<float> on_two;
      for (int shards : {2, 1, 3, 4}) {
        BOOST_TEST_CONTEXT(shards << " shards") {
          // Each resume from its own copy of the folder: a resume writes
          // checkpoints of its own.
          temp_dir copy;
          std::string cp = "cp " + dir.file("ckpt-12.safetensors") + " "
                           + copy.path();
          BOOST_REQUIRE(std::system(cp.c_str()) == 0);
          cfg.cluster.shards = shards;
          cfg.training.checkpoint.dir = copy.path();
          cfg.training.checkpoint.resume = true;
          cfg.training.max_steps = 20;
          cluster_fixture f;
          auto r = f.run_ok(cfg);
          auto log = f.log.str();
          BOOST_TEST(log.find("resuming from") != std::string::npos, log);
          BOOST_TEST((log.find("the checkpoint was written on 2 shards: its "
                               "values and optimizer state are placed on "
                               "this run's "
                               + std::to_string(shards))
                      != std::string::npos)
                       == (shards != 2),
                     log);
          BOOST_TEST(r.steps == 20);
          if (shards == 2)
            on_two = f.final_params;
          else
            BOOST_TEST(f.final_params == on_two); // bitwise
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(
  a_worker_stream_plan_resumes_where_the_checkpoint_left_it) {
  // As above in replicated and sharded mode: the checkpoint carries the
  // feeder's plan text (each worker's place in its stream), and a resumed
  // run trains the batches the straight run trained after that point.
  for (auto partition :
       {troupe::data_partition::replicated, troupe::data_partition::sharded}) {
    BOOST_TEST_CONTEXT(to_string(partition)) {
      temp_dir dir;
      auto cfg = deterministic_run();
      cfg.training.partition = partition;
      auto straight = run_to_end(cfg);
      cfg.training.checkpoint.dir = dir.path();
      cfg.training.checkpoint.every_steps = 100;
      cfg.training.max_steps = 12;
      run_to_end(cfg);
      auto head = read_checkpoint_metadata(dir.file("ckpt-12.safetensors"));
      BOOST_REQUIRE(head);
      BOOST_TEST(head->metadata["feeder_plan"].find(
                   std::string{"troupe-plan 1 "} + to_string(partition))
                   == 0u,
                 head->metadata["feeder_plan"]);
      cfg.training.checkpoint.resume = true;
      cfg.training.max_steps = 20;
      cluster_fixture f;
      auto r = f.run_ok(cfg);
      BOOST_TEST(r.steps == 20);
      BOOST_TEST(f.final_params == straight); // bitwise
    }
  }
}

BOOST_AUTO_TEST_CASE(a_checkpoint_keeps_the_shard_version_apart_from_the_step) {
  // sync with 2 workers: 8 batches are 4 updates, and Adam's bias
  // correction after a resume follows the updates.
  temp_dir dir;
  auto cfg = small_run(mode::sync, 2, 2);
  cfg.training.optimizer.type = optimizer_config::kind::adam;
  cfg.training.max_steps = 8;
  cfg.training.checkpoint.dir = dir.path();
  cluster_fixture f;
  auto r = f.run(cfg);
  BOOST_REQUIRE_MESSAGE(r, troupe::test::why(r));
  auto ck = read_checkpoint(dir.file("ckpt-8.safetensors"));
  BOOST_REQUIRE_MESSAGE(ck, troupe::test::why(ck));
  BOOST_TEST(ck->step == 8);
  BOOST_TEST(ck->metadata.at("shard_version") == "4");
}

BOOST_AUTO_TEST_CASE(a_checkpoint_with_a_bad_version_is_refused_by_name) {
  temp_dir dir;
  auto cfg = small_run(mode::sync, 1, 2);
  cfg.training.max_steps = 4;
  cfg.training.checkpoint.dir = dir.path();
  {
    cluster_fixture f;
    BOOST_REQUIRE(f.run(cfg));
  }
  auto path = dir.file("ckpt-4.safetensors");
  auto ck = read_checkpoint(path);
  BOOST_REQUIRE_MESSAGE(ck, troupe::test::why(ck));
  BOOST_TEST(ck->metadata.at("shard_version") == "4");
  ck->metadata["shard_version"] = "4x";
  BOOST_REQUIRE(!write_checkpoint(path, *ck));
  cfg.training.checkpoint.resume = true;
  cfg.training.max_steps = 8;
  cluster_fixture f;
  auto r = f.run(cfg);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::bad_format));
  BOOST_TEST(describe(r.error())
             == path
                  + ": metadata \"shard_version\" is not a "
                    "non-negative integer: \"4x\"");
}

BOOST_AUTO_TEST_SUITE_END()

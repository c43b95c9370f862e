// The chief's phases under CAF's test coordinator (style rule 15): every
// message is run by the test, one at a time, so the course of a run is
// the same every time. An embedded cluster of 2 CPU workers and 2 shards
// trains the blobs of fixture.hpp; the test reads the phase the chief is
// in after each message and drives stops and pauses through its typed
// shell requests.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "actors/chief/chief_state.hpp"
#include "actors/fixture.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

struct deterministic_chief : deterministic_system {
  std::ostringstream log;
  chief_self_actor chief;

  explicit deterministic_chief(const run_config& run) {
    auto data = load_datasets(run.data);
    BOOST_REQUIRE(data);
    chief_options opts;
    opts.cfg = run;
    opts.data = std::make_shared<const train_test>(std::move(*data));
    opts.log = &log;
    chief = sys->spawn(chief_impl, std::move(opts));
  }

  /// A run still going is stopped as the shell would, so that every actor
  /// of it ends and the system can shut down.
  ~deterministic_chief() {
    if (phase() != run_phase::ended) {
      caf::anon_send(chief, stop_atom_v, std::string{"the test"});
      run_until([&] { return phase() == run_phase::ended; });
    }
    sched->run();
  }

  chief_state& state() { return state_of<chief_state>(chief); }

  /// Starts the run (its reply goes to `self`) and runs it until it has
  /// trained `steps` steps.
  void start_and_train(caf::scoped_actor& self, int64_t steps) {
    self->send(chief, run_atom_v);
    run_until([&] { return state().progress.steps() >= steps; });
  }

  run_phase phase() { return state().phase; }

  /// Runs one message at a time until `done` or `limit` messages; when
  /// nothing is due, the test clock moves on by a second (a held lease is
  /// answered after a third of the 20 s request timeout; a request's own
  /// timeout, twenty seconds on, never comes due while its answer does).
  /// Returns the phases seen, in order.
  template <class Done>
  std::vector<run_phase> run_until(Done done, size_t limit = 200000) {
    std::vector<run_phase> seen{phase()};
    for (size_t n = 0; n < limit && !done(); ++n) {
      if (!sched->try_run_once())
        sched->advance_time(std::chrono::seconds(1));
      if (phase() != seen.back())
        seen.push_back(phase());
    }
    return seen;
  }
};

/// An async run of 2 workers on 2 shards, for `epochs` epochs.
run_config async_run(int epochs) {
  auto run = small_run(cluster_config::mode::async, 2, 2);
  run.training.epochs = epochs;
  return run;
}

/// The summary of an async run of 8 epochs of 16 batches: every shard's
/// version is the batches it applied, each once, moves or not, and every
/// sample trained once per epoch.
void every_batch_once(const cluster_summary& s) {
  BOOST_TEST(s.steps == 8 * 16);
  BOOST_TEST(s.version == s.steps);
  BOOST_TEST(s.epoch_samples == std::vector<int64_t>(8, 256));
}

} // namespace

BOOST_AUTO_TEST_SUITE(chief_phases)

BOOST_AUTO_TEST_CASE(a_run_goes_through_every_phase_in_order) {
  deterministic_chief c{small_run(cluster_config::mode::async, 2, 2)};
  BOOST_TEST((c.phase() == run_phase::waiting_for_nodes));
  caf::scoped_actor self{*c.sys};
  self->send(c.chief, run_atom_v);
  auto seen = c.run_until([&] { return c.phase() == run_phase::ended; });
  std::vector<run_phase> expected{run_phase::waiting_for_nodes,
                                  run_phase::starting, run_phase::training,
                                  run_phase::finishing, run_phase::ended};
  BOOST_TEST((seen == expected));
  c.sched->run();
  bool replied = false;
  self->receive(
    [&](cluster_summary& s) {
      replied = true;
      BOOST_TEST(s.steps == 32); // 256 samples, batches of 16, 2 epochs
      BOOST_TEST(s.epoch_samples == (std::vector<int64_t>{256, 256}));
    },
    [&](caf::error& err) { BOOST_ERROR(describe(err)); });
  BOOST_TEST(replied);
}

BOOST_AUTO_TEST_CASE(a_stop_while_training_finishes_after_the_steps_in_flight) {
  deterministic_chief c{async_run(50)}; // far more than the test lets it train
  caf::scoped_actor self{*c.sys};
  c.start_and_train(self, 20);
  BOOST_REQUIRE((c.phase() == run_phase::training));
  // The shell's stop: answered at once, then the run finishes.
  self->send(c.chief, stop_atom_v);
  auto seen = c.run_until([&] { return c.phase() == run_phase::ended; });
  BOOST_TEST((seen.front() == run_phase::training));
  BOOST_TEST((seen.back() == run_phase::ended));
  BOOST_TEST(
    (std::find(seen.begin(), seen.end(), run_phase::finishing) != seen.end()));
  c.sched->run();
  int answers = 0;
  for (int i = 0; i < 2; ++i)
    self->receive([&](bool stopping) { answers += stopping ? 1 : 0; },
                  [&](cluster_summary& s) {
                    ++answers;
                    BOOST_TEST(s.steps < 50 * 16);
                    BOOST_TEST(s.steps >= 20);
                  },
                  [&](caf::error& err) { BOOST_ERROR(describe(err)); });
  BOOST_TEST(answers == 2);
  BOOST_TEST(c.log.str().find("stop requested by the shell")
               != std::string::npos,
             c.log.str());
}

BOOST_AUTO_TEST_CASE(a_signal_before_training_ends_the_run_with_its_reason) {
  deterministic_chief c{small_run(cluster_config::mode::async, 2, 2)};
  caf::scoped_actor self{*c.sys};
  self->send(c.chief, run_atom_v);
  self->send(c.chief, stop_atom_v, std::string{"SIGTERM"});
  auto seen = c.run_until([&] { return c.phase() == run_phase::ended; });
  BOOST_TEST((seen.back() == run_phase::ended));
  BOOST_TEST((std::find(seen.begin(), seen.end(), run_phase::training)
              == seen.end())); // never trained
  c.sched->run();
  bool failed = false;
  self->receive([&](cluster_summary&) {},
                [&](caf::error& err) {
                  failed = true;
                  BOOST_TEST((err == errc::stopped));
                  BOOST_TEST(describe(err).find("stopped by SIGTERM before "
                                                "training began")
                               != std::string::npos,
                             describe(err));
                });
  BOOST_TEST(failed);
}

BOOST_AUTO_TEST_CASE(a_pause_holds_the_steps_until_resume) {
  deterministic_chief c{async_run(50)};
  caf::scoped_actor self{*c.sys};
  c.start_and_train(self, 10);
  self->send(c.chief, pause_atom_v);
  // Everything that can run without a new lease runs: the steps stop.
  c.run_until([] { return false; }, 5000);
  auto paused_at = c.state().progress.steps();
  BOOST_TEST(c.state().progress.user_paused());
  c.run_until([] { return false; }, 5000);
  BOOST_TEST(c.state().progress.steps() == paused_at);
  self->send(c.chief, resume_atom_v);
  c.run_until([&] { return c.state().progress.steps() >= paused_at + 10; });
  BOOST_TEST(c.state().progress.steps() >= paused_at + 10, c.log.str());
  BOOST_TEST((c.phase() == run_phase::training), to_string(c.phase()));
}

BOOST_AUTO_TEST_CASE(a_program_adds_and_drains_shards_while_the_run_trains) {
  deterministic_chief c{async_run(8)};
  caf::scoped_actor self{*c.sys};
  c.start_and_train(self, 10);
  std::vector<int32_t> workers; // those running now
  for (auto& [id, w] : c.state().members.workers())
    if (w.handle)
      workers.push_back(id);
  // The messages the shell's add-shard and drain send; the reply comes
  // once the shards have moved.
  self->send(c.chief, grow_atom_v, c.state().own_node());
  c.run_until([&] { return c.state().recovery.moves() == 1; });
  BOOST_TEST(c.state().shards.count() == 3u);
  auto steps_at_move = c.state().progress.steps();
  c.run_until([&] { return c.state().progress.steps() >= steps_at_move + 10; });
  self->send(c.chief, drain_atom_v, int32_t{0});
  c.run_until([&] { return c.state().recovery.moves() == 2; });
  BOOST_TEST(c.state().shards.count() == 2u);
  // Refused, with the reason: the run goes on as it was.
  self->send(c.chief, drain_atom_v, int32_t{5});
  auto seen = c.run_until([&] { return c.phase() == run_phase::ended; });
  BOOST_TEST((seen.back() == run_phase::ended));
  // The workers that trained before the moves trained after them: none
  // was restarted. (Read before the chief may end with what is left.)
  BOOST_TEST(c.state().members.total_restarts() == 0);
  for (auto id : workers)
    BOOST_TEST(c.state().members.worker(id).restarts == 0);
  c.sched->run();
  std::vector<std::string> texts;
  std::string refusal;
  bool summarised = false;
  for (int i = 0; i < 4; ++i)
    self->receive([&](std::string& text) { texts.push_back(text); },
                  [&](cluster_summary& s) {
                    summarised = true;
                    every_batch_once(s);
                  },
                  [&](caf::error& err) { refusal = describe(err); });
  BOOST_TEST(summarised);
  BOOST_REQUIRE(texts.size() == 2u);
  BOOST_TEST(texts[0].find("shard 2 added on node local: 3 shards now")
               != std::string::npos,
             texts[0]);
  BOOST_TEST(texts[1].find("shard 0 on node local drained")
               != std::string::npos,
             texts[1]);
  BOOST_TEST(refusal.find("drain: no shard 5 (the run has 2: 0..1)")
               != std::string::npos,
             refusal);
  BOOST_TEST(c.log.str().find("shards added or drained: 2")
               != std::string::npos,
             c.log.str());
}

BOOST_AUTO_TEST_CASE(
  a_move_the_shards_cannot_make_is_called_off_and_training_goes_on) {
  deterministic_chief c{async_run(8)};
  caf::scoped_actor self{*c.sys};
  c.start_and_train(self, 10);
  // Shard 0 alone gets another learning rate (not through the chief, which
  // sets every shard's): the shards' images disagree, so no move can cut
  // them into one run.
  auto shard0 = c.state().shards.handles()[0];
  self->send(shard0, tune_atom_v, std::string{"lr"}, 0.001);
  c.run_until([] { return false; }, 50);
  self->send(c.chief, grow_atom_v, c.state().own_node());
  c.run_until([&] { return c.state().progress.steps() >= 40; });
  BOOST_TEST(c.state().recovery.moves() == 0);
  BOOST_TEST(!c.state().recovery.recovering());
  BOOST_TEST(c.state().shards.count() == 2u);
  BOOST_TEST((c.state().shards.handles()[0] == shard0)); // the same shards
  BOOST_TEST(c.state().members.total_restarts() == 0);
  auto seen = c.run_until([&] { return c.phase() == run_phase::ended; });
  BOOST_TEST((seen.back() == run_phase::ended));
  c.sched->run();
  std::string refusal;
  bool summarised = false;
  for (int i = 0; i < 3; ++i)
    self->receive([&](bool) {}, [&](std::string&) { BOOST_ERROR("moved"); },
                  [&](cluster_summary& s) {
                    summarised = true;
                    every_batch_once(s);
                  },
                  [&](caf::error& err) { refusal = describe(err); });
  BOOST_TEST(summarised);
  BOOST_TEST(refusal.find("shard 2 added on node local: not made: shards 0 "
                          "and 1 differ in their settings")
               != std::string::npos,
             refusal);
  BOOST_TEST(c.log.str().find("training goes on with the shards as they "
                              "were")
               != std::string::npos,
             c.log.str());
}

BOOST_AUTO_TEST_SUITE_END()

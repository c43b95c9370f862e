#include "runtime/rules/takeover.hpp"

#include <boost/test/unit_test.hpp>

using namespace troupe;

namespace {

shard_history live(int32_t shard, int64_t since, std::vector<int64_t> batches,
                   bool complete = true) {
  shard_history h;
  h.shard = shard;
  h.since = since;
  h.version = since + static_cast<int64_t>(batches.size());
  h.complete = complete;
  h.batches = std::move(batches);
  return h;
}

} // namespace

BOOST_AUTO_TEST_SUITE(takeover)

BOOST_AUTO_TEST_CASE(every_shard_alive_and_agreeing_is_kept) {
  auto v = judge_takeover(3, 100,
                          {live(2, 100, {7, 8, 10}), live(0, 100, {7, 8, 10}),
                           live(1, 100, {7, 8, 10})});
  BOOST_TEST(v.keep_live, v.why_not);
  BOOST_TEST(v.done == (std::vector<int64_t>{7, 8, 10}));
  BOOST_TEST(v.newest_version == 103);
}

BOOST_AUTO_TEST_CASE(nothing_since_the_checkpoint_is_kept_too) {
  auto v = judge_takeover(2, 5, {live(0, 5, {}), live(1, 5, {})});
  BOOST_TEST(v.keep_live);
  BOOST_TEST(v.done.empty());
}

BOOST_AUTO_TEST_CASE(a_shard_that_died_with_its_chief_rewinds_all) {
  auto v = judge_takeover(2, 100, {live(1, 100, {7})});
  BOOST_TEST(!v.keep_live);
  BOOST_TEST(v.why_not == "shard 0 did not survive its chief");
  BOOST_TEST(v.done.empty());
  BOOST_TEST(v.newest_version == 101); // for the steps-lost figure
}

BOOST_AUTO_TEST_CASE(a_push_that_reached_some_shards_only_comes_again) {
  // Batch 8 reached shards 0 and 2, batch 9 shard 1 only: both come again;
  // the shards that applied them drop them then.
  auto v = judge_takeover(
    3, 100, {live(0, 100, {7, 8}), live(1, 100, {7, 9}), live(2, 100, {7, 8})});
  BOOST_TEST(v.keep_live);
  BOOST_TEST(v.done == (std::vector<int64_t>{7}));
  BOOST_TEST(v.again == (std::vector<int64_t>{8, 9}));
  BOOST_TEST(v.newest_version == 102);
}

BOOST_AUTO_TEST_CASE(logs_that_cannot_vouch_rewind_all) {
  auto short_log = judge_takeover(1, 100, {live(0, 100, {7}, false)});
  BOOST_TEST(!short_log.keep_live);
  BOOST_TEST(short_log.why_not
             == "shard 0 (at update 101) cannot name the batches it applied "
                "since update 100");
  auto gap = live(0, 100, {7});
  gap.version = 103;
  BOOST_TEST(judge_takeover(1, 100, {gap}).why_not
             == "shard 0 is at update 103 but names 1 batches since update "
                "100");
  auto twice = live(0, 100, {7, 7});
  BOOST_TEST(judge_takeover(1, 100, {twice}).why_not
             == "shard 0 names a batch twice");
  BOOST_TEST(judge_takeover(1, 100, {live(0, 99, {})}).why_not
             == "shard 0 answered for version 99, not 100");
}

BOOST_AUTO_TEST_CASE(shards_the_run_does_not_have_rewind_all) {
  BOOST_TEST(judge_takeover(1, 0, {live(0, 0, {}), live(0, 0, {})}).why_not
             == "shard 0 lives on two nodes");
  BOOST_TEST(judge_takeover(1, 0, {live(0, 0, {}), live(3, 0, {})}).why_not
             == "a node holds shard 3, the run has 1");
}

BOOST_AUTO_TEST_SUITE_END()

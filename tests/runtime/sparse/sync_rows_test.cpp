// sync mode's rows without a shard actor (runtime/sparse/sync_rows): a
// worker's row push waits for its dense push and is applied with the
// update that push joins, as the mean over the update's pushes; rows of a
// refused or stale dense push are dropped.
#include "runtime/sparse/sync_rows.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>

#include "runtime/base/errc.hpp"

using namespace troupe;

namespace {

/// A sync shard of 2 dense values, 2 workers per update, and one table of
/// rows of 2 floats, plain SGD at rate 1 everywhere.
struct sync_shard {
  param_block block;
  sync_rows::tables tables;
  sync_rows rows;

  sync_shard() : block(options(), {0.f, 0.f}) {
    embedding_table_config t;
    t.vocabulary = 100;
    t.dim = 2;
    sparse_optimizer_config o;
    o.type = sparse_optimizer_config::kind::sgd;
    o.learning_rate = 1.0;
    tables.push_back(std::make_unique<sparse_table>(t, o));
    block.add_worker(0);
    block.add_worker(1);
  }

  static param_block::options options() {
    param_block::options o;
    o.mode = consistency_mode::sync;
    o.aggregate = 2;
    o.optimizer.type = optimizer_config::kind::sgd;
    o.optimizer.learning_rate = 1.0;
    return o;
  }

  std::vector<float> row(uint64_t id) {
    std::vector<float> out(2);
    BOOST_REQUIRE(!tables[0]->peek(&id, 1, out.data()));
    return out;
  }

  /// A push of row `id` by `worker` computed on version `tag`, to this
  /// shard, which the errors call shard `shard`.
  caf::expected<bool> hold_at(int32_t worker, int64_t tag, uint64_t id,
                              std::vector<float> grad = {1.f, 1.f},
                              int32_t shard = 0) {
    return rows.hold(
      block, *tables[0],
      {worker, 0, tag, {id}, std::make_shared<const std::vector<float>>(grad)},
      shard);
  }

  /// A push of row `id` by `worker` for the update under way.
  caf::expected<bool> hold_row(int32_t worker, uint64_t id,
                               std::vector<float> grad) {
    return hold_at(worker, block.version(), id, std::move(grad));
  }

  caf::expected<param_block::outcome> dense(int32_t worker, int64_t tag,
                                            float g = 1.f) {
    auto before = block.version();
    std::vector<float> grad{g, g};
    auto r = block.push(worker, tag, grad.data(), grad.size());
    rows.settle(block, tables, worker, r, before);
    return r;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(sync_rows)

BOOST_AUTO_TEST_CASE(rows_wait_for_the_update_and_get_its_mean) {
  sync_shard s;
  auto start = s.row(7);
  BOOST_TEST(troupe::sync_rows::applies(s.block, s.tables));
  BOOST_TEST(*s.hold_row(0, 7, {2.f, 4.f}) == false);
  BOOST_TEST(*s.hold_row(1, 7, {4.f, 8.f}) == false);
  BOOST_TEST(s.rows.held() == 2u);
  // Nothing moves before the update is complete.
  BOOST_TEST((*s.dense(0, 0) == param_block::outcome::aggregated));
  BOOST_TEST(s.row(7) == start);
  BOOST_TEST((*s.dense(1, 0) == param_block::outcome::applied));
  // Both pushes' rows, summed and divided by the update's 2 pushes.
  auto after = s.row(7);
  BOOST_TEST(std::abs(after[0] - (start[0] - 3.f)) < 1e-6f);
  BOOST_TEST(std::abs(after[1] - (start[1] - 6.f)) < 1e-6f);
  BOOST_TEST(s.rows.held() == 0u);
}

BOOST_AUTO_TEST_CASE(rows_of_a_refused_or_stale_push_are_dropped) {
  sync_shard s;
  auto start = s.row(3);
  BOOST_TEST(*s.hold_row(0, 3, {1.f, 1.f}) == false);
  // Worker 0's dense push is refused (wrong size): its rows go with it.
  auto before = s.block.version();
  std::vector<float> wrong{1.f};
  auto r = s.block.push(0, 0, wrong.data(), wrong.size());
  BOOST_REQUIRE(!r);
  s.rows.settle(s.block, s.tables, 0, r, before);
  BOOST_TEST(s.rows.held() == 0u);
  s.dense(0, 0);
  s.dense(1, 0);
  BOOST_TEST(s.row(3) == start);
  // A row push for an update already applied is stale and held nowhere.
  auto stale = s.hold_at(0, 0, 3);
  BOOST_REQUIRE(stale);
  BOOST_TEST(*stale == true);
  BOOST_TEST(s.rows.held() == 0u);
}

BOOST_AUTO_TEST_CASE(a_push_the_shard_would_refuse_is_refused_with_its_reason) {
  sync_shard s;
  auto unknown = s.hold_at(5, 0, 1, {1.f, 1.f}, 4);
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(describe(unknown.error())
                 .find("a row push from worker 5, which shard 4 does not know")
               != std::string::npos,
             describe(unknown.error()));
  auto ahead = s.hold_at(0, 9, 1, {1.f, 1.f}, 4);
  BOOST_REQUIRE(!ahead);
  BOOST_TEST(describe(ahead.error()).find("for version 9 on shard 4")
               != std::string::npos,
             describe(ahead.error()));
  auto out_of_range = s.hold_at(0, 0, 100, {1.f, 1.f}, 4);
  BOOST_REQUIRE(!out_of_range);
  BOOST_TEST(s.rows.held() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

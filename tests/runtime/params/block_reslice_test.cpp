#include "runtime/params/block_reslice.hpp"

#include <boost/test/unit_test.hpp>

#include "runtime/base/errc.hpp"

using namespace troupe;
using mode = consistency_mode;

namespace {

constexpr size_t total = 7;

param_block adam(mode m, size_t from, size_t n, int aggregate = 2) {
  param_block::options o;
  o.mode = m;
  o.optimizer.type = optimizer_config::kind::adam;
  o.optimizer.learning_rate = 0.01;
  o.aggregate = aggregate;
  o.stale_momentum = stale_momentum_rule::reduce;
  std::vector<float> initial;
  for (size_t i = from; i < from + n; ++i)
    initial.push_back(0.5f * static_cast<float>(i) - 1.f);
  param_block b{o, std::move(initial)};
  b.add_worker(0);
  b.add_worker(1);
  return b;
}

/// The gradient of push k over the whole flat vector.
std::vector<float> gradient(int k) {
  std::vector<float> g;
  for (size_t i = 0; i < total; ++i)
    g.push_back(0.1f * static_cast<float>(k + 1)
                - 0.03f * static_cast<float>(i));
  return g;
}

/// Blocks holding consecutive slices of the flat vector, as shards do.
struct sliced {
  std::vector<param_block> blocks;
  std::vector<size_t> from;

  sliced(mode m, const std::vector<size_t>& sizes) {
    size_t at = 0;
    for (auto n : sizes) {
      blocks.push_back(adam(m, at, n));
      from.push_back(at);
      at += n;
    }
  }

  /// Push k by worker w to every block, as a worker pushes every shard.
  void push(int k, int32_t w, int64_t tag, int64_t batch) {
    auto g = gradient(k);
    for (size_t s = 0; s < blocks.size(); ++s)
      BOOST_REQUIRE(
        blocks[s].push(w, tag, g.data() + from[s], blocks[s].size(), batch));
  }

  std::vector<float> values() const {
    std::vector<float> out;
    for (auto& b : blocks)
      out.insert(out.end(), b.values()->begin(), b.values()->end());
    return out;
  }

  std::vector<block_image> images() const {
    std::vector<block_image> out;
    for (auto& b : blocks)
      out.push_back(b.image());
    return out;
  }
};

/// The same run on 2 shards, resliced onto `sizes`, goes on bitwise as on
/// one block that never moved.
void check_moves(mode m, const std::vector<size_t>& sizes) {
  sliced whole(m, {total});
  sliced two(m, {3, 4});
  auto tag = [&](int k) {
    return m == mode::sync ? whole.blocks[0].version()
                           : whole.blocks[0].version() - k % 2;
  };
  for (int k = 0; k < 5; ++k) { // sync: update 2 is under way at the end
    auto t = tag(k);
    whole.push(k, k % 2, t, k);
    two.push(k, k % 2, t, k);
  }
  auto images = reslice(two.images(), sizes);
  BOOST_REQUIRE(images);
  sliced moved(m, sizes);
  for (size_t s = 0; s < sizes.size(); ++s) {
    moved.blocks[s].forget_workers(); // the image brings them
    BOOST_REQUIRE(!moved.blocks[s].load((*images)[s]));
    BOOST_TEST(moved.blocks[s].version() == whole.blocks[0].version());
  }
  BOOST_TEST(moved.values() == whole.values());
  for (int k = 5; k < 11; ++k) {
    auto t = tag(k);
    whole.push(k, k % 2, t, k);
    moved.push(k, k % 2, t, k);
  }
  BOOST_TEST(moved.values() == whole.values());
  BOOST_TEST(moved.blocks.back().version() == whole.blocks[0].version());
  if (m == mode::async) { // a batch applied before the move is a duplicate
    auto g = gradient(0);
    auto r = moved.blocks[0].push(0, moved.blocks[0].version(), g.data(),
                                  moved.blocks[0].size(), 2);
    BOOST_REQUIRE(r);
    BOOST_TEST((*r == param_block::outcome::duplicate));
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(block_reslice)

BOOST_AUTO_TEST_CASE(async_adam_goes_on_bitwise_on_1_3_and_4_shards) {
  check_moves(mode::async, {total});
  check_moves(mode::async, {2, 2, 3});
  check_moves(mode::async, {1, 2, 2, 2});
}

BOOST_AUTO_TEST_CASE(a_sync_update_under_way_is_cut_with_the_values) {
  check_moves(mode::sync, {total});
  check_moves(mode::sync, {2, 2, 3});
  check_moves(mode::sync, {4, 1, 1, 1});
}

BOOST_AUTO_TEST_CASE(
  shards_that_disagree_or_sizes_that_do_not_add_up_are_refused) {
  sliced two(mode::sync, {3, 4});
  two.push(0, 0, 0, -1);
  two.push(1, 1, 0, -1); // update 1 applied on both
  auto images = two.images();
  images[1].version = 0; // one shard an update behind (a sync takeover)
  auto r = reslice(images, {total});
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::invalid_argument));
  BOOST_TEST(describe(r.error()).find("versions 1 and 0") != std::string::npos);
  // A sync shard may count a backup worker's push that another dropped as
  // stale: the clocks then differ, which only ssp needs to agree.
  images = two.images();
  images[1].clocks[0] += 1;
  BOOST_TEST(!reslice(images, {total}, true));
  BOOST_TEST(static_cast<bool>(reslice(images, {total}, false)));
  auto wrong = reslice(two.images(), {3, 3});
  BOOST_REQUIRE(!wrong);
  BOOST_TEST((wrong.error() == errc::wrong_size));
  BOOST_TEST(!reslice({}, {total}));
}

BOOST_AUTO_TEST_SUITE_END()

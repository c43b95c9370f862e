// Click logs read where they lie (runtime/data/click_stream.hpp): parts,
// gzipped or plain, read a block at a time give the samples the in-memory
// reader gives, in any order; the epochs' interleaved order visits each
// part's blocks in file order; a part that changes or goes missing during
// a run is named.
#include "runtime/data/click_stream.hpp"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>
#include <chrono>

#include "runtime/base/errc.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/dataset.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

const click_schema schema{2, 3, 1000};

/// `n` lines whose sample is recognisable from its numeric fields
/// (part * 1000 + line), some with several or no values in a field.
std::string lines(int part, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += std::to_string(i % 3 == 0 ? 1 : 0) + "\t"
         + std::to_string(part * 1000 + i) + "\t" + std::to_string(i % 7)
         + "\tt" + std::to_string(i % 11) + ",u" + std::to_string(i % 5) + "\t"
         + (i % 4 == 0 ? std::string{} : "v" + std::to_string(i)) + "\tw\n";
    if (i % 50 == 0)
      s += "\n"; // blank lines are not samples
  }
  return s;
}

/// Three parts of 130, 70 and 201 samples: gzipped, plain, gzipped.
std::vector<std::string> write_parts(const temp_dir& dir) {
  write_gz(dir.file("part-0.tsv.gz"), lines(0, 130));
  write_file(dir.file("part-1.tsv"), lines(1, 70));
  write_gz(dir.file("part-2.tsv.gz"), lines(2, 201));
  return {dir.file("part-0.tsv.gz"), dir.file("part-1.tsv"),
          dir.file("part-2.tsv.gz")};
}

/// The parts of write_parts, read whole by the in-memory reader (the
/// samples a stream must give), and opened as a stream of `block`-sample
/// blocks (`check_lines`: every line parsed at the open).
struct opened_parts {
  temp_dir dir;
  std::vector<std::string> paths = write_parts(dir);
  click_data all;
  std::shared_ptr<troupe::click_stream> stream;

  opened_parts(size_t block, bool check_lines) {
    auto whole = load_click_logs(paths, schema);
    BOOST_REQUIRE_MESSAGE(whole, why(whole));
    all = std::move(*whole);
    auto s = troupe::click_stream::open(paths, schema, block, check_lines);
    BOOST_REQUIRE_MESSAGE(s, why(s));
    stream = *s;
  }
};

/// Sample i of `all` and sample k of `got` hold the same values.
bool same_sample(const click_data& all, int64_t i, const click_data& got,
                 int64_t k) {
  if (all.labels[static_cast<size_t>(i)] != got.labels[static_cast<size_t>(k)])
    return false;
  for (int j = 0; j < 2; ++j)
    if (all.numeric[static_cast<size_t>(i * 2 + j)]
        != got.numeric[static_cast<size_t>(k * 2 + j)])
      return false;
  for (int f = 0; f < 3; ++f) {
    auto [a, ae] = all.field(i, f);
    auto [b, be] = got.field(k, f);
    if (!std::equal(a, ae, b, be))
      return false;
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(click_stream)

BOOST_AUTO_TEST_CASE(parts_read_in_blocks_give_the_in_memory_samples) {
  opened_parts parts{32, true};
  BOOST_TEST(parts.all.count == 401);
  BOOST_TEST(parts.stream->count() == 401);
  BOOST_TEST((parts.stream->part_sizes() == std::vector<size_t>{130, 70, 201}));
  // Two epochs of the interleaved order, a batch of 24 at a time.
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto order = interleaved_order(parts.stream->part_sizes(), 5, epoch, 32);
    for (size_t at = 0; at < order.size(); at += 24) {
      auto n = static_cast<int>(std::min<size_t>(24, order.size() - at));
      auto got = parts.stream->read(order.data() + at, n);
      BOOST_REQUIRE_MESSAGE(got, why(got));
      BOOST_REQUIRE(got->count == n);
      for (int k = 0; k < n; ++k)
        BOOST_REQUIRE(
          same_sample(parts.all, order[at + static_cast<size_t>(k)], *got, k));
    }
  }
  auto stats = parts.stream->stats();
  // 15 blocks, each parsed once, by a read or ahead of it (they all fit
  // the cache, so the second epoch reads none); no part read again.
  BOOST_TEST(stats.blocks == 15);
  BOOST_TEST(stats.reopened == 0);
  BOOST_TEST(stats.file_bytes > 0);
}

BOOST_AUTO_TEST_CASE(a_set_that_follows_a_folder_takes_parts_at_its_end) {
  // data.follow: a stream opened on the first part takes the others as
  // they come, while it is read; its samples stay where they were.
  opened_parts parts{32, true};
  auto first = troupe::click_stream::open({parts.paths[0]}, schema, 32, true);
  BOOST_REQUIRE_MESSAGE(first, why(first));
  auto& s = **first;
  uint32_t i = 129;
  BOOST_REQUIRE(s.read(&i, 1));
  auto count = s.follow({parts.paths[0], parts.paths[1]});
  BOOST_REQUIRE_MESSAGE(count, why(count));
  BOOST_TEST(*count == 200);
  count = s.follow(parts.paths); // the two it has again, and one more
  BOOST_REQUIRE_MESSAGE(count, why(count));
  BOOST_TEST(*count == 401);
  BOOST_TEST((s.part_sizes() == std::vector<size_t>{130, 70, 201}));
  for (uint32_t k = 0; k < 401; k += 7) {
    auto got = s.read(&k, 1);
    BOOST_REQUIRE_MESSAGE(got, why(got));
    BOOST_REQUIRE(same_sample(parts.all, k, *got, 0));
  }
  // Parts named otherwise than before are refused, and nothing changes.
  auto other = s.follow({parts.paths[1], parts.paths[0]});
  BOOST_REQUIRE(!other);
  BOOST_TEST(why(other).find("click logs: part 0 is " + parts.paths[0]
                             + " here but " + parts.paths[1])
               != std::string::npos,
             why(other));
  BOOST_TEST(s.count() == 401);
  // A part that cannot be read is named, and not taken.
  auto bad = s.follow({parts.paths[0], parts.paths[1], parts.paths[2],
                       parts.dir.file("missing.tsv")});
  BOOST_REQUIRE(!bad);
  BOOST_TEST(why(bad).find("missing.tsv") != std::string::npos, why(bad));
  BOOST_TEST(s.parts().size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_block_behind_its_part_reopens_the_part) {
  opened_parts parts{16, false};
  // Backwards, one sample at a time: every block from a cursor behind it
  // or a reopened part, and all still the file's samples.
  for (uint32_t i = 401; i-- > 0;) {
    auto got = parts.stream->read(&i, 1);
    BOOST_REQUIRE_MESSAGE(got, why(got));
    BOOST_REQUIRE(same_sample(parts.all, i, *got, 0));
  }
  BOOST_TEST(parts.stream->stats().reopened > 0);
  uint32_t past = 401;
  BOOST_TEST(!parts.stream->read(&past, 1));
}

BOOST_AUTO_TEST_CASE(a_parts_next_block_is_read_ahead_while_one_is_used) {
  opened_parts parts{32, true};
  BOOST_TEST(parts.stream->stats().blocks
             == 0); // nothing read before a batch asks
  uint32_t first = 0;
  click_read_stats cost;
  auto got = parts.stream->read(&first, 1, &cost);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_TEST(cost.file_bytes > 0);
  // The next block of part 0 comes in the background (bounded wait).
  for (int i = 0; i < 500 && parts.stream->stats().read_ahead == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_REQUIRE(parts.stream->stats().read_ahead >= 1);
  // Its samples are then there: no wait, its reading charged to this
  // call, which used it first.
  std::vector<uint32_t> next(32);
  std::iota(next.begin(), next.end(), 32u);
  click_read_stats cost2;
  got = parts.stream->read(next.data(), 32, &cost2);
  BOOST_REQUIRE_MESSAGE(got, why(got));
  BOOST_TEST(cost2.stalled == 0.0);
  BOOST_TEST(cost2.file_bytes >= 0);
  for (int k = 0; k < 32; ++k)
    BOOST_REQUIRE(same_sample(parts.all, 32 + k, *got, k));
  BOOST_TEST(parts.stream->stats().blocks >= 2);
  BOOST_TEST(parts.stream->stats().stalled
             > 0.0); // the first block was waited for
}

BOOST_AUTO_TEST_CASE(the_interleaved_order_keeps_each_parts_blocks_in_order) {
  std::vector<size_t> parts{100, 7, 250, 64};
  auto a = interleaved_order(parts, 3, 0, 16);
  BOOST_TEST(a == interleaved_order(parts, 3, 0, 16));
  BOOST_TEST(a != interleaved_order(parts, 3, 1, 16));
  BOOST_TEST(a != interleaved_order(parts, 4, 0, 16));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> all(421);
  std::iota(all.begin(), all.end(), 0u);
  BOOST_TEST(sorted == all); // a permutation
  // Each run of a block holds one block of one part, each part's blocks
  // come in file order, and at most two parts are begun and not done.
  auto two = interleaved_order(parts, 3, 0, 16, 2);
  for (auto* order : {&a, &two}) {
    std::vector<size_t> first{0, 100, 107, 357}, next = first;
    size_t at = 0, most_open = 0;
    while (at < order->size()) {
      auto p = static_cast<size_t>(
        std::upper_bound(first.begin(), first.end(), (*order)[at])
        - first.begin() - 1);
      auto count = std::min<size_t>(16, first[p] + parts[p] - next[p]);
      std::vector<uint32_t> block(order->begin() + static_cast<ptrdiff_t>(at),
                                  order->begin()
                                    + static_cast<ptrdiff_t>(at + count));
      std::sort(block.begin(), block.end());
      for (size_t i = 0; i < count; ++i)
        BOOST_REQUIRE(block[i] == next[p] + i);
      next[p] += count;
      at += count;
      size_t open = 0;
      for (size_t q = 0; q < parts.size(); ++q)
        open += next[q] > first[q] && next[q] < first[q] + parts[q];
      most_open = std::max(most_open, open);
    }
    BOOST_TEST(most_open <= (order == &two ? 2u : 4u));
  }
  BOOST_TEST(two != a);
}

BOOST_AUTO_TEST_CASE(a_part_that_changes_or_goes_missing_is_named) {
  temp_dir dir;
  auto paths = write_parts(dir);
  auto s = troupe::click_stream::open(paths, schema, 32, true);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  uint32_t in_part_1 = 150, in_part_2 = 300;
  BOOST_REQUIRE((*s)->read(&in_part_1, 1));
  // Rewritten with other lines: another size.
  write_file(paths[1], lines(1, 69));
  // Part 1's next block (162-193) may have been read ahead before the
  // change, and holds what the part held; the one after it was not.
  uint32_t other_block = 195;
  auto changed = (*s)->read(&other_block, 1);
  BOOST_REQUIRE(!changed);
  BOOST_TEST(describe(changed.error())
             == paths[1] + ": this dataset file changed during the run ("
                  + std::to_string(lines(1, 70).size()) + " bytes when opened, "
                  + std::to_string(lines(1, 69).size()) + " now)");
  std::remove(paths[2].c_str());
  auto gone = (*s)->read(&in_part_2, 1);
  BOOST_REQUIRE(!gone);
  BOOST_TEST((gone.error() == errc::data_changed));
  BOOST_TEST((changed.error() == errc::data_changed));
  BOOST_TEST(describe(gone.error())
             == paths[2]
                  + ": this dataset file went missing during the "
                    "run");
}

BOOST_AUTO_TEST_CASE(bad_parts_are_refused_with_the_part_and_line) {
  temp_dir dir;
  auto paths = write_parts(dir);
  write_gz(paths[2], lines(2, 20) + "1\t0.5\t1\tx\ty\n");
  auto checked = troupe::click_stream::open(paths, schema, 32, true);
  BOOST_REQUIRE(!checked);
  BOOST_TEST(describe(checked.error())
             == paths[2]
                  + ":22: 5 columns, expected 6 (1 label, 2 numeric, "
                    "3 categorical)");
  // Counted only (the chief): the line is not parsed.
  BOOST_TEST(
    static_cast<bool>(troupe::click_stream::open(paths, schema, 32, false)));
  write_file(paths[1], "\n\n");
  auto empty = troupe::click_stream::open(paths, schema, 32, false);
  BOOST_REQUIRE(!empty);
  BOOST_TEST(describe(empty.error()) == paths[1] + ": no click lines");
  // A gzip stream cut short.
  auto whole = lines(0, 130);
  write_gz(paths[0], whole);
  std::string gz;
  {
    std::ifstream in{paths[0], std::ios::binary};
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  write_file(paths[0], gz.substr(0, gz.size() / 2));
  auto cut = troupe::click_stream::open(paths, schema, 32, false);
  BOOST_REQUIRE(!cut);
  BOOST_TEST(describe(cut.error()).find(paths[0] + ": corrupt compressed data")
             == 0);
}

BOOST_AUTO_TEST_SUITE_END()

#include "runtime/params/param_layout.hpp"

#include <boost/test/unit_test.hpp>

#include "runtime/base/errc.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(param_layout)

BOOST_AUTO_TEST_CASE(tensors_are_packed_back_to_back) {
  troupe::param_layout layout;
  BOOST_TEST(layout.add("w", {3, 4}) == 0u);
  BOOST_TEST(layout.add("b", {4}) == 12u);
  BOOST_TEST(layout.add("s", {}) == 16u);
  BOOST_TEST(layout.total() == 17u);
  BOOST_TEST(layout.find("b")->size == 4u);
  BOOST_TEST(layout.find("nope") == nullptr);
  BOOST_CHECK_THROW(layout.add("w", {1}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(split_is_balanced_and_ignores_tensor_boundaries) {
  troupe::param_layout layout;
  layout.add("big", {1000});
  layout.add("small", {3});
  for (size_t n : {1u, 2u, 3u, 7u, 1003u}) {
    auto ranges = layout.split(n);
    BOOST_REQUIRE(ranges);
    BOOST_TEST(ranges->size() == n);
    size_t expect_begin = 0, smallest = SIZE_MAX, largest = 0;
    for (auto& r : *ranges) {
      BOOST_TEST(r.begin == expect_begin); // contiguous, no gaps
      expect_begin = r.end;
      smallest = std::min(smallest, r.size());
      largest = std::max(largest, r.size());
    }
    BOOST_TEST(expect_begin == layout.total());
    BOOST_TEST(largest - smallest <= 1u);
  }
  auto two = layout.split(2);
  BOOST_TEST((*two)[0].end == 501u); // cuts through "big"
}

BOOST_AUTO_TEST_CASE(split_refuses_impossible_counts) {
  troupe::param_layout layout;
  layout.add("w", {4});
  auto zero = layout.split(0);
  BOOST_REQUIRE(!zero);
  BOOST_TEST(describe(zero.error())
             == "cannot split 4 parameters into 0 shards");
  BOOST_TEST(!layout.split(5));
}

BOOST_AUTO_TEST_CASE(compare_names_the_first_difference) {
  troupe::param_layout a, b;
  a.add("w", {2, 3});
  b.add("w", {3, 2});
  auto err = a.compare(b);
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err) == "tensor 0 is w (3x2), expected w (2x3)");
  BOOST_TEST(!a.compare(a));
}

BOOST_AUTO_TEST_CASE(slices_and_gather_are_inverse) {
  std::vector<float> flat(10);
  for (size_t i = 0; i < flat.size(); ++i)
    flat[i] = static_cast<float>(i);
  std::vector<flat_range> ranges{{0, 4}, {4, 7}, {7, 10}};
  std::vector<std::vector<float>> parts;
  for (auto r : ranges)
    parts.push_back(slice_of(flat, r));
  BOOST_TEST(parts[1] == (std::vector<float>{4, 5, 6}));
  std::vector<const std::vector<float>*> ptrs;
  for (auto& p : parts)
    ptrs.push_back(&p);
  auto back = gather_parts(ranges, ptrs);
  BOOST_REQUIRE(back);
  BOOST_TEST(*back == flat);
}

BOOST_AUTO_TEST_CASE(gather_refuses_parts_that_do_not_fit) {
  std::vector<flat_range> ranges{{0, 2}, {2, 4}};
  std::vector<float> a{1, 2}, short_one{3};
  auto wrong = gather_parts(ranges, {&a, &short_one});
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(describe(wrong.error()) == "part 1 has 1 values for a range of 2");
  BOOST_TEST(!gather_parts(ranges, {&a}));
  BOOST_TEST(!gather_parts({{0, 2}, {3, 4}}, {&a, &a})); // a gap
  BOOST_TEST(!gather_parts(ranges, {&a, nullptr}));
}

BOOST_AUTO_TEST_CASE(buffers_within_a_range_are_relative_to_its_start) {
  troupe::param_layout l;
  l.add("w", {4});                  // [0, 4)
  l.add_buffer("mean", {3}, "F32"); // [4, 7)
  l.add_buffer("count", {}, "I64"); // [7, 8)
  l.add("b", {2});                  // [8, 10)
  BOOST_TEST(l.has_buffers());
  BOOST_TEST(l.tensors()[2].dtype == "I64");
  auto whole = l.buffers_within(flat_range{0, 10});
  BOOST_REQUIRE(whole.size() == 1u); // adjacent buffers: one part
  BOOST_TEST((whole[0] == flat_range{4, 8}));
  auto cut = l.buffers_within(flat_range{5, 9});
  BOOST_REQUIRE(cut.size() == 1u);
  BOOST_TEST((cut[0] == flat_range{0, 3}));
  BOOST_TEST(l.buffers_within(flat_range{8, 10}).empty());
  troupe::param_layout plain;
  plain.add("w", {4});
  BOOST_TEST(!plain.has_buffers());
}

BOOST_AUTO_TEST_SUITE_END()

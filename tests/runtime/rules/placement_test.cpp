#include "runtime/rules/placement.hpp"

#include <boost/test/unit_test.hpp>

using namespace troupe;

BOOST_AUTO_TEST_SUITE(placement)

BOOST_AUTO_TEST_CASE(the_fewest_loaded_up_node_meant_for_the_kind_wins) {
  std::vector<node_slot> nodes{{"chief", true, false, 0},
                               {"w0", true, true, 3},
                               {"w1", true, true, 1},
                               {"w2", false, true, 0}}; // down
  BOOST_TEST(least_loaded(nodes, fallback::any_node) == "w1");
  BOOST_TEST(least_loaded(nodes, fallback::meant_only) == "w1");
}

BOOST_AUTO_TEST_CASE(a_meant_node_beats_any_load_of_the_others) {
  std::vector<node_slot> nodes{{"chief", true, false, 0},
                               {"w0", true, true, 1000}};
  BOOST_TEST(least_loaded(nodes, fallback::any_node) == "w0");
}

BOOST_AUTO_TEST_CASE(other_nodes_take_it_only_when_allowed) {
  std::vector<node_slot> nodes{
    {"chief", true, false, 2}, {"ps0", true, false, 1}, {"w0", false, true, 0}};
  BOOST_TEST(least_loaded(nodes, fallback::any_node) == "ps0");
  BOOST_TEST(least_loaded(nodes, fallback::meant_only).empty());
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_first_and_nothing_up_is_empty) {
  std::vector<node_slot> nodes{{"a", true, true, 1}, {"b", true, true, 1}};
  BOOST_TEST(least_loaded(nodes, fallback::any_node) == "a");
  nodes[0].up = nodes[1].up = false;
  BOOST_TEST(least_loaded(nodes, fallback::any_node).empty());
  BOOST_TEST(least_loaded({}, fallback::any_node).empty());
}

BOOST_AUTO_TEST_SUITE_END()

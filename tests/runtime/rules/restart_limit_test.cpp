#include "runtime/rules/restart_limit.hpp"

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(restart_limit)

BOOST_AUTO_TEST_CASE(restarts_count_within_a_sliding_window) {
  troupe::restart_limit limit{2, 60};
  BOOST_TEST(limit.allow(0));
  BOOST_TEST(limit.allow(10));
  BOOST_TEST(!limit.allow(50)); // a third within 60 s: refused, not counted
  BOOST_TEST(limit.recent() == 2);
  BOOST_TEST(limit.allow(61)); // the first has left the window
  BOOST_TEST(limit.recent() == 2);
  BOOST_TEST(limit.allow(200)); // both before it have left
  // What the log says: restarts within the window, never more than the
  // limit, beside the run's total.
  BOOST_TEST(limit.recent() == 1);
  BOOST_TEST(limit.total() == 4);
}

BOOST_AUTO_TEST_SUITE_END()

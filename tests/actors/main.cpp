// Boost.Test runner for the tests of actors/.
#define BOOST_TEST_MODULE troupe_actors
#include <boost/test/unit_test.hpp>

// Boost.Test runner for the tests of apps/.
#define BOOST_TEST_MODULE troupe_apps
#include <boost/test/unit_test.hpp>

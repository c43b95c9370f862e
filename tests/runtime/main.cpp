// Boost.Test runner for the tests of runtime/.
#define BOOST_TEST_MODULE troupe_runtime
#include <boost/test/unit_test.hpp>

// Boost.Test runner for the tests of gpu/.
#define BOOST_TEST_MODULE troupe_gpu
#include <boost/test/unit_test.hpp>

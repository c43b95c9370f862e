// Boost.Test runner for the tests of models/.
#define BOOST_TEST_MODULE troupe_models
#include <boost/test/unit_test.hpp>

// Boost.Test runner for the multi-process tests: real troupe-node and
// troupe-shell processes talking over 127.0.0.1.
#define BOOST_TEST_MODULE troupe_cluster
#include <boost/test/unit_test.hpp>

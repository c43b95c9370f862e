// The CUDA device probe: runs where a GPU is, skips with the reason where
// none is, and is absent from CPU-only builds.
#include <boost/test/unit_test.hpp>

#include "cuda_device.hpp"
#include "runtime/base/build_config.hpp"
#if TROUPE_HAVE_CUDA
#include "gpu/device_probe.hpp"
#endif

BOOST_AUTO_TEST_SUITE(device_probe)

#if TROUPE_HAVE_CUDA

BOOST_AUTO_TEST_CASE(probe_never_fails_hard) {
  auto probe = troupe::gpu::probe_devices();
  BOOST_TEST_MESSAGE("CUDA devices: " << probe.count << " "
                                      << (probe.count ? "" : probe.error));
  BOOST_TEST((probe.count > 0 || !probe.error.empty()));
}

BOOST_AUTO_TEST_CASE(devices_have_names, *boost::unit_test::precondition(
                                           troupe::test::has_cuda_device)) {
  auto probe = troupe::gpu::probe_devices();
  for (auto& name : probe.names)
    BOOST_TEST_MESSAGE("device: " << name);
  BOOST_TEST(probe.names.size() == static_cast<size_t>(probe.count));
}

#else

BOOST_AUTO_TEST_CASE(built_without_cuda) {
  BOOST_TEST_MESSAGE("skipped: troupe was built without CUDA");
  BOOST_TEST(!TROUPE_HAVE_CUDA);
}

#endif

BOOST_AUTO_TEST_SUITE_END()

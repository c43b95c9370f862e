// Boost.Test precondition for tests that need a CUDA device: they run
// where one is and are skipped with the reason (no driver, no device, a
// build without CUDA) everywhere else.
#pragma once

#include <boost/test/unit_test.hpp>

#include "runtime/base/build_config.hpp"
#if TROUPE_HAVE_CUDA
#include "gpu/device_probe.hpp"
#endif

namespace troupe::test {

/// Use as `*boost::unit_test::precondition(test::has_cuda_device)`. A
/// function, not a functor: GCC 12 warns (-Werror) about the empty
/// functor's uninitialised bytes that boost::function copies.
inline boost::test_tools::assertion_result
has_cuda_device(boost::unit_test::test_unit_id) {
#if TROUPE_HAVE_CUDA
  auto probe = gpu::probe_devices();
  boost::test_tools::assertion_result result{probe.count > 0};
  if (probe.count == 0)
    result.message() << "skipped: no usable CUDA device (" << probe.error
                     << ")";
  return result;
#else
  boost::test_tools::assertion_result result{false};
  result.message() << "skipped: troupe was built without CUDA";
  return result;
#endif
}

} // namespace troupe::test

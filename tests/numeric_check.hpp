// Helpers for the numeric tests of the backends: seeded random vectors and
// an element-wise comparison that prints the first misses side by side.
#pragma once

#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/base/random.hpp"

namespace troupe::test {

/// n values uniform in [lo, hi), the same for the same seed.
inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1,
                                        float hi = 1) {
  splitmix64 rng{seed};
  std::vector<float> v(n);
  for (auto& x : v)
    x = lo + (hi - lo) * static_cast<float>(rng.uniform01());
  return v;
}

/// The GEMM shapes {m, n, k} every backend is tried on: ones, odd sizes, a
/// 1 and a 0 (an empty product) in each place, and sizes past a SIMD
/// register's; then `more` (a backend's own: past its split or its tiles).
inline std::vector<std::array<int, 3>>
gemm_sizes(const std::vector<std::array<int, 3>>& more) {
  std::vector<std::array<int, 3>> sizes{{1, 1, 1},    {3, 5, 7}, {17, 1, 9},
                                        {0, 4, 3},    {4, 0, 3}, {4, 3, 0},
                                        {33, 65, 129}};
  sizes.insert(sizes.end(), more.begin(), more.end());
  return sizes;
}

/// |got - want| <= tol * (1 + |want|) everywhere (NaN matches NaN); names
/// the first five elements that miss, and how many missed in all.
inline void check_close(const std::vector<float>& got,
                        const std::vector<float>& want, float tol,
                        const std::string& label) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  int misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (both_nan
        || std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))
      continue;
    if (++misses <= 5)
      BOOST_ERROR(label << ": element " << i << " is " << got[i]
                        << ", expected " << want[i]);
  }
  if (misses > 5)
    BOOST_ERROR(label << ": " << misses << " elements missed in all");
}

} // namespace troupe::test

// splitmix64: a tiny, well-mixed generator whose output is fixed by the
// algorithm, unlike std::*_distribution's, so shuffles and initial weights
// are the same on every platform and in every process of a cluster.
#pragma once

#include <cmath>
#include <cstdint>

namespace troupe {

/// splitmix64's finalizer: a 64-bit mix of `x` that also spreads
/// neighbouring and Zipf-skewed ids over hash buckets and shards.
inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct splitmix64 {
  uint64_t state;

  uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }

  /// Uniform in [0, bound) by rejection (no modulo bias); bound > 0.
  uint64_t below(uint64_t bound) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do
      x = next();
    while (x >= limit);
    return x % bound;
  }

  /// Uniform in [0, 1).
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Standard normal (Box-Muller).
  double normal() {
    double u1 = uniform01(), u2 = uniform01();
    if (u1 < 1e-300)
      u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

} // namespace troupe

// The row ids of one round of the sparse pull/push benchmarks: `count`
// distinct ids in [0, vocabulary), sorted (ps-lite's KVWorker requires
// sorted keys; a troupe shard takes any order), drawn from (seed, round)
// alone, so that apps/bench/bench_rows.cpp and ps-lite's reference
// (bench/pslite_rows.cc) push and pull the same keys. Header-only C++14:
// the reference is built apart from troupe, against ps-lite.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace bench {

inline std::vector<uint64_t> row_ids(uint64_t seed, int round, size_t count,
                                     uint64_t vocabulary) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(round));
  std::vector<uint64_t> ids;
  ids.reserve(count);
  while (ids.size() < count) {
    while (ids.size() < count)
      ids.push_back(rng() % vocabulary);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  return ids;
}

} // namespace bench

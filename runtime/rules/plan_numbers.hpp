// How batch_plan numbers the batches of a worker's own stream (its two
// files, batch_plan.cpp and batch_plan_saved.cpp, share it): plan number
// (worker + 1) << stream_bits | k. 2^40 batches per worker and 2^22
// workers fit an int64. Private to runtime/rules/batch_plan*.cpp.
#pragma once

#include <cstdint>

namespace troupe::plan_numbers {

constexpr int stream_bits = 40;
constexpr int64_t stream_mask = (int64_t{1} << stream_bits) - 1;
constexpr int32_t max_worker_id = (1 << 22) - 2;

} // namespace troupe::plan_numbers

// The CPU compute backend: gemm on OpenBLAS, everything else plain loops
// written so that GCC vectorises them.
#pragma once

#include <memory>

#include "runtime/backend.hpp"

namespace troupe {

/// Makes a CPU backend whose gemm runs on `threads` OpenBLAS threads
/// (>= 1). OpenBLAS's thread count is process-wide: the last backend made
/// sets it. Throws std::runtime_error when OpenBLAS cannot be loaded.
std::unique_ptr<compute_backend> make_cpu_backend(int threads);

} // namespace troupe

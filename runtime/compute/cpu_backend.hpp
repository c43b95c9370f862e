// The CPU compute backend: gemm on OpenBLAS, convolutions on troupe's own
// kernels, everything else plain loops written so that GCC vectorises them.
#pragma once

#include <memory>

#include "runtime/compute/backend.hpp"

namespace troupe {

/// Makes a CPU backend that computes on `threads` threads (>= 1) of its own
/// pool (thread_pool.hpp): large gemms are split into blocks, each one
/// single-threaded OpenBLAS call, and convolutions run directly
/// (cpu_conv.hpp) split by images; `direct_conv` false keeps im2col + gemm
/// (for comparisons). OpenBLAS itself runs one thread per call
/// (blas_loader.hpp). Throws std::runtime_error when OpenBLAS cannot be
/// loaded.
std::unique_ptr<compute_backend> make_cpu_backend(int threads,
                                                  bool direct_conv = true);

} // namespace troupe

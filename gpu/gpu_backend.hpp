// The GPU compute backend: cuBLAS for gemm, troupe's kernels (kernels.cu)
// for the rest. A plain C++ boundary: callers outside gpu/ see no CUDA
// header.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <cstdint>
#include <memory>

#include "caf/expected.hpp"
#include "runtime/compute/backend.hpp"

namespace troupe::gpu {

/// Device time by kind of operation, from CUDA events around each one.
struct time_split {
  double kernel_ms = 0; ///< our kernels and cuBLAS calls
  double copy_ms = 0;   ///< host <-> device DMAs
  int64_t kernel_ops = 0;
  int64_t copy_ops = 0;
};

/// One device, one stream, one cuBLAS handle, reused step to step. Every
/// operation is queued on the stream; upload() returns before its DMA is
/// done (from allocate_host() memory directly, from any other memory
/// through a pinned staging slot), download() and softmax_cross_entropy()
/// wait for the stream. Failures throw backend_error naming the CUDA or
/// cuBLAS call.
class gpu_backend : public compute_backend {
public:
  /// The CUDA device index.
  virtual int device() const = 0;
  /// Times every operation with a pair of CUDA events while on. The
  /// events cost a little per operation, so a benchmark measures speed
  /// and the split in separate passes.
  virtual void set_profiling(bool on) = 0;
  /// The split since profiling was switched on; waits for the stream.
  virtual time_split profile() = 0;
  /// Waits until every queued operation is done.
  virtual void synchronize() = 0;
};

/// A backend on CUDA device `device`. errc::backend_unavailable naming
/// the reason when there is no such device or it cannot be set up.
caf::expected<std::unique_ptr<gpu_backend>> make_gpu_backend(int device);

} // namespace troupe::gpu

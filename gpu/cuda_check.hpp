// CUDA and cuBLAS status codes -> troupe::backend_error naming the call and
// where it was made. Inside gpu/ only.
//
// Why exceptions here when troupe's errors are values (caf::error): the
// backend interface is called in the inner loop of a training step, and a
// device failure ends the step wherever it happens. The worker's exception
// handler turns the backend_error into errc::worker_failed, a value the
// chief receives like any other worker failure and answers with a restart.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <new>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace troupe::gpu {

/// Throws backend_error "<function> failed: <error name>: <error string>
/// (gpu/<file>:<line>)" unless status is cudaSuccess; <function> is the
/// name of the call, e.g. "cudaMalloc".
void cuda_check(cudaError_t status, const char* call, const char* file,
                int line);

/// The same for cuBLAS, with cublasGetStatusString.
void cublas_check(cublasStatus_t status, const char* call, const char* file,
                  int line);

/// After a kernel launch: a bad launch configuration shows up at once,
/// a fault inside the kernel at the next synchronising call.
void launch_check(const char* kernel, const char* file, int line);

/// Makes `device` current for this thread and restores the previous one
/// on exit. CAF may run an actor's handlers on any scheduler thread, and
/// CUDA's current device is per thread, so every backend entry point opens
/// one of these.
class device_scope {
public:
  /// Throws backend_error when the device cannot be made current.
  explicit device_scope(int device);
  /// For noexcept paths (freeing memory): a failure is ignored, and the
  /// calls that follow report their own errors, if anyone is left to hear.
  device_scope(int device, std::nothrow_t) noexcept;
  ~device_scope();
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

private:
  int previous_ = -1;
};

} // namespace troupe::gpu

#define TROUPE_CUDA(call)                                                      \
  ::troupe::gpu::cuda_check((call), #call, __FILE__, __LINE__)
#define TROUPE_CUBLAS(call)                                                    \
  ::troupe::gpu::cublas_check((call), #call, __FILE__, __LINE__)
#define TROUPE_LAUNCHED(kernel)                                                \
  ::troupe::gpu::launch_check(kernel, __FILE__, __LINE__)

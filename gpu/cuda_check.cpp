#include "gpu/cuda_check.hpp"

#include <string>

#include "runtime/compute/backend.hpp"

namespace troupe::gpu {

namespace {

[[noreturn]] void fail(const std::string& what, const char* file, int line) {
  // Clear a non-sticky error (an allocation that did not fit, a refused
  // argument), or the next launch_check would report it again. A sticky
  // one (a fault inside a kernel) stays: the context is lost for good.
  (void)cudaGetLastError();
  std::string where = file;
  // The path as the compiler saw it may be absolute; the file name is
  // enough to find the call.
  auto slash = where.find_last_of('/');
  if (slash != std::string::npos)
    where = "gpu/" + where.substr(slash + 1);
  throw backend_error{what + " (" + where + ":" + std::to_string(line) + ")"};
}

/// "cudaMalloc(&ptr, bytes)" -> "cudaMalloc": the call's name, not its
/// arguments, which say little out of context.
std::string name_of(const char* call) {
  std::string text = call;
  return text.substr(0, text.find('('));
}

} // namespace

void cuda_check(cudaError_t status, const char* call, const char* file,
                int line) {
  if (status == cudaSuccess)
    return;
  fail(name_of(call) + " failed: " + cudaGetErrorName(status) + ": "
         + cudaGetErrorString(status),
       file, line);
}

void cublas_check(cublasStatus_t status, const char* call, const char* file,
                  int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  fail(name_of(call) + " failed: " + cublasGetStatusName(status) + ": "
         + cublasGetStatusString(status),
       file, line);
}

void launch_check(const char* kernel, const char* file, int line) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess)
    return;
  // The error may be this launch's (a bad configuration) or a fault of an
  // earlier kernel on the device that the runtime reports only now.
  fail(std::string{"launching "} + kernel + " reported "
         + cudaGetErrorName(status) + ": " + cudaGetErrorString(status),
       file, line);
}

device_scope::device_scope(int device) {
  TROUPE_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device)
    TROUPE_CUDA(cudaSetDevice(device));
  else
    previous_ = -1; // nothing to restore
}

device_scope::device_scope(int device, std::nothrow_t) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess || previous_ == device
      || cudaSetDevice(device) != cudaSuccess)
    previous_ = -1; // nothing to restore
}

device_scope::~device_scope() {
  if (previous_ >= 0)
    cudaSetDevice(previous_); // a destructor must not throw
}

} // namespace troupe::gpu

#include "runtime/compute/blas_loader.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <stdexcept>

#include "runtime/base/build_config.hpp"
#include "runtime/compute/cpu_features.hpp"

namespace troupe::blas {

namespace {

template <class Fn>
Fn symbol(void* handle, const char* name) {
  auto* ptr = dlsym(handle, name);
  if (ptr == nullptr)
    throw std::runtime_error(std::string{"OpenBLAS lacks symbol "} + name);
  return reinterpret_cast<Fn>(ptr);
}

library load() {
  library lib;
  const char* inherited_ptr = std::getenv("OPENBLAS_CORETYPE");
  const bool had_coretype = inherited_ptr != nullptr;
  const std::string inherited = had_coretype ? inherited_ptr : "";
  const char* policy_ptr = std::getenv("TROUPE_BLAS_KERNELS");
  const std::string policy = policy_ptr != nullptr ? policy_ptr : "auto";
  const std::string from_env = had_coretype
                                 ? " (OPENBLAS_CORETYPE=" + inherited + ")"
                                 : "";
  std::string coretype; // what we ask for, or "" to leave the env alone
  if (policy == "auto" || policy.empty()) {
    if (cpu_runs_avx512()) {
      coretype = "SkylakeX";
      lib.choice = "auto: AVX-512 usable, SkylakeX kernels";
      if (had_coretype && inherited != coretype)
        lib.choice += " (instead of OPENBLAS_CORETYPE=" + inherited + ")";
    } else {
      lib.choice = "auto: no AVX-512, OpenBLAS's choice" + from_env;
    }
  } else if (policy == "default") {
    lib.choice = "default: OpenBLAS's choice" + from_env;
  } else {
    coretype = policy;
    lib.choice = "TROUPE_BLAS_KERNELS=" + policy;
  }
  // OpenBLAS reads OPENBLAS_CORETYPE in its constructor, i.e. inside
  // dlopen. First use happens at start-up, before other threads read the
  // environment.
  if (!coretype.empty())
    setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
  // One thread per call, always: troupe's backends split large gemms over
  // pools of their own (cpu_backend.cpp), so OpenBLAS's pthread pool would
  // only run beside them, and its idle threads spin in sched_yield for 2^28
  // cycles after each call (7 s of system time per 23 s of user time on the
  // CNN with 2 threads). Read in the constructor: set here, OpenBLAS starts
  // no threads at all; the call after loading covers builds that ignore it.
  const char* inherited_threads_ptr = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string inherited_threads = inherited_threads_ptr != nullptr
                                          ? inherited_threads_ptr
                                          : "";
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  void* handle = dlopen(TROUPE_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw std::runtime_error(std::string{"cannot load "}
                             + TROUPE_OPENBLAS_SONAME + ": " + dlerror()
                             + " (install libopenblas0 or libopenblas-dev)");
  lib.sgemm = symbol<sgemm_fn>(handle, "cblas_sgemm");
  lib.set_num_threads = symbol<void (*)(int)>(handle,
                                              "openblas_set_num_threads");
  lib.get_num_threads = symbol<int (*)()>(handle, "openblas_get_num_threads");
  auto corename = symbol<char* (*)()>(handle, "openblas_get_corename");
  lib.core = corename();
  lib.set_num_threads(1);
  if (inherited_threads_ptr != nullptr)
    setenv("OPENBLAS_NUM_THREADS", inherited_threads.c_str(), 1);
  else
    unsetenv("OPENBLAS_NUM_THREADS");
  if (!coretype.empty()) {
    if (had_coretype)
      setenv("OPENBLAS_CORETYPE", inherited.c_str(), 1);
    else
      unsetenv("OPENBLAS_CORETYPE");
  }
  // The handle stays open for the life of the process, on purpose.
  return lib;
}

} // namespace

const library& get() {
  static const library lib = load();
  return lib;
}

} // namespace troupe::blas

#include "runtime/compute/cpu_features.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace troupe {

bool cpu_runs_avx2_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_runs_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd")
         && __builtin_cpu_supports("avx512bw")
         && __builtin_cpu_supports("avx512dq")
         && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

namespace {

cpu_kernels choose() {
  const char* asked_ptr = std::getenv("TROUPE_CPU_KERNELS");
  const std::string asked = asked_ptr != nullptr ? asked_ptr : "";
  if (asked.empty() || asked == "auto")
    return cpu_runs_avx512()     ? cpu_kernels::avx512
           : cpu_runs_avx2_fma() ? cpu_kernels::avx2
                                 : cpu_kernels::generic;
  if (asked == "generic")
    return cpu_kernels::generic;
  if (asked == "avx2" && cpu_runs_avx2_fma())
    return cpu_kernels::avx2;
  if (asked == "avx512" && cpu_runs_avx512())
    return cpu_kernels::avx512;
  throw std::runtime_error(
    "TROUPE_CPU_KERNELS=" + asked
    + (asked == "avx512" || asked == "avx2"
         ? ": this CPU (or its OS) does not run that instruction set"
         : ": unknown; use auto, avx512, avx2 or generic"));
}

} // namespace

cpu_kernels chosen_cpu_kernels() {
  static const cpu_kernels chosen = choose();
  return chosen;
}

} // namespace troupe

// vector_loops.hpp built for AVX-512 (runtime/CMakeLists.txt gives this
// file alone -mavx512f and friends); used only where
// the CPU and the OS run it.
#include "runtime/compute/cpu_features.hpp"

#if defined(__x86_64__) && defined(__AVX512F__)

#include "runtime/compute/vector_loops.hpp"

namespace troupe::vec {
const kernels* avx512_kernels() {
  static const kernels set = make_set("avx512");
  return cpu_runs_avx512() ? &set : nullptr;
}
} // namespace troupe::vec

#else

#include "runtime/compute/vector_kernels.hpp"

namespace troupe::vec {
const kernels* avx512_kernels() {
  return nullptr;
}
} // namespace troupe::vec

#endif

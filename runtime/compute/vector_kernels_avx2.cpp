// vector_loops.hpp built for AVX2+FMA (runtime/CMakeLists.txt gives this
// file alone -mavx2 -mfma); used only where the CPU runs both.
#include "runtime/compute/cpu_features.hpp"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)

#include "runtime/compute/vector_loops.hpp"

namespace troupe::vec {
const kernels* avx2_kernels() {
  static const kernels set = make_set("avx2+fma");
  return cpu_runs_avx2_fma() ? &set : nullptr;
}
} // namespace troupe::vec

#else

#include "runtime/compute/vector_kernels.hpp"

namespace troupe::vec {
const kernels* avx2_kernels() {
  return nullptr;
}
} // namespace troupe::vec

#endif
